"""Bad input gets a 4xx that names what was wrong, and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import messages

GOOD = {"namespace": "alice", "session_id": "s1", "messages": messages(0, 3)}


def with_message(index: int, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {**GOOD, "messages": [dict(m) for m in GOOD["messages"]]}
    body["messages"][index].update(changes)
    return body


async def assert_nothing_stored(client: Any) -> None:
    listed = await client.get("/v1/memories", params={"namespace": "alice"})
    assert listed.json()["count"] == 0
    ledger = await client.get("/v1/namespaces/alice/sessions/s1")
    assert ledger.status_code == 404
    tables = (await client.get("/readyz")).json()["tables"]
    assert tables["messages"]["rows"] == 0


class TestRejectedPayloads:
    @pytest.mark.parametrize(
        ("body", "status", "names"),
        [
            (with_message(2, content=""), 422, "messages.2.content"),
            (with_message(1, content="   \n "), 422, "content is blank"),
            (with_message(0, role="robot"), 422, "messages.0.role"),
            ({**GOOD, "namespace": "../etc"}, 422, "namespace"),
            ({**GOOD, "namespace": ""}, 422, "namespace"),
            ({**GOOD, "messages": []}, 422, "messages"),
            ({k: v for k, v in GOOD.items() if k != "session_id"}, 422, "session_id"),
            (with_message(0, unexpected="x"), 422, "unexpected"),
            (with_message(1, msg_id="m0"), 400, "'m0' is sent twice"),
            (with_message(2, timestamp="yesterday"), 422, "timestamp"),
        ],
        ids=["empty-content", "blank-content", "unknown-role", "bad-namespace",
             "empty-namespace", "no-messages", "no-session", "unknown-field",
             "contradicting-ids", "bad-timestamp"],
    )
    async def test_rejected_and_nothing_written(
        self, client: Any, body: dict[str, Any], status: int, names: str
    ) -> None:
        response = await client.post("/v1/store", json=body)
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert names in error["message"], error
        await assert_nothing_stored(client)

    async def test_malformed_json(self, client: Any) -> None:
        response = await client.post(
            "/v1/store", content=b'{"namespace": "alice", "messages": [',
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 422
        assert "JSON" in response.json()["error"]["message"]
        await assert_nothing_stored(client)

    async def test_oversized_message_in_the_middle_writes_nothing(self, open_client: Any
                                                                  ) -> None:
        async with open_client(max_message_chars=500) as client:
            body = with_message(1, content="x" * 501)
            response = await client.post("/v1/store", json=body)
            assert response.status_code == 413
            assert "messages[1].content has 501 characters" in response.json()["error"]["message"]
            await assert_nothing_stored(client)

    async def test_oversized_batch(self, open_client: Any) -> None:
        async with open_client(max_messages_per_request=5) as client:
            response = await client.post("/v1/store", json={**GOOD, "messages": messages(0, 6)})
            assert response.status_code == 413
            assert "the limit is 5" in response.json()["error"]["message"]
            await assert_nothing_stored(client)


class TestUndecodableBody:
    async def test_bytes_that_are_not_utf8_json_are_422(self, client: Any) -> None:
        response = await client.post("/v1/store", content=b"\xff\xfe\x00",
                                     headers={"content-type": "application/json"})
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_request"
        await assert_nothing_stored(client)
