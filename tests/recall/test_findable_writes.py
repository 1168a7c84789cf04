"""`wait=true`, the default (once `wait="findable"`): the answer means the next recall finds
what was just stored, by its words and by each new turn's own vector, while the grown chunk
is built in the background.

Through the HTTP API with real LanceDB and the real model. The build is held back as in
test_read_your_writes.py: the test holds the namespace's write lock, which every build
takes and a `wait=true` store does not (it takes only the raw-log lock), so the messages
stay pending, with their own vectors held, until the test lets go.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.embedding.names import E5_NAME
from tests.helpers import metric_by_label, wait_idle
from tests.recall.test_recall_api import recall

# Facts told in one language, asked about in the other: no word in common (with the
# dictionary's translations off, as these tests run), so only the turn's own vector can
# find them.
ACROSS_CASES = {
    "en-told": {"content": "My blood type is O negative.", "query": "我的血型是什么？"},
    "zh-told": {"content": "我的牙医预约在下周四上午十点。",
                "query": "When is my dentist appointment?"},
}
ACROSS = ACROSS_CASES["en-told"]
# Facts found by their own words, in each language.
FACTS = {
    "en": {"content": "My new passport number ends in 4471 and expires in March 2031.",
           "query": "When does my passport expire?", "word": "passport"},
    "zh": {"content": "我的新护照号码尾号是4471，二〇三一年三月到期。",
           "query": "我的护照什么时候到期？", "word": "护照"},
}
REPLY = {"en": "Noted, I'll remind you before it expires.", "zh": "好的，到期前我会提醒你。"}


_DEFAULT = object()  # send no `wait`: the server's default, true


async def store(client: Any, contents: list[str], *, wait: Any = _DEFAULT,
                namespace: str = "alice", session_id: str = "s1", first: int = 1,
                expect: int | None = None) -> dict[str, Any]:
    """Store user/assistant turns f<first>, f<first+1>, … of one session (202 expected
    for wait=false, else 200)."""
    response = await client.post("/v1/store", json={
        "namespace": namespace, "session_id": session_id,
        **({} if wait is _DEFAULT else {"wait": wait}),
        "messages": [{"msg_id": f"f{first + i}", "role": "user" if i % 2 == 0 else "assistant",
                      "content": content} for i, content in enumerate(contents)]})
    assert response.status_code == (expect or (202 if wait is False else 200)), response.text
    body: dict[str, Any] = response.json()
    return body


def holding(body: dict[str, Any], msg_id: str, session_id: str = "s1") -> list[dict[str, Any]]:
    return [m for m in body["memories"]
            if m["session_id"] == session_id and msg_id in m["msg_ids"]]


def held(client: Any) -> int:
    rows: int = client.app.state.engram.repo.pending_vectors.held_rows
    return rows


@pytest.fixture
async def e5_client(open_client: Any, e5: Any) -> Any:
    """An app on multilingual-e5-small: a model that reads both languages."""
    async with open_client(with_model=e5, embedding_model=E5_NAME) as client:
        yield client


class TestTheAnswer:
    @pytest.mark.parametrize("wait", [_DEFAULT, True, "findable"])
    async def test_the_default_answers_once_findable_with_a_job_that_builds(
            self, client: Any, wait: Any) -> None:
        engram = client.app.state.engram
        async with engram.locks.hold("alice"):  # no build can run: the answer came first
            body = await store(client, [FACTS["en"]["content"], REPLY["en"]], wait=wait)
            assert body["status"] == "stored" and body["job_id"], body
            assert (body["new"], body["memories_created"]) == (2, []), body
            assert held(client) == 2  # each new turn's own vector, before the answer
            job = (await client.get(f"/v1/jobs/{body['job_id']}")).json()
            assert job["state"] == "queued", job
        await wait_idle(client)
        job = (await client.get(f"/v1/jobs/{body['job_id']}")).json()
        assert job["state"] == "done" and job["result"]["memories_created"], job

    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_more_new_turns_than_a_few_are_built_before_the_answer(
            self, client: Any, language: str) -> None:
        """A session sent whole (an import) with the default: built before the answer (one
        pass of the model, not each turn's own and then the chunks'), its memories in the
        answer, its job done and the session readable at once. A few turns more are held
        by their own vectors again."""
        line = {"en": "On day {} of the trip we hiked to lake number {}.",
                "zh": "旅行第{}天，我们徒步去了第{}个湖。"}[language]
        body = await store(client, [line.format(i, i) for i in range(10)])
        assert body["status"] == "stored" and body["new"] == 10, body
        assert body["memories_created"] and held(client) == 0, body
        job = (await client.get(f"/v1/jobs/{body['job_id']}")).json()
        assert job["state"] == "done" and job["result"]["memories_created"], job
        session = await client.get("/v1/namespaces/alice/sessions/s1")
        assert session.status_code == 200 and session.json()["message_count"] == 10, session.text
        more = await store(client, [FACTS[language]["content"], REPLY[language]], first=11)
        assert (more["memories_created"], held(client)) == ([], 2), more
        await wait_idle(client)

    async def test_built_and_false_keep_their_answers(self, client: Any) -> None:
        built = await store(client, [FACTS["en"]["content"]], wait="built")
        assert built["status"] == "stored" and built["memories_created"], built
        queued = await store(client, [REPLY["en"]], wait=False, first=2)
        assert queued["status"] == "queued" and queued["job_id"], queued
        assert held(client) == 0  # neither embeds a turn on its own
        await wait_idle(client)

    @pytest.mark.parametrize("wait", ["fast", "true", "BUILT", 1, None, ["built"]])
    async def test_any_other_wait_value_is_a_422_naming_the_valid_ones(
            self, client: Any, wait: Any) -> None:
        response = await client.post("/v1/store", json={
            "namespace": "alice", "session_id": "s1", "wait": wait,
            "messages": [{"role": "user", "content": "hello there"}]})
        assert response.status_code == 422, response.text
        assert 'true, false or \\"built\\"' in response.text, response.text


class TestFoundAtOnce:
    @pytest.mark.parametrize("language", ["en", "zh"])
    async def test_a_recall_right_after_finds_the_new_turns(
            self, e5_client: Any, language: str) -> None:
        client, fact = e5_client, FACTS[language]
        async with client.app.state.engram.locks.hold("alice"):
            await store(client, [fact["content"], REPLY[language]])
            body = await recall(client, fact["query"])
            [memory] = holding(body, "f1")
            assert memory["provisional"] is True and memory["id"] == "pending:s1:f1", body
            assert fact["word"] in memory["text"] and fact["word"] in body["block"]
            assert client.app.state.engram.hits.pending == 0  # provisional: no hit
        await wait_idle(client)

    @pytest.mark.parametrize("case", sorted(ACROSS_CASES))
    async def test_a_turn_sharing_no_word_with_the_question_is_found_by_its_own_vector(
            self, open_client: Any, e5: Any, case: str) -> None:
        """A question in one language about a turn just stored in the other: `findable`
        finds it, and the same turn stored with `wait=false` (words only) is not found.
        Without the dictionary's translations (bilingual.py): the vector alone."""
        fact = ACROSS_CASES[case]
        async with open_client(with_model=e5, embedding_model=E5_NAME,
                               recall_across_languages=False) as client:
            async with client.app.state.engram.locks.hold("alice"), \
                    client.app.state.engram.locks.hold("bob"):
                await store(client, [fact["content"]], wait=False, namespace="bob")
                assert (await recall(client, fact["query"], namespace="bob"))["memories"] == []
                await store(client, [fact["content"]])
                body = await recall(client, fact["query"])
                [memory] = holding(body, "f1")
                assert memory["provisional"] is True, body
                assert memory["text"] == f"user: {fact['content']}"
                assert memory["explain"]["keyword"] == 0, memory
                assert memory["explain"]["relevance"] >= body["min_score"], memory
            await wait_idle(client)
            after = await recall(client, fact["query"])
            assert [m["provisional"] for m in holding(after, "f1")] == [False], after

    async def test_no_duplicate_once_the_build_lands(self, e5_client: Any) -> None:
        client = e5_client
        async with client.app.state.engram.locks.hold("alice"):
            await store(client, [ACROSS["content"], REPLY["en"]])
            before = await recall(client, ACROSS["query"])
            assert [m["provisional"] for m in holding(before, "f1")] == [True], before
        await wait_idle(client)
        assert held(client) == 0  # the build landed: its turns' own vectors are gone
        for query in (ACROSS["query"], "What is my blood type?"):
            after = await recall(client, query)
            found = holding(after, "f1")
            assert len(found) == 1 and found[0]["provisional"] is False, after
            assert found[0]["id"].startswith("mem_")
            assert not any(m["provisional"] for m in after["memories"]), after

    async def test_another_namespace_never_sees_them(self, e5_client: Any) -> None:
        client = e5_client
        async with client.app.state.engram.locks.hold("bob"):
            await store(client, [ACROSS["content"]], namespace="bob")
            await store(client, [FACTS["zh"]["content"]], namespace="bob", session_id="s2")
            for query in (ACROSS["query"], FACTS["zh"]["query"]):
                assert (await recall(client, query))["memories"] == []
            bob = await recall(client, ACROSS["query"], namespace="bob")
            assert "pending:s1:f1" in [m["id"] for m in bob["memories"]], bob
        await wait_idle(client)
        for query in (ACROSS["query"], FACTS["zh"]["query"]):
            assert (await recall(client, query))["memories"] == []

    async def test_the_requests_filters_apply(self, e5_client: Any) -> None:
        client = e5_client
        async with client.app.state.engram.locks.hold("alice"):
            await store(client, [ACROSS["content"]])
            assert (await recall(client, ACROSS["query"], session_id="s2"))["memories"] == []
            assert (await recall(client, ACROSS["query"], branch="other"))["memories"] == []
            assert (await recall(client, ACROSS["query"],
                                 categories=["note"]))["memories"] == []
            assert holding(await recall(client, ACROSS["query"], session_id="s1"), "f1")
        await wait_idle(client)

    async def test_an_edited_turn_is_matched_by_its_new_content_only(
            self, e5_client: Any) -> None:
        """The held vector is the content's: after an edit with `wait=false` (no new
        vector) the old content's vector is not used for the new words."""
        client = e5_client
        async with client.app.state.engram.locks.hold("alice"):
            await store(client, [ACROSS["content"]])
            assert holding(await recall(client, ACROSS["query"]), "f1")
            await store(client, ["The boiler service is booked for the 14th."], wait=False)
            assert holding(await recall(client, ACROSS["query"]), "f1") == []
        await wait_idle(client)


