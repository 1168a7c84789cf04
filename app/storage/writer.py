"""Group commit: one writer per table gathers the pending writes of every namespace.

Every LanceDB write is a commit (a table version and a fragment), and commits to one table
conflict with each other: ten clients storing into ten namespaces at once made ten
concurrent commits on the shared `messages` table, and LanceDB gave up with "Too many
concurrent writers". So the repository never commits directly; it hands each write to the
table's `TableWriter` and awaits it. The writer commits one batch at a time: while a batch
commits, new writes queue, and the next batch takes all of them (of one kind) in one
commit. The first write of an idle table goes out at once; the number of commits then
grows with the time writes take, not with the number of clients.

Writes of one kind combine: upserts (and insert-if-absent) on the same key become one
`merge_insert` of the concatenated rows, appends of rows whose keys are known to be absent
one `add`, deletes one delete of the OR of their filters,
column updates with the same values one update of the OR of their filters. Anything else
(a partial-column merge, an index operation) runs alone, but still in the table's queue, so
this process never makes two commits on one table at the same time.

Each caller awaits its own write and sees its own error: a batch that fails is retried
member by member, so one caller's bad rows never fail another's. A commit conflict with
another process (two servers on one data directory) is retried with a short backoff before
anyone sees it. Two members upserting the same key never share a batch (a merge source
with a repeated key is ambiguous); the later one waits for the next batch.

Acknowledgements first: a write passed with `first=True` (a store's raw-log rows and its job,
the point where a store call is answered) is committed before the queued writes that are
not, so an acknowledgement waits at most for the commit under way, not behind builds'
marking messages done, jobs finished or a compaction queued before it. It combines only with
other such writes (a build's big write would make its commit longer). Order between
unrelated writes was never FIFO here (writes of one kind already combine past others); what
must stay ordered is ordered by the callers, who await each write before the next, or hold
the raw-log lock while they write (every writer of raw-log rows does), and an
acknowledgement never passes an older write of one of its own keys. A write that is not
`first` is passed over by at most `_MAX_PASSED_OVER` such commits in a row, then goes.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import structlog

log = structlog.get_logger(__name__)

# A commit that lost a race with another process: LanceDB's own words for it.
_CONFLICT_MARKERS = ("commit conflict", "too many concurrent writers", "retryable")
# Backoff before each retry of a conflicting commit, seconds (with up to 50 % jitter).
_CONFLICT_BACKOFF = (0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
# Commits of `first` writes in a row while an older write waits; then the older one goes.
_MAX_PASSED_OVER = 4


def is_commit_conflict(error: BaseException) -> bool:
    text = str(error).lower()
    return any(marker in text for marker in _CONFLICT_MARKERS)


@dataclass
class Upsert:
    """Rows merged on `key`: matched rows updated (unless `insert_only`), others inserted."""

    key: str
    rows: pa.Table
    insert_only: bool = False
    change: Any = None  # what the write does to cached copies (namespace_cache.Change)
    # Update a matched row only where it lies in the source row's namespace: a key of
    # another namespace is never overwritten, whatever a caller passes.
    same_namespace: bool = False


@dataclass
class Append:
    """Rows whose keys the caller knows are absent (read under the lock that orders every
    writer of those keys), added without a merge: a `merge_insert` joins its rows against
    the table (~15 ms for 2 rows here), an `add` only writes a fragment (~4 ms)."""

    rows: pa.Table
    change: Any = None  # what the write does to cached copies (namespace_cache.Change)


@dataclass
class Delete:
    where: str
    change: Any = None


@dataclass
class Update:
    """Set `values` (column -> Python value) on the rows matching `where`."""

    values: dict[str, Any]
    where: str
    rows: int = 0  # rows this update expects to touch (compaction accounting)
    change: Any = None  # what the write does to cached copies (log_cache.LogChange)


@dataclass
class Alone:
    """Any other write, run by itself: `run()` returns LanceDB's result."""

    run: Callable[[], Awaitable[Any]]
    rows: int = 0
    change: Any = None


