"""Incremental session store: the three layers of SPEC.md §4.

1. Session: a stored session sent again with `incremental=false` is skipped outright.
2. Message: each message is new, changed or unchanged, by msg_id and content hash.
3. Chunk: new and changed messages are (re)built into memories by `MemoryBuilder`.

Durability: the raw log is written first, as `pending`, before anything is embedded. That
write is the acknowledgement point: a `wait=false` store returns right after it, and a crash
after it is repaired at start-up by building every pending session again.

Three answers (`StoreRequest.mode`): `wait=true` (the default) after the raw-log write and
each new turn embedded on its own, held for the pending search until the build lands (its
vector alone, not the grown chunk's: a few short texts instead of the whole window), or
after the build itself when more than a few turns are new; `wait=false` after the raw-log
write alone; both queue the build. `wait="built"` answers after the build, with the
memories' ids (docs/decisions/0015-findable-writes.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from app.config import Settings
from app.embedding.pool import NOW_MAX_TEXTS
from app.errors import BadRequest, Conflict, NotFound, PayloadTooLarge, Unavailable
from app.locks import NamespaceLocks
from app.ops.malloc import release_free_memory
from app.ops.metrics import Metrics
from app.periodic import end_if_stopping, stopping
from app.storage.records import JobRecord, MessageRecord
from app.storage.repository import Repository
from app.store.builder import BuildOutcome, DerivedState, MemoryBuilder, stage_timer
from app.store.deletes import Deletes
from app.store.schemas import (
    JobPublic,
    JobState,
    MessageIn,
    StoreMode,
    StoreRequest,
    StoreResult,
    StoreStatus,
)

log = structlog.get_logger(__name__)

# A background build whose namespace stayed busy past the lock timeout (another server's
# builds, on a bucket) is queued again after this long, not left for the next start-up.
_BUSY_RETRY_SECONDS = 2.0
# The worker beats its heartbeat at least this often; this long with no session to build,
# the builds before are a burst that is over.
_IDLE_SECONDS = 5.0


def content_hash(role: str, content: str) -> str:
    return hashlib.sha256(f"{role}\x1f{content}".encode()).hexdigest()


def as_utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@dataclass(frozen=True)
class Incoming:
    msg_id: str
    role: str
    content: str
    digest: str
    timestamp: datetime | None


def _report(result: StoreResult, outcome: BuildOutcome) -> None:
    """A build's memories in the answer of the store that waited for it."""
    result.memories_created = outcome.created
    result.memories_updated = outcome.updated
    result.firewalled = outcome.firewalled


def normalise(messages: Sequence[MessageIn], *, max_chars: int) -> list[Incoming]:
    """Give every message an id and a hash; merge exact repeats; refuse contradictions.

    Raises:
        PayloadTooLarge: a message is longer than `max_chars`.
        BadRequest: one msg_id is sent twice with different content.
    """
    result: dict[str, Incoming] = {}
    derived_seen: dict[str, int] = {}
    for index, message in enumerate(messages):
        if len(message.content) > max_chars:
            raise PayloadTooLarge(
                f"messages[{index}].content has {len(message.content)} characters; "
                f"the limit is {max_chars}"
            )
        role = str(message.role)
        digest = content_hash(role, message.content)
        timestamp = as_utc(message.timestamp)
        msg_id = message.msg_id
        if msg_id is None:
            # Stable across re-sends: role, content and time; a repeat of the same words in
            # one session gets a counter so both are kept.
            basis = f"{digest}\x1f{timestamp.isoformat() if timestamp else ''}"
            base_id = "h-" + hashlib.sha256(basis.encode()).hexdigest()[:20]
            occurrence = derived_seen.get(base_id, 0) + 1
            derived_seen[base_id] = occurrence
            msg_id = base_id if occurrence == 1 else f"{base_id}-{occurrence}"
        previous = result.get(msg_id)
        if previous is not None:
            if previous.digest != digest:
                raise BadRequest(
                    f"messages[{index}].msg_id {msg_id!r} is sent twice with different content",
                    details={"msg_id": msg_id, "index": index},
                )
            continue
        result[msg_id] = Incoming(msg_id, role, message.content, digest, timestamp)
    return list(result.values())


