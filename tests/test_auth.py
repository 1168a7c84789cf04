"""API keys: admin keys see everything; namespace keys only their namespaces."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from app.config import Settings
from tests.helpers import all_memories, messages, store

ADMIN = "admin-key-0123456789abcdef"
ALICE = "alice-key-0123456789abcdef"
KEYS = {"admin_keys": [ADMIN], "namespace_keys": {ALICE: ["alice"]}}


class TestNamespaceKeys:
    async def test_limited_key_cannot_touch_another_namespace(self, open_client: Any) -> None:
        async with open_client(token=ADMIN, **KEYS) as admin:
            await store(admin, messages(0, 6), namespace="bob")
            (bob_memory,) = await all_memories(admin, namespace="bob")
        async with open_client(token=ALICE, **KEYS) as alice:
            await store(alice, messages(0, 6), namespace="alice")
            denied = [
                await alice.post("/v1/store", json={"namespace": "bob", "session_id": "x",
                                                    "messages": messages(0, 2)}),
                await alice.get("/v1/memories", params={"namespace": "bob"}),
                await alice.get("/v1/namespaces/bob/sessions"),
                await alice.delete("/v1/namespaces/bob/sessions/s1"),
                await alice.delete("/v1/namespaces/bob"),
            ]
            for response in denied:
                assert response.status_code == 403, (response.request.url, response.text)
                assert "namespace 'bob'" in response.json()["error"]["message"]
            # By id, another namespace's memory is as unknown as an id that never existed.
            for response in [await alice.get(f"/v1/memories/{bob_memory['id']}"),
                             await alice.delete(f"/v1/memories/{bob_memory['id']}")]:
                assert response.status_code == 404, (response.request.url, response.text)
            assert len(await all_memories(alice, namespace="alice")) == 1
        async with open_client(token=ADMIN, **KEYS) as admin:
            assert await all_memories(admin, namespace="bob") == [bob_memory]

    @pytest.mark.parametrize("header", [None, "Bearer wrong-key-0123456789", "Basic abc"])
    async def test_missing_or_unknown_key_is_401(self, open_client: Any, header: str | None
                                                 ) -> None:
        async with open_client(**KEYS) as client:
            headers = {"Authorization": header} if header else {}
            response = await client.get("/v1/memories", params={"namespace": "alice"},
                                        headers=headers)
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"

    async def test_health_needs_no_key(self, open_client: Any) -> None:
        async with open_client(**KEYS) as client:
            assert (await client.get("/healthz")).status_code == 200


class TestNoKeys:
    def test_a_public_host_without_keys_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="without API keys"):
            Settings(host="0.0.0.0", _env_file=None)  # type: ignore[call-arg]

    def test_short_keys_are_refused(self) -> None:
        with pytest.raises(ValidationError, match="at least 16"):
            Settings(admin_keys=["short"], _env_file=None)  # type: ignore[call-arg]