Write = Upsert | Append | Delete | Update | Alone


@dataclass
class _Pending:
    write: Write
    first: bool = False  # an acknowledgement: committed before queued writes that are not
    done: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())
    # The keys it upserts, read once: batching and passing compare them on every commit.
    keys: frozenset[Any] = field(init=False)

    def __post_init__(self) -> None:
        self.keys = frozenset(_keys(self.write))


# Runs one commit: (the combined writes' cache change, the commit itself) -> its result.
CommitHook = Callable[[list[Any], Callable[[], Awaitable[Any]]], Awaitable[Any]]


class TableWriter:
    """The only committer of one table in this process.

    Args:
        name: the table's name (logs, metrics).
        table: the LanceDB async table.
        max_batch_rows: rows one commit takes at most (a bigger single write still goes
            alone): bounds the memory a batch holds and the time one commit takes.
        around_commit: called with the members' `change` values and the commit; runs it
            (the repository uses this to report memories and raw-log writes to its caches).
        on_commit: called after each successful commit with the rows it wrote.
    """

    def __init__(self, name: str, table: Any, *, max_batch_rows: int,
                 around_commit: CommitHook | None = None,
                 on_commit: Callable[[int], None] | None = None) -> None:
        self.name = name
        self._table = table
        self._max_batch_rows = max_batch_rows
        self._around = around_commit
        self._on_commit = on_commit
        self._queue: list[_Pending] = []
        self._drainer: asyncio.Task[None] | None = None
        self.commits = 0
        self.writes = 0
        self.conflict_retries = 0
        self._passed_over = 0  # commits of `first` writes in a row that passed an older one

    @property
    def pending_writes(self) -> int:
        return len(self._queue)

    @property
    def pending_rows(self) -> int:
        return sum(_rows(p.write) for p in self._queue)

    async def write(self, write: Write, *, first: bool = False) -> Any:
        """Queue `write`, wait for the commit that carries it; its result or its error.

        `first`: an acknowledgement, committed before queued writes that are not (the
        module docstring)."""
        pending = _Pending(write, first)
        self._queue.append(pending)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name=f"writer-{self.name}")
        # A cancelled caller does not cancel the commit other callers share.
        return await asyncio.shield(pending.done)

    async def _drain(self) -> None:
        while self._queue:
            batch = self._take_batch()
            await self._commit_batch(batch)

    def _take_batch(self) -> list[_Pending]:
        """The write that goes next (`_lead`) and every queued write that combines with it:
        a `first` one only with other `first` ones."""
        lead = self._lead()
        kind = _kind(lead.write)
        batch = [lead]
        rows = _rows(lead.write)
        keys: set[Any] = set(lead.keys)
        if kind is not None:
            for pending in self._queue:
                if pending is lead or _kind(pending.write) != kind:
                    continue
                if lead.first and not pending.first:
                    continue
                more = _rows(pending.write)
                if rows + more > self._max_batch_rows:
                    break
                if not keys.isdisjoint(pending.keys):
                    continue  # same key twice in one merge: leave it for the next batch
                keys.update(pending.keys)
                rows += more
                batch.append(pending)
        taken = {id(p) for p in batch}
        self._queue = [p for p in self._queue if id(p) not in taken]
        return batch

    def _lead(self) -> _Pending:
        """The oldest `first` write, unless it would pass an older write of one of its keys
        or older writes were passed over `_MAX_PASSED_OVER` times in a row; else the oldest."""
        oldest = self._queue[0]
        ack = next((p for p in self._queue if p.first), None)
        if ack is None or ack is oldest:
            self._passed_over = 0
            return oldest
        older = self._queue[:self._queue.index(ack)]
        if self._passed_over >= _MAX_PASSED_OVER or any(
                not ack.keys.isdisjoint(p.keys) for p in older):
            self._passed_over = 0
            return oldest
        self._passed_over += 1
        return ack

    async def _commit_batch(self, batch: list[_Pending]) -> None:
        try:
            result = await self._commit([p.write for p in batch])
        except Exception as error:
            if len(batch) == 1:
                _settle(batch[0], error=error)
                return
            log.info("group_commit_split", table=self.name, members=len(batch),
                     error=str(error)[:200])
            for pending in batch:  # one member's bad rows must not fail the others
                try:
                    _settle(pending, result=await self._commit([pending.write]))
                except Exception as own_error:
                    _settle(pending, error=own_error)
            return
        for pending in batch:
            _settle(pending, result=result)

    async def _commit(self, writes: Sequence[Write]) -> Any:
        run = self._combined(writes)
        changes = [getattr(w, "change", None) for w in writes]
        attempt = 0
        while True:
            try:
                result = await (self._around(changes, run) if self._around else run())
                break
            except Exception as error:
                if not is_commit_conflict(error) or attempt >= len(_CONFLICT_BACKOFF):
                    raise
                delay = _CONFLICT_BACKOFF[attempt]
                attempt += 1
                self.conflict_retries += 1
                log.info("commit_conflict_retry", table=self.name, attempt=attempt,
                         error=str(error)[:200])
                await asyncio.sleep(delay * (1 + random.random() / 2))
        self.commits += 1
        self.writes += len(writes)
        if self._on_commit is not None:
            self._on_commit(sum(_rows(w) for w in writes))
        return result

    def _combined(self, writes: Sequence[Write]) -> Callable[[], Awaitable[Any]]:
        """One LanceDB call doing every write of `writes` (all of one kind)."""
        first = writes[0]
        table = self._table
        if isinstance(first, Upsert):
            rows = pa.concat_tables([w.rows for w in writes if isinstance(w, Upsert)])
            merge = table.merge_insert(first.key)
            if not first.insert_only:
                merge = merge.when_matched_update_all(
                    where="target.namespace = source.namespace" if first.same_namespace
                    else None)
            merge = merge.when_not_matched_insert_all()
            return lambda: merge.execute(rows)
        if isinstance(first, Append):
            added = pa.concat_tables([w.rows for w in writes if isinstance(w, Append)])
            return lambda: table.add(added)
        if isinstance(first, Delete):
            where = _any_of([w.where for w in writes if isinstance(w, Delete)])
            return lambda: table.delete(where)
        if isinstance(first, Update):
            where = _any_of([w.where for w in writes if isinstance(w, Update)])
            return lambda: table.update(updates=first.values, where=where)
        return first.run


def _any_of(filters: Sequence[str]) -> str:
    return filters[0] if len(filters) == 1 else " OR ".join(f"({f})" for f in filters)


def _kind(write: Write) -> tuple[Any, ...] | None:
    """Writes with the same kind combine into one commit; None: never combined."""
    if isinstance(write, Upsert):
        return ("upsert", write.key, write.insert_only, write.same_namespace, write.rows.schema)
    if isinstance(write, Append):
        return ("append", write.rows.schema)
    if isinstance(write, Delete):
        return ("delete",)
    if isinstance(write, Update):
        return ("update", tuple(sorted((k, repr(v)) for k, v in write.values.items())))
    return None


def _keys(write: Write) -> list[Any]:
    if isinstance(write, Upsert):
        return list(write.rows.column(write.key).to_pylist())
    return []


def _rows(write: Write) -> int:
    if isinstance(write, Upsert | Append):
        return int(write.rows.num_rows)
    if isinstance(write, Update | Alone):
        return write.rows
    return 0


def _settle(pending: _Pending, *, result: Any = None, error: BaseException | None = None) -> None:
    if pending.done.done():  # the caller was cancelled
        return
    if error is not None:
        pending.done.set_exception(error)
    else:
        pending.done.set_result(result)