class TestTheHolder:
    async def test_it_is_bounded_reported_and_emptied_by_the_build(
            self, open_client: Any) -> None:
        async with open_client(pending_vectors_max_rows=3) as client:
            repo = client.app.state.engram.repo
            async with client.app.state.engram.locks.hold("alice"):
                await store(client, [f"Note {i}: the spare key is in drawer {i}."
                                     for i in range(5)])
                assert held(client) == 3
                # The oldest went first: the last three turns keep their vectors.
                messages = {m.msg_id: m for m in await repo.pending_messages("alice")}
                kept = [i for i, m in messages.items() if repo.pending_vectors.get(
                    "alice", "s1", i, m.content_hash) is not None]
                assert sorted(kept) == ["f3", "f4", "f5"]
                text = (await client.get("/metrics")).text
                gauge = metric_by_label(text, "engram_memory_held", "what")
                assert gauge["pending_vector_rows"] == 3
            await wait_idle(client)
            assert held(client) == 0
            gauge = metric_by_label((await client.get("/metrics")).text,
                                    "engram_memory_held", "what")
            assert gauge["pending_vector_rows"] == 0

    async def test_a_deleted_session_takes_its_vectors(self, client: Any) -> None:
        async with client.app.state.engram.locks.hold("alice"):
            await store(client, [FACTS["en"]["content"]])
            assert held(client) == 1
        response = await client.delete("/v1/namespaces/alice/sessions/s1")
        assert response.status_code in (200, 204), response.text
        await wait_idle(client)
        assert held(client) == 0

    async def test_with_no_room_findable_is_found_by_keyword(self, open_client: Any) -> None:
        async with open_client(pending_vectors_max_rows=0) as client:
            async with client.app.state.engram.locks.hold("alice"):
                body = await store(client, [FACTS["en"]["content"]])
                assert body["status"] == "stored" and body["job_id"]
                assert held(client) == 0
                assert holding(await recall(client, FACTS["en"]["query"]), "f1")
            await wait_idle(client)
