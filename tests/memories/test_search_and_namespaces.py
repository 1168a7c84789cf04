"""GET /v1/namespaces, text search on GET /v1/memories (q=), and unknown query parameters."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import all_memories, store

EN = [
    {"msg_id": "1", "role": "user", "content": "We decided to use PostgreSQL for billing."},
]
EN_OTHER = [
    {"msg_id": "1", "role": "user", "content": "My cat Luna likes sleeping on the sofa."},
]
ZH = [{"msg_id": "1", "role": "user", "content": "下周二上午我要去医院体检。"}]
ZH_OTHER = [{"msg_id": "1", "role": "user", "content": "周末我们一家去海边看日落。"}]


class TestNamespaces:
    async def test_lists_every_namespace_with_counts(self, client: Any) -> None:
        assert (await client.get("/v1/namespaces")).json() == {"namespaces": []}
        await store(client, EN, namespace="alice", session_id="a1", pinned=True)
        await store(client, ZH, namespace="alice", session_id="a2")
        await store(client, EN_OTHER, namespace="bob", session_id="b1")
        body = (await client.get("/v1/namespaces")).json()
        listed = {n["namespace"]: n for n in body["namespaces"]}
        assert [n["namespace"] for n in body["namespaces"]] == ["alice", "bob"]
        assert (listed["alice"]["memories"], listed["alice"]["sessions"],
                listed["alice"]["pinned"]) == (2, 2, 1)
        assert (listed["bob"]["memories"], listed["bob"]["sessions"],
                listed["bob"]["pinned"]) == (1, 1, 0)
        assert listed["alice"]["last_stored_at"] is not None

    async def test_a_scoped_key_sees_only_its_own(self, open_client: Any) -> None:
        keys = {"alice-key-0123456789": ["alice"], "bob-key-01234567890": ["bob"]}
        async with open_client(token="admin-key-0123456789", admin_keys=["admin-key-0123456789"],
                               namespace_keys=keys) as admin:
            await store(admin, EN, namespace="alice")
            await store(admin, EN_OTHER, namespace="bob")
            names = [n["namespace"] for n in (await admin.get("/v1/namespaces")).json()[
                "namespaces"]]
            assert names == ["alice", "bob"]
            scoped = await admin.get("/v1/namespaces",
                                     headers={"Authorization": "Bearer alice-key-0123456789"})
            assert [n["namespace"] for n in scoped.json()["namespaces"]] == ["alice"]
            anonymous = await admin.get("/v1/namespaces", headers={"Authorization": ""})
            assert anonymous.status_code == 401


class TestTextSearch:
    @pytest.mark.parametrize(("query", "expected"), [
        ("PostgreSQL", "PostgreSQL"), ("which database for billing", "PostgreSQL"),
        ("体检", "体检"), ("海边", "日落"),
    ])
    async def test_q_finds_the_matching_memory_first(self, client: Any, query: str,
                                                     expected: str) -> None:
        for session, msgs in (("en", EN), ("en2", EN_OTHER), ("zh", ZH), ("zh2", ZH_OTHER)):
            await store(client, msgs, session_id=session)
        items = await all_memories(client, q=query)
        assert items and expected in items[0]["text"]
        assert all(isinstance(m["score"], float) for m in items)
        assert [m["score"] for m in items] == sorted((m["score"] for m in items), reverse=True)

    async def test_q_is_combined_with_the_other_filters(self, client: Any) -> None:
        await store(client, EN, session_id="en")
        await store(client, [{"msg_id": "1", "role": "user",
                              "content": "PostgreSQL backups run every night."}],
                    session_id="other", pinned=True)
        found = await all_memories(client, q="PostgreSQL", session_id="en")
        assert [m["session_id"] for m in found] == ["en"]
        found = await all_memories(client, q="PostgreSQL", pinned="true")
        assert [m["session_id"] for m in found] == ["other"]
        assert await all_memories(client, q="PostgreSQL", namespace="bob") == []

    async def test_without_q_the_listing_is_newest_first_without_score(self, client: Any
                                                                       ) -> None:
        await store(client, EN, session_id="first")
        await store(client, ZH, session_id="second")
        items = await all_memories(client)
        assert [m["session_id"] for m in items] == ["second", "first"]
        assert all(m["score"] is None for m in items)

    async def test_blank_q_is_422(self, client: Any) -> None:
        response = await client.get("/v1/memories", params={"namespace": "alice", "q": "  "})
        assert response.status_code == 422
        assert "q" in response.json()["error"]["message"]


class TestSearchFloor:
    """`q=` scores on recall's 0–1 relevance scale and lists nothing below a floor."""

    @pytest.mark.parametrize(("query", "expected"), [
        ("which database do we use for billing?", "PostgreSQL"),
        ("我什么时候去体检？", "体检"),
    ])
    async def test_a_related_query_lists_the_fact_first(self, client: Any, query: str,
                                                        expected: str) -> None:
        for session, msgs in (("en", EN), ("en2", EN_OTHER), ("zh", ZH), ("zh2", ZH_OTHER)):
            await store(client, msgs, session_id=session)
        response = await client.get("/v1/memories", params={"namespace": "alice", "q": query})
        body = response.json()
        assert body["items"] and expected in body["items"][0]["text"], body
        assert body["min_score"] == 0.35  # the model's recall threshold, by default
        assert all(m["score"] >= 0.35 for m in body["items"]), body["items"]
        assert body["count"] == len(body["items"])
        # The memory a recall of the same text finds best (recall's relevance may be
        # higher: its second hop searches again with the memory's own line).
        recalled = (await client.post("/v1/recall", json={
            "namespace": "alice", "query": query})).json()["memories"]
        assert recalled[0]["id"] == body["items"][0]["id"]
        assert recalled[0]["explain"]["relevance"] >= body["items"][0]["score"]

    @pytest.mark.parametrize("query", ["quantum chromodynamics lecture notes",
                                       "量子力学的期末考试", "favourite pizza topping",
                                       "我最喜欢什么颜色"])
    async def test_an_unrelated_query_lists_nothing(self, client: Any, query: str) -> None:
        for session, msgs in (("en", EN), ("en2", EN_OTHER), ("zh", ZH), ("zh2", ZH_OTHER)):
            await store(client, msgs, session_id=session)
        response = await client.get("/v1/memories", params={"namespace": "alice", "q": query})
        assert response.status_code == 200, response.text
        assert (response.json()["items"], response.json()["count"]) == ([], 0)
        # A floor of 0 lists every candidate, weakest last.
        everything = await all_memories(client, q=query, min_score=0)
        assert len(everything) == 4
        assert all(m["score"] < 0.35 for m in everything), everything

    async def test_the_setting_and_the_call_set_the_floor(self, open_client: Any) -> None:
        # The question holds words the memory does not ("which", "database"): it matches
        # well (about 0.75), not perfectly.
        question = {"namespace": "alice", "q": "which database do we use for billing?"}
        async with open_client(memory_search_min_score=0.9) as client:
            await store(client, ZH_OTHER, session_id="zh2")
            await store(client, EN, session_id="en")
            body = (await client.get("/v1/memories", params=question)).json()
            assert (body["items"], body["min_score"]) == ([], 0.9)
            body = (await client.get("/v1/memories", params={**question,
                                                              "min_score": 0.5})).json()
            assert body["min_score"] == 0.5
            assert [m["session_id"] for m in body["items"]] == ["en"]

    async def test_min_score_needs_q_and_lies_in_0_1(self, client: Any) -> None:
        for params in ({"min_score": 0.5}, {"q": "cat", "min_score": 1.5}):
            response = await client.get("/v1/memories", params={"namespace": "alice",
                                                                **params})
            assert response.status_code == 422, response.text
            fields = [d["field"] for d in response.json()["error"]["details"]]
            assert fields == ["query.min_score"], fields
        listed = (await client.get("/v1/memories", params={"namespace": "alice"})).json()
        assert listed["min_score"] is None


