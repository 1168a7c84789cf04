"""What a small append (1-4 messages, the auto-capture case) costs in table operations.

Counted on the real LanceDB tables of the real app (each table handle wrapped to record the
calls made on it), not timed: a count says the same on a busy machine and a quiet one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.conftest import make_settings
from tests.helpers import all_memories, wait_idle

# The LanceDB table calls that are a query or a commit.
_COUNTED = ("query", "add", "merge_insert", "update", "delete", "count_rows")

NEW_TURNS = [
    {"msg_id": "t3", "role": "user", "content": "Remind me: the dentist moved to Friday 10am."},
    {"msg_id": "t4", "role": "assistant", "content": "好的，牙医预约改到周五上午十点，我记下了。"},
]


class _Recorded:
    """A LanceDB table that notes each query or commit made on it."""

    def __init__(self, table: Any, name: str, calls: list[tuple[str, str]]) -> None:
        self._table, self._name, self._calls = table, name, calls

    def __getattr__(self, attr: str) -> Any:
        if attr in _COUNTED:
            self._calls.append((self._name, attr))
        return getattr(self._table, attr)


@contextmanager
def recording(repo: Any) -> Iterator[list[tuple[str, str]]]:
    """Every query and commit the repository makes on any table while the block runs."""
    calls: list[tuple[str, str]] = []
    originals = dict(repo._tables)
    for name, table in originals.items():
        recorded = _Recorded(table, name, calls)
        repo._tables[name] = recorded
        repo.writers[name]._table = recorded
    try:
        yield calls
    finally:
        for name, table in originals.items():
            repo._tables[name] = table
            repo.writers[name]._table = table


async def seed_session(client: Any) -> None:
    response = await client.post("/v1/store", json={
        "namespace": "alice", "session_id": "s1", "messages": [
            {"msg_id": "t1", "role": "user", "content": "I moved to Lisbon in May."},
            {"msg_id": "t2", "role": "user", "content": "我下周二去杭州出差。"}],
        "wait": "built"})
    assert response.status_code == 200, response.text


class TestCheapAcknowledgement:
    async def test_ack_of_two_new_messages_is_one_round_of_appends(self, client: Any) -> None:
        repo = client.app.state.engram.repo
        await seed_session(client)
        await wait_idle(client)
        store = client.app.state.engram.store
        await store.stop()  # the ack alone: its background build must not run meanwhile
        with recording(repo) as calls:
            response = await client.post("/v1/store", json={
                "namespace": "alice", "session_id": "s1", "wait": False,
                "messages": NEW_TURNS})
        assert response.status_code == 202, response.text
        assert response.json()["new"] == 2
        # The session's stored messages are held since the store above wrote them
        # (app/storage/log_cache.py): no read; then its new rows and the job appended (one
        # round, two tables): no merge, which joins its rows against the whole table.
        assert sorted(calls) == [("jobs", "add"), ("messages", "add")], calls

        # Acknowledged means durable and followed by the job: a restart-free check of both.
        assert await repo.count_messages("alice", "s1") == 4
        job_id = response.json()["job_id"]
        job = (await client.get(f"/v1/jobs/{job_id}")).json()
        assert job["state"] == "queued" and job["result"]["new"] == 2
        store.start()
        await wait_idle(client)
        job = (await client.get(f"/v1/jobs/{job_id}")).json()
        assert job["state"] == "done", job
        texts = " ".join(m["text"] for m in await all_memories(client))
        assert "dentist" in texts and "牙医" in texts

    async def test_a_changed_message_is_merged_not_appended_twice(self, client: Any) -> None:
        repo = client.app.state.engram.repo
        await seed_session(client)
        edited = [{"msg_id": "t2", "role": "user", "content": "我下周三去杭州出差。"}, NEW_TURNS[0]]
        response = await client.post("/v1/store", json={
            "namespace": "alice", "session_id": "s1", "wait": False, "messages": edited})
        assert response.status_code == 202, response.text
        assert (response.json()["new"], response.json()["updated"]) == (1, 1)
        await wait_idle(client)
        rows = await repo.session_messages("alice", "s1")
        assert [r.msg_id for r in rows] == ["t1", "t2", "t3"]  # each once, t2 in its place
        assert rows[1].content == "我下周三去杭州出差。"
        assert {r.state for r in rows} == {"done"}


class TestRawLogCache:
    """The session identities a `wait=false` store counts against, held between stores."""

    async def test_a_repeated_ack_reads_and_writes_nothing(self, client: Any) -> None:
        repo = client.app.state.engram.repo
        await seed_session(client)
        store = client.app.state.engram.store
        await store.stop()  # the acks alone: their background build must not run meanwhile
        for expected in (202, 200):  # the second time: every message already stored
            with recording(repo) as calls:
                response = await client.post("/v1/store", json={
                    "namespace": "alice", "session_id": "s1", "wait": False,
                    "messages": NEW_TURNS})
            assert response.status_code == expected, response.text
        assert response.json()["status"] == "unchanged"
        assert (response.json()["new"], response.json()["skipped"]) == (0, 2)
        assert calls == [], calls
        store.start()
        await wait_idle(client)
        rows = await repo.session_messages("alice", "s1")
        assert [r.msg_id for r in rows] == ["t1", "t2", "t3", "t4"]
        assert {r.state for r in rows} == {"done"}

    async def test_off_the_ack_reads_the_raw_log(self, open_client: Any) -> None:
        # Reads that may lag other processes' commits cannot prove a held session current.
        for overrides in ({"raw_log_cache_max_rows": 0}, {"read_consistency_seconds": 1}):
            async with open_client(**overrides) as client:
                repo = client.app.state.engram.repo
                await seed_session(client)
                await wait_idle(client)
                with recording(repo) as calls:
                    response = await client.post("/v1/store", json={
                        "namespace": "alice", "session_id": "s1", "wait": False,
                        "messages": NEW_TURNS})
                assert response.status_code in (200, 202), response.text
                assert calls[0] == ("messages", "query"), (overrides, calls)
                assert repo.log_cache.held_sessions == 0

    async def test_held_messages_stay_within_the_cap(self, open_client: Any) -> None:
        async with open_client(raw_log_cache_max_rows=5) as client:
            repo = client.app.state.engram.repo
            for session in ("s1", "s2", "s3", "s1"):  # s1 again: read back, counted right
                response = await client.post("/v1/store", json={
                    "namespace": "alice", "session_id": session, "wait": False,
                    "messages": [*NEW_TURNS, {"msg_id": "t5", "role": "user",
                                              "content": f"{session}: 周五 Friday"}]})
                assert response.status_code in (200, 202), response.text
                assert repo.log_cache.held_rows <= 5
            assert response.json()["status"] == "unchanged"
            assert repo.log_cache.held_sessions == 1  # the most recent: 3 of the 5 rows
            metrics = (await client.get("/metrics")).text
            assert 'engram_memory_held{what="raw_log_cache_rows"} 3.0' in metrics

    @pytest.mark.parametrize("language", ["zh", "en"])
    async def test_another_writer_of_the_session_is_seen(self, open_client: Any,
                                                          language: str) -> None:
        """Two apps on one data directory, each with its own locks, writers and cache (as
        two server processes): what one stores is counted as stored by the other, which
        held the session before."""
        turns = {
            "en": ["I switched my gym day to Thursday.", "Noted: gym on Thursdays.",
                   "My sister Ana visits in June.", "Ana arrives in June, noted.",
                   "Actually the gym is on Wednesday now."],
            "zh": ["我把健身改到周四了。", "好的，周四健身。", "我妹妹六月来看我。",
                   "记下了，妹妹六月到。", "其实健身现在改到周三了。"]}[language]
        msgs = [{"msg_id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
                 "content": text} for i, text in enumerate(turns)]
        async with open_client() as a, open_client() as b:
            async def ack(client: Any, sent: list[dict[str, Any]]) -> dict[str, Any]:
                response = await client.post("/v1/store", json={
                    "namespace": "alice", "session_id": "s1", "wait": False, "messages": sent})
                assert response.status_code in (200, 202), response.text
                body: dict[str, Any] = response.json()
                return body

            first = await ack(a, msgs[:2])  # a holds the session from here on
            assert first["new"] == 2 and a.app.state.engram.repo.log_cache.held_sessions
            # b appends two and changes one of a's; then a is sent all of it again, and one
            # more: b's messages are stored, not new, and m1 is b's version.
            edited = {**msgs[1], "content": msgs[1]["content"] + " (edited)"}
            second = await ack(b, [edited, *msgs[2:4]])
            assert (second["new"], second["updated"]) == (2, 1)
            third = await ack(a, [msgs[0], edited, *msgs[2:]])
            assert (third["new"], third["updated"], third["skipped"]) == (1, 0, 4), third
            fourth = await ack(a, [msgs[0], edited, *msgs[2:]])
            assert fourth["status"] == "unchanged", fourth
            await wait_idle(a)
            await wait_idle(b)
            for client in (a, b):
                rows = await client.app.state.engram.repo.session_messages("alice", "s1")
                assert [r.msg_id for r in rows] == ["m0", "m1", "m2", "m3", "m4"]
                assert rows[1].content == edited["content"]


class TestWaitingSmallAppend:
    async def test_build_reads_run_with_the_raw_log_write_and_nothing_is_read_after(
        self, client: Any
    ) -> None:
        repo = client.app.state.engram.repo
        await seed_session(client)
        with recording(repo) as calls:
            response = await client.post("/v1/store", json={
                "namespace": "alice", "session_id": "s1", "messages": NEW_TURNS,
                "wait": "built"})
        assert response.status_code == 200, response.text
        assert response.json()["new"] == 2 and response.json()["memories_updated"]
        # The session's memories, ledger and queued jobs are read while its raw log is
        # written (the namespace lock is held: nobody else writes them), not after.
        appended = calls.index(("messages", "add"))
        for read in (("memories", "query"), ("sessions", "query"), ("jobs", "query")):
            assert read in calls[:appended], calls
        # The last step is the raw log marked done (with the ledger): no read of the jobs
        # table after the build, no job to finish.
        done = calls.index(("messages", "update"))
        assert all(name in ("sessions", "messages") for name, _ in calls[done:]), calls
        assert calls.count(("jobs", "query")) == 1
        texts = " ".join(m["text"] for m in await all_memories(client))
        assert "dentist" in texts and "牙医" in texts

    def test_the_model_runs_one_thread_unless_told(self, tmp_path: Any) -> None:
        # A small append's time is mostly the pass over its grown chunk: on this 2-core
        # machine, busy, 2 torch threads made that pass 2-7x slower than 1 (docs/benchmarks.md).
        assert make_settings(tmp_path).embedding_threads == 1


# A new session of several chunks (a LoCoMo-style import call), English and Chinese turns.
_IMPORT_TURNS = [
    {"msg_id": f"i{n}", "role": "user" if n % 2 == 0 else "assistant",
     "content": (f"Turn {n}: we planned the Lisbon trip, flights on Friday and a hotel near "
                 f"the river, budget {n * 100} euros. " if n % 3 else
                 f"第{n}轮：我们讨论了杭州出差的行程，周二上午的高铁，"
                 f"住在西湖附近，预算{n * 100}元。")}
    for n in range(14)]


class TestNewSessionBuild:
    async def test_new_chunks_are_appended_and_searched_in_process(self, client: Any) -> None:
        repo = client.app.state.engram.repo
        await seed_session(client)  # the namespace holds memories: the superseded search runs
        with recording(repo) as calls:
            response = await client.post("/v1/store", json={
                "namespace": "alice", "session_id": "import-1", "messages": _IMPORT_TURNS,
                "wait": "built"})
        assert response.status_code == 200, response.text
        created = response.json()["memories_created"]
        assert len(created) >= 3, response.json()
        # Every chunk is new (its id was read as absent under the namespace lock): one
        # append, no merge joining the rows against the whole memories table.
        memory_writes = [op for name, op in calls if name == "memories"
                         and op in ("add", "merge_insert", "update", "delete")]
        assert memory_writes == ["add"], calls
        # The table has no vector index: the superseded search of each new memory runs on
        # the namespace's in-process copy (at most one query loads it), not a LanceDB
        # query per memory. Besides: the session's memories read and the firewall's search.
        assert calls.count(("memories", "query")) <= 3, calls
        stored = await all_memories(client)
        assert sorted(m["id"] for m in stored if m["session_id"] == "import-1") == sorted(created)
        texts = " ".join(m["text"] for m in stored)
        assert "Lisbon" in texts and "杭州" in texts

    async def test_a_replayed_build_writes_no_memory_twice(self, client: Any) -> None:
        """A crash after the appended memories landed, before the raw log was marked done:
        the build runs again (here: the same session sent again with `wait="built"`, which
        builds pending messages) and finds every chunk stored with its text."""
        repo = client.app.state.engram.repo
        body = {"namespace": "alice", "session_id": "import-1", "messages": _IMPORT_TURNS,
                "wait": "built"}
        first = await client.post("/v1/store", json=body)
        assert first.status_code == 200, first.text
        rows = await repo.session_messages("alice", "import-1")
        for row in rows:
            row.state = "pending"
        await repo.upsert_messages(rows)  # as the crash left them
        with recording(repo) as calls:
            again = await client.post("/v1/store", json=body)
        assert again.status_code == 200, again.text
        assert again.json()["status"] == "unchanged"
        assert not [c for c in calls if c[0] == "memories"
                    and c[1] in ("add", "merge_insert", "update", "delete")], calls
        memories = await repo.session_memories("alice", "import-1")
        ids = [m.id for m in memories]
        assert len(ids) == len(set(ids)) == len(first.json()["memories_created"])
        events = await repo.namespace_events("alice")
        event_ids = [e.id for e in events]
        assert len(event_ids) == len(set(event_ids))
        assert {r.state for r in await repo.session_messages("alice", "import-1")} == {"done"}


# (older fact and its day's other notes, a later unrelated note, the later change), in three
# sessions: the last build's superseded search finds the older memory (the pairs of
# tests/recall/test_newer_facts.py).
_RESTATED = {
    "zh": (["下周二上午我要去医院体检，要空腹。", "今天下午开了一个很长的会。"],
           "周末想去图书馆看看书。", "体检改到周四了，还是上午。"),
    "en": (["My dentist appointment is on Tuesday at 3pm.", "Sat through a very long meeting."],
           "Thinking of going to the library this weekend.",
           "The dentist appointment moved to Thursday morning."),
}


@pytest.mark.parametrize("language", sorted(_RESTATED))
async def test_a_build_writes_its_events_and_the_superseded_ones_in_one_commit(
        client: Any, language: str) -> None:
    repo = client.app.state.engram.repo
    old, unrelated, new = _RESTATED[language]

    async def day(session_id: str, texts: list[str], date: str) -> dict[str, Any]:
        response = await client.post("/v1/store", json={
            "namespace": language, "session_id": session_id, "messages": [
                {"msg_id": f"{session_id}-{i}", "role": "user", "content": text,
                 "timestamp": f"2026-03-{date}T09:0{i}:00Z"} for i, text in enumerate(texts)],
            "wait": "built"})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    await day("day1", old, "02")
    await day("day2", [unrelated], "05")
    with recording(repo) as calls:
        later = await day("day3", [new], "09")
    # One events commit for the build's `created` event and the older memory's
    # `superseded` one, before the raw log is marked done.
    events_writes = [i for i, (name, op) in enumerate(calls) if name == "events"]
    assert len(events_writes) == 1, calls
    assert events_writes[0] < calls.index(("messages", "update")), calls
    events = await repo.namespace_events(language)
    superseded = [e for e in events if e.event == "superseded"]
    assert superseded and all(later["memories_created"][0] in e.metadata
                              for e in superseded), events
    created = [e for e in events if e.event == "created"]
    assert {e.memory_id for e in created} == {m.id for m in await repo.namespace_memories(
        language, with_vector=False)}
