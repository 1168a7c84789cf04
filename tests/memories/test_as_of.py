"""`as_of` as a point in time (issue 36): recall and the listing see only the memories that
existed then, by conversation time, superseded as they were then.

Through the HTTP API, Chinese and English: a fact said in June, its change said in November
(another session), an unrelated note in between.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import all_memories, store

JULY = "2026-07-01T00:00:00Z"

# (case, June's fact, November's change, a question, a word only June's fact holds, a word
# only November's change holds)
CASES = [
    ("zh", "下周二上午我要去医院体检，要空腹。", "体检改到周四了，还是上午。",
     "我的体检是哪天？", "周二", "周四"),
    ("en", "We live in Berlin, our flat is near the park.",
     "We moved from Berlin to Munich, our new flat is near the river.",
     "Where is our flat?", "park", "Munich"),
]
UNRELATED = {"zh": "周末想去图书馆看看书。", "en": "Thinking of going to the library this weekend."}


async def store_year(client: Any, case: str, june: str, november: str) -> None:
    """June's fact, an unrelated note in September, November's change: three sessions."""
    for session_id, when, text in (("june", "2026-06-02T09:00:00Z", june),
                                   ("september", "2026-09-10T09:00:00Z", UNRELATED[case]),
                                   ("november", "2026-11-09T09:00:00Z", november)):
        await store(client, [{"msg_id": "1", "role": "user", "content": text,
                              "timestamp": when}], namespace=case, session_id=session_id)


async def recall(client: Any, namespace: str, query: str, **extra: Any) -> dict[str, Any]:
    response = await client.post("/v1/recall", json={"namespace": namespace, "query": query,
                                                     **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
class TestRecallAsOf:
    async def test_july_recalls_june_and_not_november(self, client: Any,
                                                      case: tuple[str, ...]) -> None:
        name, june, november, question, old_word, new_word = case
        await store_year(client, name, june, november)
        # Without as_of both are candidates: the change first, June's fact after it.
        texts = [m["text"] for m in (await recall(client, name, question))["memories"]]
        assert texts and new_word in texts[0], texts
        assert any(old_word in t for t in texts[1:]), texts
        body = await recall(client, name, question, as_of=JULY)
        texts = [m["text"] for m in body["memories"]]
        assert texts and old_word in texts[0], texts
        assert not any(new_word in t for t in texts), texts
        assert {m["session_id"] for m in body["memories"]} == {"june"}
        assert body["candidates"] == 1  # the later sessions are not even searched

    async def test_a_change_after_as_of_does_not_supersede_then(
            self, client: Any, case: tuple[str, ...]) -> None:
        # Between the two: in December June's fact comes after November's change; as of
        # July, November's change does not exist, and June's fact is the answer.
        name, june, november, question, _, new_word = case
        await store_year(client, name, june, november)
        december = await recall(client, name, question, as_of="2026-12-01T00:00:00Z")
        assert new_word in december["memories"][0]["text"]
        july = await recall(client, name, question, as_of=JULY)
        assert [m["session_id"] for m in july["memories"]] == ["june"]

    async def test_why_not_names_as_of(self, client: Any, case: tuple[str, ...]) -> None:
        name, june, november, question, *_ = case
        await store_year(client, name, june, november)
        later = next(m["id"] for m in await all_memories(client, name)
                     if m["session_id"] == "november")
        response = await client.post("/v1/recall/why_not", json={
            "namespace": name, "query": question, "as_of": JULY, "memory_ids": [later]})
        assert response.status_code == 200, response.text
        item = response.json()["items"][0]
        assert (item["verdict"], item["filter"]) == ("filter", "as_of"), item


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
class TestListingAsOf:
    async def test_july_lists_only_june(self, client: Any, case: tuple[str, ...]) -> None:
        name, june, november, question, old_word, _ = case
        await store_year(client, name, june, november)
        assert {m["session_id"] for m in await all_memories(client, name)} == {
            "june", "september", "november"}
        listed = await all_memories(client, name, as_of=JULY)
        assert [m["session_id"] for m in listed] == ["june"]
        response = await client.get("/v1/memories", params={"namespace": name,
                                                            "as_of": "2026-10-01T00:00:00+08:00"})
        assert response.json()["count"] == 2  # June's and September's
        # With q= too: the search sees the snapshot.
        found = await all_memories(client, name, q=question, as_of=JULY)
        assert [m["session_id"] for m in found] == ["june"]
        assert old_word in found[0]["text"]

    async def test_a_bad_as_of_is_422_naming_the_field(self, client: Any,
                                                        case: tuple[str, ...]) -> None:
        name, june, november, *_ = case
        await store_year(client, name, june, november)
        # A time is accepted (the parameter exists), a date of day precision too.
        for good in (JULY, "2026-07-01"):
            response = await client.get("/v1/memories", params={"namespace": name,
                                                                "as_of": good})
            assert response.status_code == 200, response.text
        for bad in ("July", "2026-13-01", "1900-01-01T00:00:00Z"):
            response = await client.get("/v1/memories", params={"namespace": name,
                                                                "as_of": bad})
            assert response.status_code == 422, (bad, response.text)
            fields = [d["field"] for d in response.json()["error"]["details"]]
            assert fields == ["query.as_of"], (bad, fields)
            response = await client.post("/v1/recall", json={
                "namespace": name, "query": "体检", "as_of": bad})
            assert response.status_code == 422, (bad, response.text)
            assert "as_of" in response.json()["error"]["message"], response.text


@pytest.mark.parametrize(("case", "question"), [
    ("zh", "记得刚才说的吗"), ("en", "what I said just now")])
async def test_just_now_points_to_the_latest_session_then(client: Any, case: str,
                                                          question: str) -> None:
    # "刚才 / just now" is the latest session as of then: June's, not November's.
    _, june, november, *_ = next(c for c in CASES if c[0] == case)
    await store_year(client, case, june, november)
    body = await recall(client, case, question, as_of=JULY)
    assert body["reference"] is not None, body
    assert [m["session_id"] for m in body["memories"]] == ["june"], body["memories"]
