"""What a `wait=false` store needs of a session's raw log, kept in process between stores.

The acknowledgement of an append counts new, changed and unchanged messages against the
session's stored ones (ids, content hashes, order), under the raw-log lock. Read from
LanceDB that is a scan of the session's rows, 6-17 ms here, most of the acknowledgement;
held here it is a dict lookup after one table-version check (~0.2 ms).

Staleness is ruled out as in namespace_cache.py: every write to the raw log goes through
the `Repository`, which reports the version it made (LanceDB returns it) and what it did
(rows written, messages marked done, namespaces deleted from). A held session is used only
once every version since it was read is accounted for by such a report; one that is not (a
write of another process, a compaction, a write whose result was lost) drops every session
behind it, and the next store reads the raw log again. Another process writing a session's
rows holds its raw-log lock, so its commit is visible before this process, holding the lock,
checks the version. The check needs reads that see every commit: with
`read_consistency_seconds` > 0 the repository makes no cache at all.

Memory: identities only (no content), ~0.3 KB per message, at most `max_rows` messages in
all (least recently used sessions first out); the changes remembered for sessions behind
are those of held sessions, at most `_MAX_CHANGES` versions.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.storage.records import MessageRecord

# Versions remembered for sessions that are behind; beyond this a session is read again.
_MAX_CHANGES = 2_000
# Event-loop turns a use gives an in-process write to report the version it just made.
_REPORT_TURNS = 3

Session = tuple[str, str]  # (namespace, session id)
# What identifies a stored message: seq, content hash, state, pinned, received_at, job id.
_Identity = tuple[int, str, str, bool, datetime | None, str | None]


@dataclass(frozen=True)
class LogChange:
    """What one write did to the raw log, as far as the held sessions are concerned.

    `rows` are written rows (new or replacing a stored one), `done` the (namespace,
    session, msg_id, content hash) of messages marked built if their content is still that,
    `namespaces` lose every held session (deletes), `unknown` drops every session.
    """

    rows: tuple[MessageRecord, ...] = ()
    done: tuple[tuple[str, str, str, str], ...] = ()
    namespaces: frozenset[str] = frozenset()
    unknown: bool = False


UNKNOWN = LogChange(unknown=True)


def combined(changes: Sequence[Any]) -> LogChange:
    """One change doing what all of `changes` do (one group commit; None: unknown)."""
    if any(not isinstance(c, LogChange) or c.unknown for c in changes):
        return UNKNOWN
    if len(changes) == 1:
        return changes[0]  # type: ignore[no-any-return]
    return LogChange(rows=tuple(r for c in changes for r in c.rows),
                     done=tuple(d for c in changes for d in c.done),
                     namespaces=frozenset().union(*(c.namespaces for c in changes)))


def _identity(record: MessageRecord) -> _Identity:
    return (record.seq, record.content_hash, record.state, record.pinned, record.received_at,
            record.job_id)


class _Held:
    def __init__(self, version: int, rows: dict[str, _Identity]) -> None:
        self.version = version
        self.rows = rows

    def apply(self, session: Session, change: LogChange) -> int | None:
        """Apply `change`; the messages it added, or None when the session must be read
        again."""
        if change.unknown or session[0] in change.namespaces:
            return None
        before = len(self.rows)
        for row in change.rows:
            if (row.namespace, row.session_id) == session:
                self.rows[row.msg_id] = _identity(row)
        for namespace, session_id, msg_id, digest in change.done:
            held = self.rows.get(msg_id) if (namespace, session_id) == session else None
            if held is not None and held[1] == digest:
                seq, _, _, pinned, received, job = held
                self.rows[msg_id] = (seq, digest, "done", pinned, received, job)
        return len(self.rows) - before


class RawLogCache:
    """The identities of recently stored sessions' messages, checked against the version.

    Args:
        table: the messages table (its `version()` is read on every use).
        max_rows: messages held in all; 0 holds nothing.
    """

    def __init__(self, table: Any, *, max_rows: int) -> None:
        self._table = table
        self.max_rows = max_rows
        self._held: OrderedDict[Session, _Held] = OrderedDict()
        self._changes: dict[int, LogChange] = {}  # version -> what it did
        self._loading: dict[Session, int] = {}  # sessions being read -> readers
        self._rows = 0  # messages held in all
        self.writes_in_flight = 0  # raw-log writes of this process not reported yet
        self.hits = 0
        self.misses = 0

    @property
    def held_sessions(self) -> int:
        return len(self._held)

    @property
    def held_rows(self) -> int:
        return self._rows

    async def version(self) -> int:
        return int(await self._table.version())

    async def get(self, namespace: str, session_id: str) -> list[MessageRecord] | None:
        """The session's stored messages (identity columns only, in order) as of the current
        table version, or None when it is not held or cannot be proven current."""
        session = (namespace, session_id)
        if self.max_rows <= 0 or session not in self._held:
            self.misses += 1
            return None
        current = await self.version()
        held = self._held.get(session)
        if held is not None and held.version < current and self.writes_in_flight and any(
                v not in self._changes for v in range(held.version + 1, current + 1)):
            # Most likely a write of this process that committed and reports a turn later.
            for _ in range(_REPORT_TURNS):
                await asyncio.sleep(0)
            held = self._held.get(session)
        if held is None or not self._catch_up(session, held, current):
            self._drop(session)
            self.misses += 1
            return None
        self._held.move_to_end(session)
        self.hits += 1
        return sorted((MessageRecord(
            namespace=namespace, session_id=session_id, msg_id=msg_id, seq=seq,
            content_hash=digest, state=state, pinned=pinned, received_at=received,
            job_id=job) for msg_id, (seq, digest, state, pinned, received, job)
            in held.rows.items()), key=lambda m: m.seq)

    @contextmanager
    def reading(self, namespace: str, session_id: str) -> Iterator[None]:
        """Around a read of the session that `put` will hold: the writes reported meanwhile
        are kept for it."""
        session = (namespace, session_id)
        self._loading[session] = self._loading.get(session, 0) + 1
        try:
            yield
        finally:
            self._loading[session] -= 1
            if not self._loading[session]:
                del self._loading[session]

    def put(self, namespace: str, session_id: str, version: int,
            records: Sequence[MessageRecord]) -> None:
        """Hold a session read at `version` (read before the query: the rows may be newer,
        and applying a newer change again is harmless, each is by id and content)."""
        if self.max_rows <= 0 or len(records) > self.max_rows:
            return
        session = (namespace, session_id)
        self._drop(session)
        held = self._held[session] = _Held(version, {r.msg_id: _identity(r) for r in records})
        self._rows += len(held.rows)
        self._evict()

    def wrote(self, version: int | None, change: LogChange) -> None:
        """Record a write: the version it made (None: unknown) and what it did. A version
        not recorded here stays unaccounted for and drops every session behind it."""
        if version is None or change.unknown:
            return
        wanted = {*self._held, *self._loading}
        change = LogChange(
            rows=tuple(r for r in change.rows if (r.namespace, r.session_id) in wanted),
            done=tuple(d for d in change.done if (d[0], d[1]) in wanted),
            namespaces=change.namespaces)
        self._changes[version] = change
        for session, held in list(self._held.items()):
            if held.version == version - 1:
                added = held.apply(session, change)
                if added is None:
                    self._drop(session)
                else:
                    held.version = version
                    self._rows += added
        self._evict()
        oldest = min([h.version for h in self._held.values()], default=version)
        for old in [v for v in self._changes if v <= oldest and not self._loading]:
            del self._changes[old]
        if len(self._changes) > _MAX_CHANGES:
            for old in sorted(self._changes)[: len(self._changes) - _MAX_CHANGES]:
                del self._changes[old]

    def clear(self) -> None:
        self._held.clear()
        self._changes.clear()
        self._rows = 0

    def _drop(self, session: Session) -> None:
        held = self._held.pop(session, None)
        if held is not None:
            self._rows -= len(held.rows)

    def _evict(self) -> None:
        while self._rows > self.max_rows and self._held:
            _, dropped = self._held.popitem(last=False)  # least recently used first
            self._rows -= len(dropped.rows)

    def _catch_up(self, session: Session, held: _Held, current: int) -> bool:
        # Ahead of the version read: this process's writes reported since, all accounted for.
        for version in range(held.version + 1, current + 1):
            change = self._changes.get(version)
            added = None if change is None else held.apply(session, change)
            if added is None:
                return False
            held.version = version
            self._rows += added
        return True
