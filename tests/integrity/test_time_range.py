"""One accepted time range, 1970-01-01..2200-01-01 UTC, at every entry point: 422 outside it,
naming the field, never a 500 (an offset can push a year-9999 time past what storage holds)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import all_memories, store

OUTSIDE = [
    "9999-12-31T23:59:59-14:00",  # year 10000 in UTC
    "0001-01-01T00:00:00+14:00",  # year 0 in UTC
    "9999-12-31T23:59:59Z",
    "1969-12-31T23:59:59Z",
    "2200-01-01T00:00:01Z",
    "2200-01-01T09:00:00+08:00",
]
# The bounds themselves, reached through offsets, and a naive time (UTC).
INSIDE = ["1970-01-01T00:00:00Z", "2200-01-01T08:00:00+08:00", "2199-12-31T13:00:00-10:00",
          "2026-11-30T09:00:00"]


def message(timestamp: str, content: str) -> dict[str, Any]:
    return {"role": "user", "content": content, "timestamp": timestamp}


class TestStore:
    @pytest.mark.parametrize("content", ["明天下午三点开会。", "We meet at three tomorrow."])
    async def test_message_times_outside_the_range_are_422_naming_the_field(
        self, client: Any, content: str
    ) -> None:
        for timestamp in OUTSIDE:
            response = await client.post("/v1/store", json={
                "namespace": "alice", "session_id": "s1",
                "messages": [message("2026-11-30T09:00:00Z", "first"),
                             message(timestamp, content)]})
            assert response.status_code == 422, (timestamp, response.text)
            text = response.json()["error"]["message"]
            assert "messages.1.timestamp" in text and "1970-01-01" in text, text
        assert await all_memories(client) == []
        assert (await client.get("/v1/namespaces/alice/export")).status_code == 200

    async def test_times_inside_the_range_with_any_offset_are_stored(self, client: Any
                                                                      ) -> None:
        stored = await store(client, [
            message(t, f"第{i}条消息 message {i}") for i, t in enumerate(INSIDE)])
        assert stored["new"] == len(INSIDE)
        (memory,) = await all_memories(client)
        assert memory["time_start"].startswith("1970-01-01")
        assert memory["time_end"].startswith("2200-01-01T00:00:00")


class TestRecall:
    @pytest.mark.parametrize("field", ["time_from", "time_to", "as_of"])
    async def test_recall_times_outside_the_range_are_422_naming_the_field(
        self, client: Any, field: str
    ) -> None:
        await store(client, [message("2026-11-30T09:00:00Z", "下周二上午去医院体检。")])
        for query in ("体检是哪天？", "When is the check-up?"):
            for value in OUTSIDE:
                response = await client.post("/v1/recall", json={
                    "namespace": "alice", "query": query, field: value})
                assert response.status_code == 422, (field, value, response.text)
                assert field in response.json()["error"]["message"]
            inside = await client.post("/v1/recall", json={
                "namespace": "alice", "query": query, field: "2026-11-30T09:00:00+14:00"})
            assert inside.status_code == 200, inside.text

    async def test_a_naive_and_an_aware_bound_compare_in_utc(self, client: Any) -> None:
        response = await client.post("/v1/recall", json={
            "namespace": "alice", "query": "体检 check-up",
            "time_from": "2026-11-30T09:00:00", "time_to": "2026-11-30T10:00:00+08:00"})
        assert response.status_code == 422, response.text
        assert "time_from is after time_to" in response.json()["error"]["message"]
