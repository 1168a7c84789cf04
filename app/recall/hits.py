"""Hit recording: every recalled memory's hit_count and last_accessed, written in batches.

A recall must not write: every LanceDB write is a table version and a fragment, and 1,000
single-row writes made a filtered search 30x slower (LANCEDB_NOTES.md #3). So a recall only
adds its memory ids to an in-memory buffer; a background task flushes the buffer every
`hit_flush_seconds` (or sooner once it holds `hit_flush_max_pending` ids) in one write for
all namespaces, under their write locks, and once more at shutdown. A burst of 1,000
recalls becomes one table version. Even so every write leaves a small fragment that slows
searches a little until compaction (measured: ten flushes took a 10k-row search from 8 to
17 ms), so the default interval is 10 s, not 1.

Hits are usage statistics, not acknowledged data: if the process dies, the hits of the last
few seconds are lost, by design.

A hit is a use, and hits promote a memory (session -> daily -> long-term), so what counts is
use over time, not one burst (`record`): the same question asked again within a day is one
hit, and one memory counts at most `per_memory_per_day` hits a day (default 2, below the 3
that promote to daily). An assistant that recalls on every turn asks many questions of one
subject in a conversation; a memory about the subject is found by most of them, whether it
answers them or not: 105 questions whose answer is not stored, asked in a minute, took 9
memories to daily (bench/hygiene.py, "How old is Sam?", "Where did Sam grow up?" → "Sam
works as a nurse"). With the cap none. What the cap cannot tell: such questions asked on
several days still promote the memory they find; that takes knowing what a question asks
of its subject, which neither the words nor the model's cosine tell here.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime

import structlog

from app.errors import LockTimeout
from app.locks import NamespaceLocks
from app.periodic import Periodic
from app.storage.repository import Repository

log = structlog.get_logger(__name__)

# How long a flush waits for one namespace's write lock before leaving its hits for later.
_LOCK_WAIT_SECONDS = 1.0
# A question asked again within a day counts its memories' hits once, and a memory counts
# at most `per_memory_per_day` hits a day (`record`).
DAY_SECONDS = 86_400.0
# The (namespace, memory, question) triples remembered for that, ~200 bytes each, and as
# many (namespace, memory) days.
_ASKED_MAX = 100_000
_NOT_WORD = re.compile(r"[\W_]+")


class HitRecorder:
    def __init__(self, repo: Repository, locks: NamespaceLocks, *, flush_seconds: float,
                 max_pending: int, per_memory_per_day: int = 2,
                 maintenance: asyncio.Lock | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._repo = repo
        self._locks = locks
        # Held by table maintenance while it compacts: a flush waits rather than preempt it.
        self._maintenance = maintenance or asyncio.Lock()
        self._max_pending = max_pending
        self._pending: defaultdict[str, Counter[str]] = defaultdict(Counter)
        # (namespace, memory, question) -> when it was last counted (`record`), oldest first.
        self._asked: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        # (namespace, memory) -> (when its day of counting began, hits counted that day)
        self._days: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()
        self._per_day = per_memory_per_day
        self._clock = clock
        self._wake = asyncio.Event()
        self._flush_lock = asyncio.Lock()
        self._loop = Periodic("hit-flusher", self.flush, interval=flush_seconds, wake=self._wake)
        # Called under the namespace lock after its hits are written, with the memory ids:
        # tier promotions earned by hits (MemoryService.promote_due).
        self.after_flush: Callable[[str, list[str]], Awaitable[object]] | None = None
        self.flushes = 0
        self.rows_written = 0

    @property
    def heartbeat(self) -> datetime | None:
        return self._loop.heartbeat

    @property
    def pending(self) -> int:
        return sum(len(c) for c in self._pending.values())

    def record(self, namespace: str, memory_ids: Iterable[str], *, question: str = "") -> None:
        """Count one hit for each memory (no I/O; safe to call from a request).

        A hit is a use, and hits promote a memory to the next tier (module docstring). The
        same question asked again (an assistant that recalls on every turn, a user repeating
        an unanswerable question) is one use of what it found: within a day a memory is
        counted once per `question` (its search text, case- and punctuation-blind). Found
        for different questions, a memory counts at most `per_memory_per_day` hits a day:
        it climbs on use over days, not on one conversation's burst.
        """
        now = self._clock()
        key = _NOT_WORD.sub("", question.casefold())
        counted = []
        for memory_id in memory_ids:
            if key:
                seen = (namespace, memory_id, key)
                last = self._asked.pop(seen, None)
                self._asked[seen] = now  # most recent last
                if last is not None and now - last < DAY_SECONDS:
                    continue
            begun, hits = self._days.pop((namespace, memory_id), (now, 0))
            if now - begun >= DAY_SECONDS:
                begun, hits = now, 0
            self._days[(namespace, memory_id)] = (begun, min(hits + 1, self._per_day))
            if hits < self._per_day:
                counted.append(memory_id)
        while len(self._asked) > _ASKED_MAX:
            self._asked.popitem(last=False)
        while len(self._days) > _ASKED_MAX:
            self._days.popitem(last=False)
        self._pending[namespace].update(counted)
        if self.pending >= self._max_pending:
            self._wake.set()

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        """Stop the background task, then write what is still buffered."""
        await self._loop.stop()
        await self.flush()

    async def flush(self) -> int:
        """Write every buffered hit in one table write. Returns the rows updated.

        Each namespace's write lock is taken (in name order, so two flushing processes
        cannot deadlock) with a short timeout: a namespace busy with a long import keeps
        its hits for the next flush instead of holding up the others. A failed write puts
        everything back.
        """
        async with self._flush_lock, self._maintenance:
            batch, self._pending = self._pending, defaultdict(Counter)
            names = sorted(ns for ns, counts in batch.items() if counts)
            if not names:
                return 0
            held: list[str] = []
            written = 0
            async with contextlib.AsyncExitStack() as stack:
                for namespace in names:
                    try:
                        await stack.enter_async_context(
                            self._locks.hold(namespace, max_wait=_LOCK_WAIT_SECONDS))
                        held.append(namespace)
                    except LockTimeout:
                        self._pending[namespace].update(batch[namespace])
                if not held:
                    return 0
                counts: Counter[str] = Counter()
                for namespace in held:
                    counts.update(batch[namespace])
                try:
                    written = await self._repo.add_hits(dict(counts), namespaces=held,
                                                        when=datetime.now(UTC))
                except Exception as exc:
                    for namespace in held:  # retried on the next flush
                        self._pending[namespace].update(batch[namespace])
                    log.warning("hits_flush_failed", namespaces=len(held), ids=len(counts),
                                error=str(exc)[:200])
                    return 0
                for namespace in held:
                    await self._after(namespace, list(batch[namespace]))
            self.flushes += 1
            self.rows_written += written
            log.debug("hits_flushed", rows=written, namespaces=len(held),
                      deferred=len(names) - len(held))
            return written

    async def _after(self, namespace: str, memory_ids: list[str]) -> None:
        if self.after_flush is None:
            return
        try:
            await self.after_flush(namespace, memory_ids)
        except Exception as exc:  # the hits are written; a failed promotion waits for the next
            log.warning("hits_after_flush_failed", namespace=namespace, error=str(exc)[:200])
