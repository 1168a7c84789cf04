"""What a small append (1-4 messages, the auto-capture case) costs in table operations.

Counted on the real LanceDB tables of the real app (each table handle wrapped to record the
calls made on it), not timed: a count says the same on a busy machine and a quiet one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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
            {"msg_id": "t2", "role": "user", "content": "我下周二去杭州出差。"}]})
    assert response.status_code == 200, response.text


class TestCheapAcknowledgement:
    async def test_ack_of_two_new_messages_is_one_read_and_one_round_of_appends(
        self, client: Any
    ) -> None:
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
        # One read of the session's raw log, then its new rows and the job appended (one
        # round, two tables): no merge, which joins its rows against the whole table.
        assert calls[0] == ("messages", "query"), calls
        assert sorted(calls[1:]) == [("jobs", "add"), ("messages", "add")], calls

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


class TestWaitingSmallAppend:
    async def test_build_reads_run_with_the_raw_log_write_and_nothing_is_read_after(
        self, client: Any
    ) -> None:
        repo = client.app.state.engram.repo
        await seed_session(client)
        with recording(repo) as calls:
            response = await client.post("/v1/store", json={
                "namespace": "alice", "session_id": "s1", "messages": NEW_TURNS})
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
        # machine, busy, 2 torch threads made that pass 2-7x slower than 1 (benchmarks §7).
        assert make_settings(tmp_path).embedding_threads == 1
