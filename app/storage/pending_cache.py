"""The namespaces' pending messages (with their content), held for recall between writes.

Recall reads a namespace's pending messages on every query (read-your-writes: a `wait=false`
store is found before its build ran, app/recall/search.py). Read from LanceDB that is a
filtered scan of the raw log per recall; held here it is a dict lookup after one table-version
check (~0.2 ms), and nothing pending (the common case) costs no more.

Staleness is ruled out as in log_cache.py: every write to the raw log goes through the
`Repository`, which reports the version it made and what it did (`LogChange`: rows written,
messages marked done, namespaces deleted from). A held namespace follows those reports
version by version; a version it cannot account for (another process's write, a
compaction, a write whose result was lost) drops it, and the next recall reads the
namespace's pending rows again. The check needs reads that see every commit: with
`read_consistency_seconds` > 0 the repository holds nothing here.

Memory: the pending messages only (a build marks them done, and they leave), at most
`max_rows` in all, least recently used namespaces first out; a namespace with more pending
messages than that (a large import being built) is read every time.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from app.storage.log_cache import LogChange
from app.storage.records import MessageRecord

# Event-loop turns a use gives an in-process write to report the version it just made.
_REPORT_TURNS = 3

_Key = tuple[str, str]  # (session id, msg_id)


class _Held:
    def __init__(self, version: int, rows: dict[_Key, MessageRecord]) -> None:
        self.version = version
        self.rows = rows

    def apply(self, namespace: str, change: LogChange) -> bool:
        """Apply `change`; False when the namespace must be read again."""
        if change.unknown or namespace in change.namespaces:
            return False
        for row in change.rows:
            if row.namespace == namespace:
                if row.state == "pending":
                    self.rows[(row.session_id, row.msg_id)] = row
                else:
                    self.rows.pop((row.session_id, row.msg_id), None)
        for done_namespace, session_id, msg_id, digest in change.done:
            held = self.rows.get((session_id, msg_id)) if done_namespace == namespace else None
            if held is not None and held.content_hash == digest:
                del self.rows[(session_id, msg_id)]
        return True


class PendingCache:
    """Each recently recalled namespace's pending messages, checked against the version.

    Args:
        table: the messages table (its `version()` is read on every use).
        max_rows: pending messages held in all; 0 holds nothing.
    """

    def __init__(self, table: Any, *, max_rows: int) -> None:
        self._table = table
        self.max_rows = max_rows
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self.writes_in_flight = 0  # raw-log writes of this process not reported yet
        self.hits = 0
        self.misses = 0

    @property
    def held_rows(self) -> int:
        return sum(len(h.rows) for h in self._held.values())

    async def get(self, namespace: str,
                  read: Callable[[], Awaitable[list[MessageRecord]]]) -> list[MessageRecord]:
        """The namespace's pending messages as of the current table version: held ones, or
        `read()` (and held, if they fit)."""
        if self.max_rows <= 0:
            return await read()
        current = int(await self._table.version())
        held = self._held.get(namespace)
        if held is not None and held.version != current and self.writes_in_flight:
            # Most likely a write of this process that committed and reports a turn later.
            for _ in range(_REPORT_TURNS):
                await asyncio.sleep(0)
            held = self._held.get(namespace)
        if held is not None and held.version == current:
            self._held.move_to_end(namespace)
            self.hits += 1
            return list(held.rows.values())
        self.misses += 1
        self._held.pop(namespace, None)
        # Read after the version: the rows may be newer, and applying a newer change again
        # is harmless (each is by message and content).
        rows = await read()
        if len(rows) <= self.max_rows:
            self._held[namespace] = _Held(current, {(r.session_id, r.msg_id): r for r in rows})
            self._evict()
        return rows

    def wrote(self, version: int | None, change: LogChange) -> None:
        """Record a write: the version it made (None: unknown) and what it did. A held
        namespace one version behind follows it; any other is left behind and read again."""
        for namespace, held in list(self._held.items()):
            if version is not None and held.version == version - 1 \
                    and held.apply(namespace, change):
                held.version = version
            elif version is None or held.version < version:
                del self._held[namespace]
        self._evict()

    def clear(self) -> None:
        self._held.clear()

    def _evict(self) -> None:
        rows = self.held_rows
        while rows > self.max_rows and self._held:
            _, dropped = self._held.popitem(last=False)  # least recently used first
            rows -= len(dropped.rows)