class TestUnknownQueryParameters:
    @pytest.mark.parametrize("path", [
        "/v1/memories?namespace=alice&serach=x", "/v1/namespaces?all=1",
        "/v1/namespaces/alice/sessions?limit=5", "/healthz?verbose=1",
        "/v1/namespaces/alice/export?vector=true",
    ])
    async def test_an_unknown_parameter_is_422_naming_it(self, client: Any, path: str
                                                         ) -> None:
        response = await client.get(path)
        assert response.status_code == 422, response.text
        name = path.rsplit("&", 1)[-1].split("?")[-1].split("=")[0]
        error = response.json()["error"]
        assert error["code"] == "invalid_request"
        assert any(d["field"] == f"query.{name}" for d in error["details"]), error

    async def test_a_post_route_refuses_them_too(self, client: Any) -> None:
        # `wait` belongs in the body: as a query parameter it was silently ignored.
        response = await client.post("/v1/store?wait=false", json={
            "namespace": "alice", "session_id": "s1",
            "messages": [{"role": "user", "content": "我明天去北京出差。"}]})
        assert response.status_code == 422
        assert response.json()["error"]["details"][0]["field"] == "query.wait"
        assert await all_memories(client) == []

    async def test_declared_parameters_still_work(self, client: Any) -> None:
        await store(client, EN)
        response = await client.get("/v1/memories", params={"namespace": "alice", "limit": 1})
        assert response.status_code == 200 and response.json()["count"] == 1
        assert (await client.get("/v1/namespaces/alice/export?vectors=false")).status_code == 200