class StoreService:
    def __init__(
        self, repo: Repository, builder: MemoryBuilder, locks: NamespaceLocks, settings: Settings,
        *, metrics: Metrics | None = None,
    ) -> None:
        self._metrics = metrics
        self._repo = repo
        self._builder = builder
        self._locks = locks
        self._settings = settings
        self.deletes = Deletes(repo, builder, locks, settings)  # resumed with the builds
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._queued: set[tuple[str, str]] = set()
        self._deferred: set[tuple[str, str]] = set()  # busy namespaces, queued again soon
        self._worker: asyncio.Task[None] | None = None
        self._building = False
        self._built_since_trim = False  # builds since the allocator last gave pages back
        self.heartbeat: datetime | None = None

    # --- the store call ----------------------------------------------------------------

    async def store(self, request: StoreRequest) -> StoreResult:
        started = time.perf_counter()
        result = await self._store(request)
        if self._metrics is not None:
            mode = {StoreMode.built: "built", StoreMode.findable: "findable",
                    StoreMode.durable: "background"}[request.mode]
            self._metrics.store_seconds.labels(mode).observe(time.perf_counter() - started)
            for outcome in ("new", "updated", "skipped"):
                self._metrics.store_messages.labels(outcome).inc(getattr(result, outcome))
        return result

    async def _store(self, request: StoreRequest) -> StoreResult:
        if len(request.messages) > self._settings.max_messages_per_request:
            raise PayloadTooLarge(
                f"{len(request.messages)} messages in one request; the limit is "
                f"{self._settings.max_messages_per_request}"
            )
        incoming = normalise(request.messages, max_chars=self._settings.max_message_chars)
        ns, sid = request.namespace, request.session_id
        lap = stage_timer(self._metrics)
        if request.mode is not StoreMode.built:
            # The cheap acknowledgement: only the raw-log lock, never behind a build.
            result, _, written = await self._write_raw_log(request, incoming)
            lap("ack")
            if result.job_id is not None:
                built = False
                try:
                    if request.mode is StoreMode.findable:
                        # What wait=true promises (durable, findable) is done before the
                        # answer; the job is the build that follows, so the answer is no 202.
                        result.status = StoreStatus.stored
                        built = await self._findable(ns, sid, written or [], result)
                        lap("findable")
                finally:  # acknowledged in the raw log: built whatever happens here
                    if not built:
                        self.enqueue(ns, sid)
        else:
            async with self._locks.hold(ns):
                # What the build reads besides the raw log (memories, ledger, queued jobs) is
                # read while the raw log is written: this lock keeps their writers out.
                (result, has_pending, raw_log), derived, jobs = await asyncio.gather(
                    self._write_raw_log(request, incoming),
                    self._builder.read_derived(ns, sid),
                    self._repo.unfinished_jobs(ns, sid))
                lap("log_and_read")
                if result.status == StoreStatus.stored:
                    _report(result, await self._build(ns, sid, raw_log=raw_log,
                                                      derived=derived, queued_jobs=jobs))
                elif result.status == StoreStatus.unchanged and has_pending:
                    # Sent before with wait=false (or cut off by a crash) and not built yet:
                    # a waiting caller gets its memories built now.
                    await self._build(ns, sid, derived=derived, queued_jobs=jobs)
        log.info("store", namespace=ns, session_id=sid, status=result.status, new=result.new,
                 updated=result.updated, skipped=result.skipped)
        return result

    async def _findable(self, namespace: str, session_id: str,
                        written: list[MessageRecord], result: StoreResult) -> bool:
        """Make a `wait=true` store's new turns findable by vector: each turn's own vector,
        held until the build lands; or, for more new turns than the questions' thread
        encodes at once (an import, a session sent whole), the build itself. Returns whether
        the build ran (then `result` carries its memories and its job is done).

        Built now, more turns cost one pass of the model, not their own vectors and then
        the chunks'; and a loader sending sessions whole is paced by its builds rather than
        growing the pending queue (decision 0015). A namespace busy past the lock timeout
        (another server's build) gets the held vectors instead: the answer never waits
        twice."""
        if len(written) > NOW_MAX_TEXTS:
            try:
                async with self._locks.hold(namespace):  # as the store worker builds
                    outcome = await self._build(namespace, session_id)
            except Unavailable as busy:
                log.warning("store_build_deferred", namespace=namespace,
                            session_id=session_id, reason=str(busy)[:200])
            else:
                _report(result, outcome)
                return True
        await self._builder.hold_turn_vectors(written)
        return False

    async def _write_raw_log(self, request: StoreRequest, incoming: Sequence[Incoming]
                             ) -> tuple[StoreResult, bool, list[MessageRecord] | None]:
        """Count new, changed and unchanged messages against the stored ones and write the
        new and changed ones as pending (with a queued job unless `wait="built"`).

        The acknowledgement point: after this the messages survive any crash. The raw-log
        lock makes the read and the write one step, so two stores of a session (also in two
        processes) never count the same message twice. Returns the result, whether the
        session holds messages not yet built, and for `wait="built"` the session's raw log as
        written (its build need not read it back), otherwise the rows written.
        """
        builds = request.mode is StoreMode.built
        ns, sid = request.namespace, request.session_id
        async with self._locks.hold_log(ns):
            # Counting needs only ids, hashes and states; a waiting store's build reads the
            # stored messages' content too, so it gets the whole rows.
            stored = {m.msg_id: m for m in await self._repo.session_messages(
                ns, sid, with_content=builds)}
            has_pending = any(m.state == "pending" for m in stored.values())
            result = StoreResult(namespace=ns, session_id=sid, status=StoreStatus.stored,
                                 total=len(incoming), new=0, updated=0, skipped=0)
            if stored and not request.incremental:
                result.status = StoreStatus.skipped
                result.skipped = len(incoming)
                return result, has_pending, None
            _same_branch(request, stored.values())
            records = self._raw_log_rows(request, incoming, stored)
            changed = [r for r in records if r.msg_id not in stored
                       or stored[r.msg_id].content_hash != r.content_hash]
            result.new = sum(1 for r in changed if r.msg_id not in stored)
            result.updated = len(changed) - result.new
            result.skipped = len(incoming) - len(changed)
            if not records:
                result.status = StoreStatus.unchanged
                return result, has_pending, None
            fresh = [r for r in records if r.msg_id not in stored]
            rewritten = [r for r in records if r.msg_id in stored]
            if builds:
                await self._repo.store_messages(fresh, rewritten)
                raw_log = {**stored, **{r.msg_id: r for r in records}}
                return result, True, sorted(raw_log.values(), key=lambda m: m.seq)
            now = datetime.now(UTC)
            job = JobRecord(id=f"job_{uuid.uuid4().hex}", namespace=ns, session_id=sid,
                            created_at=now, updated_at=now)
            for record in records:
                record.job_id = job.id
            result.status = StoreStatus.queued
            result.job_id = job.id
            # One commit round: two tables, two commits at once (each shared with other
            # clients' writes; new rows and the new job are appended, not merged). Either
            # alone after a crash is harmless: pending messages are built at start-up, a
            # queued job without them is finished by that build.
            await asyncio.gather(self._repo.store_messages(fresh, rewritten),
                                 self._repo.add_job(self._job_with_result(job, result)))
            return result, True, records

    def _raw_log_rows(
        self, request: StoreRequest, incoming: Sequence[Incoming], stored: dict[str, MessageRecord]
    ) -> list[MessageRecord]:
        now = datetime.now(UTC)
        next_seq = max((m.seq for m in stored.values()), default=-1) + 1
        rows: list[MessageRecord] = []
        for message in incoming:
            old = stored.get(message.msg_id)
            if old is not None and old.content_hash == message.digest and (
                    not request.pinned or old.pinned):
                continue  # unchanged: same id, same bytes (never compared by length)
            # An unchanged message sent again with `pinned: true` (and not stored pinned
            # before) is written again, pending and pinned: its build pins the memories
            # holding it (their text is unchanged, so nothing is embedded again). Once stored
            # pinned, a repeat changes nothing: an unpin by PATCH holds.
            if old is None:
                seq, next_seq = next_seq, next_seq + 1
            else:
                seq = old.seq  # a changed message keeps its place in the session
            rows.append(MessageRecord(
                namespace=request.namespace, session_id=request.session_id,
                msg_id=message.msg_id, seq=seq, role=message.role, content=message.content,
                content_hash=message.digest, timestamp=message.timestamp,
                received_at=old.received_at if old else now, source=request.source,
                branch=request.branch, tags=list(request.tags), state="pending",
                pinned=request.pinned,
            ))
        return rows

    async def _build(self, namespace: str, session_id: str, *,
                     raw_log: list[MessageRecord] | None = None,
                     derived: DerivedState | None = None,
                     queued_jobs: list[JobRecord] | None = None) -> BuildOutcome:
        """Build the session's pending messages into memories; finish their jobs.

        `queued_jobs`: the session's queued jobs, read before `raw_log` was (None: read
        after the build); a job queued in between is read by its id below.
        """
        outcome = await self._builder.build_session(namespace, session_id, raw_log=raw_log,
                                                    derived=derived)
        lap = stage_timer(self._metrics)
        if queued_jobs is None:
            queued_jobs = await self._repo.unfinished_jobs(namespace, session_id)
        jobs = {j.id: j for j in queued_jobs}
        unknown = sorted(outcome.job_ids - jobs.keys())
        if unknown:
            jobs.update((j.id, j) for j in await self._repo.get_jobs(unknown)
                        if j.state == JobState.queued)
        if any(job_id not in outcome.job_ids for job_id in jobs):
            # A job whose messages reached the raw log after this build read it is not
            # finished: its messages are still pending and the build queued by its store
            # finishes it. A job with no pending message (its raw-log write was lost in a
            # crash, or built by another process) is finished here.
            still_pending = {m.job_id for m in await self._repo.session_messages(
                namespace, session_id) if m.state == "pending" and m.job_id}
            jobs = {i: j for i, j in jobs.items()
                    if i in outcome.job_ids or i not in still_pending}
        now = datetime.now(UTC)
        for job in jobs.values():
            result = json.loads(job.result or "{}")
            result["memories_created"] = outcome.created
            result["memories_updated"] = outcome.updated
            result["firewalled"] = outcome.firewalled
            if result.get("status") == StoreStatus.queued:
                result["status"] = StoreStatus.stored
            job.state, job.updated_at, job.result = JobState.done, now, json.dumps(result)
        await self._repo.upsert_jobs(list(jobs.values()))  # one commit for all of them
        lap("jobs")
        return outcome

    @staticmethod
    def _job_with_result(job: JobRecord, result: StoreResult) -> JobRecord:
        job.result = result.model_dump_json()
        return job

    # --- background builds (wait=true or false, and recovery) -----------------------------

    @property
    def queued_sessions(self) -> int:
        return len(self._queued)

    def has_queued(self, namespace: str, session_id: str) -> bool:
        """Whether a build of the session is queued here (or deferred, queued again soon)."""
        return (namespace, session_id) in self._queued | self._deferred

    def enqueue(self, namespace: str, session_id: str) -> None:
        key = (namespace, session_id)
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def start(self) -> None:
        self._worker = asyncio.create_task(self._run_queue(), name="store-builds")

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None

    async def resume_pending(self) -> int:
        """Finish the deletes a crash cut short (deletes.py: before the server answers, so
        no request sees one half done), then queue every session left unfinished by a crash:
        messages not yet built, or a job whose build landed but which was not yet marked
        done."""
        await self.deletes.resume()
        pending = sorted(set(await self._repo.pending_sessions())
                         | set(await self._repo.queued_job_sessions()))
        for namespace, session_id in pending:
            self.enqueue(namespace, session_id)
        if pending:
            log.info("store_resume", sessions=len(pending))
        return len(pending)

    async def _run_queue(self) -> None:
        while True:
            end_if_stopping()
            self.heartbeat = datetime.now(UTC)
            try:
                async with asyncio.timeout(_IDLE_SECONDS):
                    key = await self._queue.get()
            except TimeoutError:
                if self._built_since_trim:
                    # A burst of builds is over: hand back the pages its passes freed
                    # (glibc keeps them for reuse; docs/benchmarks.md, "Server memory").
                    self._built_since_trim = False
                    await asyncio.to_thread(release_free_memory)
                continue
            self._queued.discard(key)
            namespace, session_id = key
            self._building = True
            try:
                async with self._locks.hold(namespace):
                    await self._build(namespace, session_id)
            except asyncio.CancelledError:
                if stopping():  # stop(): the worker ends here
                    raise
                # One this task was not sent fails this build, not the worker: ending the
                # worker left every later session unbuilt until a restart.
                log.exception("store_build_failed", namespace=namespace, session_id=session_id)
                self._retry_later(key)
            except Unavailable as busy:  # LockTimeout, or the lease store did not answer
                # The messages are acknowledged: build them once the namespace is free.
                log.warning("store_build_deferred", namespace=namespace, session_id=session_id,
                            retry_seconds=_BUSY_RETRY_SECONDS, reason=str(busy)[:200])
                self._retry_later(key)
            except Exception:
                # One bad session must not stop the others; it stays pending and is retried
                # at the next start-up or the next store call on it.
                log.exception("store_build_failed", namespace=namespace, session_id=session_id)
            finally:
                self._building = False
                self._built_since_trim = True

    def _retry_later(self, key: tuple[str, str]) -> None:
        self._deferred.add(key)

        def again() -> None:
            self._deferred.discard(key)
            self.enqueue(*key)

        asyncio.get_running_loop().call_later(_BUSY_RETRY_SECONDS, again)

    async def idle(self) -> None:
        """Wait until the background queue is drained (tests and benchmarks)."""
        # Polling keeps the worker free of test-only signalling; this is not on a hot path.
        while (self._queued or self._deferred or self._building  # noqa: ASYNC110
               or not self._queue.empty()):
            await asyncio.sleep(0.05)

    # --- jobs ----------------------------------------------------------------------------

    async def get_job(self, job_id: str) -> JobPublic:
        job = await self._repo.get_job(job_id)
        if job is None:
            raise NotFound(f"job {job_id!r} not found")
        result = StoreResult.model_validate_json(job.result) if job.result not in (None, "{}") \
            else None
        return JobPublic(id=job.id, namespace=job.namespace, session_id=job.session_id,
                         state=JobState(job.state), created_at=job.created_at,
                         updated_at=job.updated_at, result=result, error=job.error)


def _same_branch(request: StoreRequest, stored: Iterable[MessageRecord]) -> None:
    """A session lives on one branch: its memories are cut from its messages in order, and a
    memory records one branch. New messages on another branch would either be filed under
    the old one (recall on the new branch would never see them) or split the session's
    chunks, so a fork is stored as a session of its own.

    Raises:
        Conflict: the session holds messages on another branch than `request.branch`.
    """
    first = min(stored, key=lambda m: m.seq, default=None)
    if first is not None and first.branch != request.branch:
        raise Conflict(
            f"session {request.session_id!r} is on branch {first.branch!r}, not "
            f"{request.branch!r}: a session's messages live on one branch; store the other "
            "branch's messages under a session_id of its own",
            details={"session_branch": first.branch, "branch": request.branch})
