"""One compression pass over one namespace: score, learn, decide, compress, write.

The pass works on a snapshot, so store calls are not held up by the slow parts:

1. **Read** every memory of the namespace with its vector (no lock; reads never block).
2. **Score** memories that are new or whose text changed: the four dimensions (scoring.py),
   and their importance refined by the weight score on first scoring.
3. **Feedback**: reference phrases in new messages boost what they point to; recalled
   memories used by later messages give the context hit rate and move the weights.
4. **Decide** with the live policy (rules.py), and with the shadow policy for the report.
5. **Prepare** each group of memories to compress: clusters, summaries (embedded), triples;
   then the **quality gate** (gate.py): below its coverage bound nothing is compressed.
6. **Apply** under the namespace write lock: the memories touched are read again and a
   group whose sources changed meanwhile is skipped; then archive rows, summaries, changed
   memory columns and events are written, one table version each.

Crash safety: the full text reaches the archive before any memory text is replaced, ids of
summaries and events are deterministic, and stale archive rows (a memory active again) are
cleared by a later pass, judged on states read after its own writes (never a row it has just
written) — so a pass interrupted anywhere is repaired by running again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import structlog

from app.classify.analyzer import Analysis, analyze
from app.classify.importance import estimate_importance
from app.classify.smalltalk import is_small_talk
from app.compression import feedback as fb
from app.compression import gate
from app.compression.clustering import cluster, consecutive_runs
from app.compression.metrics import CompressionMetrics
from app.compression.policy import Policy, build_policy
from app.compression.rules import Decision, Plan, RuleParams, StreamItem, decide, long_term_due
from app.compression.schemas import (
    FailedProbe,
    FeedbackView,
    GateReport,
    NamespaceResult,
    PolicyConfig,
    PolicyView,
    ShadowDiff,
    ShadowReport,
)
from app.compression.scoring import (
    Dimensions,
    combine,
    named_terms,
    novelty_scores,
    urgency_score,
)
from app.compression.scoring import text_dimensions as score_text
from app.compression.summarize import AbstractiveSummarizer, extractive_summary
from app.compression.text import strip_roles
from app.compression.triples import compress_text
from app.config import Settings
from app.embedding.pool import EmbeddingPool
from app.errors import BadRequest
from app.locks import NamespaceLocks
from app.recall.references import parse_query
from app.storage.records import ArchiveRecord, EventRecord, MemoryRecord, new_event
from app.storage.repository import Repository

log = structlog.get_logger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Columns a pass may change on existing memories (one partial-column merge per pass).
_MUTABLE = ("text", "state", "tier", "protected", "importance", "score_novelty",
            "score_entropy", "score_task", "score_emotion", "weight_score", "score_feedback",
            "score_hash", "decision", "decided_at", "updated_at")
_JUNK_ENTROPY = 0.15
_SHADOW_EXAMPLES = 50
# A recalled memory nobody referenced counts as ignored once this long has passed.
_FOLLOW_UP = timedelta(minutes=10)
_MAX_PENDING = 1000
_EMBED_SLICE = 2


def policy_key(namespace: str) -> str:
    return f"compression:policy:{namespace}"


def feedback_key(namespace: str) -> str:
    return f"compression:feedback:{namespace}"


def stream_order(memory: MemoryRecord) -> tuple[Any, ...]:
    """Time order of a namespace's memories: message time, then position in the session."""
    return (memory.time_start or memory.created_at or _EPOCH, memory.session_id,
            memory.start_seq, memory.part, memory.id)


def score_key(memory: MemoryRecord) -> str:
    """What `score_hash` must equal for the stored scores to belong to the memory's text: its
    content hash, or a hash of the text for rows written without one (older stores)."""
    return memory.content_hash or "text:" + hashlib.sha256(memory.text.encode()).hexdigest()


def dimensions_of(memory: MemoryRecord) -> Dimensions:
    return Dimensions(memory.score_novelty, memory.score_entropy, memory.score_task,
                      memory.score_emotion)


def summary_id(namespace: str, sources: Sequence[str]) -> str:
    """Deterministic: replaying a half-written pass rewrites the same summary."""
    raw = "\x1f".join([namespace, *sorted(sources)])
    return "sum_" + hashlib.sha256(raw.encode()).hexdigest()[:24]


@dataclass
class _Group:
    sources: list[MemoryRecord]
    summary: MemoryRecord | None = None
    compressed: dict[str, str] = field(default_factory=dict)  # memory id -> triples


@dataclass
class _Work:
    """Everything one pass decided for one namespace, before it is written."""

    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    importance_delta: dict[str, int] = field(default_factory=dict)
    events: list[EventRecord] = field(default_factory=list)
    groups: list[_Group] = field(default_factory=list)
    stale_archive: list[str] = field(default_factory=list)
    expected_hash: dict[str, str] = field(default_factory=dict)

    def change(self, memory: MemoryRecord, **values: Any) -> None:
        self.changes.setdefault(memory.id, {}).update(values)
        self.expected_hash[memory.id] = memory.content_hash


class CompressionService:
    def __init__(self, repo: Repository, pool: EmbeddingPool, locks: NamespaceLocks,
                 settings: Settings, *, metrics: CompressionMetrics,
                 summarizer: AbstractiveSummarizer | None = None) -> None:
        self._repo = repo
        self._pool = pool
        self._locks = locks
        self._settings = settings
        self.metrics = metrics
        self._summarizer = summarizer

    async def close(self) -> None:
        if self._summarizer is not None:
            await self._summarizer.close()

    # --- policies ----------------------------------------------------------------------

    async def _config(self, namespace: str) -> tuple[PolicyConfig, bool]:
        raw = await self._repo.get_meta(policy_key(namespace))
        if raw:
            return PolicyConfig.model_validate_json(raw), True
        return PolicyConfig(preset=self._settings.compression_preset), False

    async def _feedback(self, namespace: str) -> fb.FeedbackState:
        return fb.FeedbackState.from_json(await self._repo.get_meta(feedback_key(namespace)))

    @staticmethod
    def _policies(config: PolicyConfig, state: fb.FeedbackState) -> tuple[Policy, Policy | None]:
        live = build_policy(config.preset, config.overrides)
        if state.weights and state.preset == live.name:
            live = live.model_copy(update={"weights": live.weights.model_copy(
                update=state.weights)})
        shadow = (build_policy(config.shadow.preset, config.shadow.overrides)
                  if config.shadow else None)
        return live, shadow

    async def policy(self, namespace: str) -> PolicyView:
        config, chosen = await self._config(namespace)
        state = await self._feedback(namespace)
        live, shadow = self._policies(config, state)
        return PolicyView(namespace=namespace, config=config, chosen=chosen, live=live,
                          shadow=shadow, feedback=self._feedback_view(state))

    async def set_policy(self, namespace: str, config: PolicyConfig) -> PolicyView:
        """Validate and store a namespace's policy choice.

        Raises:
            BadRequest: an override is unknown, out of range or contradicts another.
        """
        from pydantic import ValidationError

        try:
            build_policy(config.preset, config.overrides)
            if config.shadow:
                build_policy(config.shadow.preset, config.shadow.overrides)
        except ValidationError as exc:
            problems = [{"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]}
                        for e in exc.errors()]
            raise BadRequest("invalid policy: " + "; ".join(
                f"{p['field']}: {p['problem']}" for p in problems), details=problems) from None
        async with self._locks.hold(namespace):
            await self._repo.set_meta(policy_key(namespace), config.model_dump_json())
        return await self.policy(namespace)

    @staticmethod
    def _feedback_view(state: fb.FeedbackState) -> FeedbackView:
        return FeedbackView(hit_rate=state.hit_rate, recalled_total=state.recalled_total,
                            referenced_total=state.referenced_total,
                            references_total=state.references_total,
                            checked_at=state.checked_at, learned_weights=state.weights)

    def capacity(self, policy: Policy) -> int:
        return policy.capacity_chars or self._settings.compression_capacity_chars

    # --- the pass ----------------------------------------------------------------------

    async def run_namespace(self, namespace: str, *, dry_run: bool = False,
                            force: bool = False) -> NamespaceResult:
        """One pass over `namespace` (see the module docstring). Errors propagate: the
        scheduler isolates them per namespace."""
        started = time.monotonic()
        now = datetime.now(UTC)
        config, _ = await self._config(namespace)
        state = await self._feedback(namespace)
        stored_state = state.to_json()
        live, shadow = self._policies(config, state)
        memories = await self._repo.namespace_memories(namespace, with_vector=True)
        result = NamespaceResult(namespace=namespace, dry_run=dry_run, policy=live.name,
                                 started_at=now, memories=len(memories))
        clock = _Clock(result.phases, since=started)
        clock.lap("read")
        work = _Work()
        by_id = {m.id: m for m in memories}

        # Archive rows of memories that are active again (a restore or a pass cut short).
        archived = await self._repo.namespace_archive(namespace)
        work.stale_archive = [a.memory_id for a in archived
                              if by_id.get(a.memory_id) is None
                              or by_id[a.memory_id].state != "compressed"]

        history = sorted((m for m in memories if not m.summary_of and m.state != "forgotten"),
                         key=stream_order)
        result.scored = await self._score(history, work, live)
        clock.lap("score")
        result.references = await self._apply_feedback(namespace, memories, state, live, work,
                                                        now)
        clock.lap("feedback")
        result.hit_rate = state.hit_rate
        live, shadow = self._policies(config, state)  # weights may have moved
        result.weights = live.weights.model_dump()

        stream = [m for m in history if m.state == "active"]
        # From the text on every pass (a few regular expressions per line): no stored column.
        urgency = [urgency_score(m.text) for m in stream]
        scores = [self._weight(m, live, u) for m, u in zip(stream, urgency, strict=True)]
        for memory, score in zip(stream, scores, strict=True):
            if not math.isclose(score, memory.weight_score, abs_tol=1e-6):
                work.change(memory, weight_score=score)
                memory.weight_score = score
        size = sum(len(m.text) for m in memories if m.state == "active")
        pressure = size / self.capacity(live)
        plan = decide(self._items(stream, scores, live, now), self._params(live),
                      pressure=pressure, force=force)
        self._record_plan(plan, stream, work, result, live, now)
        if shadow is not None:
            shadow_scores = [self._weight(m, shadow, u)
                             for m, u in zip(stream, urgency, strict=True)]
            shadow_plan = decide(self._items(stream, shadow_scores, shadow, now),
                                 self._params(shadow), pressure=size / self.capacity(shadow),
                                 force=force)
            result.shadow = self._shadow_report(shadow.name, stream, plan, shadow_plan, scores,
                                                shadow_scores)
        for memory in memories:
            if memory.summary_of and memory.decision != Decision.summary:
                work.change(memory, decision=str(Decision.summary), decided_at=now)
            elif memory.state == "compressed" and memory.decision != Decision.compressed:
                work.change(memory, decision=str(Decision.compressed), decided_at=now)

        result.text_chars_before = sum(len(m.text) for m in memories)
        clock.lap("decide")
        if not dry_run and plan.to_compress:
            work.groups = await self._prepare_groups(
                [stream[i] for i in plan.to_compress], [i for i in plan.to_compress], live, now)
            clock.lap("prepare")
            if work.groups and live.min_coverage > 0:
                result.gate = await self._gate(memories, work.groups, live)
                clock.lap("gate")
                if not result.gate.passed:
                    work.groups = []  # rolled back before anything is written
        if not dry_run:
            await self._write(namespace, work, result, now)
            if state.to_json() != stored_state:  # every meta write is a table version
                await self._repo.set_meta(feedback_key(namespace), state.to_json())
            clock.lap("write")
        self._finish(result, memories, work, live, dry_run=dry_run)
        result.seconds = round(time.monotonic() - started, 3)
        self.metrics.set(namespace, pressure=result.pressure_after,
                         candidate_ratio=result.candidate_ratio, hit_rate=state.hit_rate)
        log.info("compression_pass", namespace=namespace, dry_run=dry_run,
                 compressed=len(result.compressed), summaries=len(result.summaries),
                 pressure=round(pressure, 3), seconds=result.seconds,
                 gate=None if result.gate is None else result.gate.coverage)
        if result.gate is not None and not result.gate.passed:
            log.warning("compression_gate_failed", namespace=namespace,
                        coverage=result.gate.coverage, failed=[
                            (f.question[:60], f.missing) for f in result.gate.failed])
        return result

    # --- scoring -----------------------------------------------------------------------

    async def _score(self, history: list[MemoryRecord], work: _Work, policy: Policy) -> int:
        """Dimension scores of active memories never scored for their current text."""
        todo = [i for i, m in enumerate(history)
                if m.state == "active" and m.score_hash != score_key(m)]
        if not todo:
            return 0
        texts = [history[i].text for i in todo]
        analyses: list[Analysis] = []
        dims: list[tuple[float, float, float]] = []

        def analyse_all() -> None:
            for text in texts:
                analysis = analyze(text)
                analyses.append(analysis)
                dims.append(score_text(text, analysis))

        await asyncio.to_thread(analyse_all)
        vectors = _unit_rows([m.vector for m in history], self._pool.dim)
        novelty = novelty_scores(vectors, todo, overlapping=_overlaps(history, todo))
        for i, analysis, (entropy, task, emotion) in zip(todo, analyses, dims, strict=True):
            memory = history[i]
            first_scoring = not memory.score_hash
            values = {"score_novelty": novelty[i], "score_entropy": entropy, "score_task": task,
                      "score_emotion": emotion, "score_hash": score_key(memory)}
            for name, value in values.items():
                setattr(memory, name, value)
            work.change(memory, **values)
            if first_scoring and not memory.importance_overridden:
                # SPEC §5: importance comes from category *and* weight score, which the
                # builder cannot know yet. Applied once, as the difference to the builder's
                # own estimate, so promotions earned meanwhile are kept.
                weight = combine(dimensions_of(memory), policy.weights.to_weights(),
                                 urgency=urgency_score(memory.text))
                with_weight = estimate_importance(
                    analysis.category, analysis.confidence, analysis.entities,
                    weight_score=weight, small_talk=analysis.small_talk)
                if with_weight != analysis.importance:
                    work.importance_delta[memory.id] = with_weight - analysis.importance
        return len(todo)

    def _weight(self, memory: MemoryRecord, policy: Policy, urgency: float) -> float:
        # Urgent text is never junk, however short ("lost my passport, flight tomorrow!").
        if policy.junk_filter and urgency < 0.5 and (
                memory.score_entropy < _JUNK_ENTROPY or is_small_talk(strip_roles(memory.text))):
            return 0.0
        return combine(dimensions_of(memory), policy.weights.to_weights(),
                       feedback=memory.score_feedback, urgency=urgency)

    @staticmethod
    def _params(policy: Policy) -> RuleParams:
        return RuleParams(low=policy.base_threshold, high=policy.emergency_hold,
                          run_length=policy.run_length, window_size=policy.window_size,
                          candidate_ratio=policy.candidate_ratio, memory_limit=policy.memory_limit)

    def _items(self, stream: Sequence[MemoryRecord], scores: Sequence[float], policy: Policy,
               now: datetime) -> list[StreamItem]:
        age_days = self._settings.compression_age_days
        items = []
        for memory, score in zip(stream, scores, strict=True):
            restored = memory.decision == Decision.restored
            held = memory.decision == Decision.hold
            # Pinned by the client: never a candidate, like a protected memory.
            eligible = not memory.protected and not memory.pinned and not restored
            ineligible_as = (Decision.restored if restored else Decision.hold if held
                             else Decision.protected)
            keep = policy.emotion_keep is not None and memory.score_emotion >= policy.emotion_keep
            old = long_term_due(_moment(memory), now, age_days=age_days)
            items.append(StreamItem(score=score, eligible=eligible, keep=keep,
                                    ineligible_as=ineligible_as, old=old))
        return items

    # --- feedback ----------------------------------------------------------------------

    async def _apply_feedback(self, namespace: str, memories: list[MemoryRecord],
                              state: fb.FeedbackState, live: Policy, work: _Work,
                              now: datetime) -> int:
        """Explicit references and the context hit rate; returns references boosted."""
        checked_at = state.checked_at or now - timedelta(days=1)
        pending = {p["id"]: datetime.fromisoformat(p["at"]) for p in state.pending}
        since = min([checked_at, *pending.values()])
        messages = await self._repo.messages_received_since(namespace, since)
        by_id = {m.id: m for m in memories}
        boosted = 0
        recalled_since = any(m.last_accessed and m.last_accessed > checked_at
                             for m in memories)
        if state.checked_at is not None and not messages and not recalled_since \
                and not pending:
            return 0  # nothing happened since the last check: keep the state as it is

        # Explicit: reference phrases in messages that arrived since the last check.
        cues = [(m, parse_query(m.content)) for m in messages
                if m.received_at and m.received_at > checked_at]
        cues = [(m, q) for m, q in cues if q.reference is not None]
        candidates = [m for m in memories if m.state == "active" and m.vector is not None]
        if cues and candidates:
            vectors = _unit_rows([m.vector for m in candidates], self._pool.dim)
            queries = await self._pool.embed_many([q.text for _, q in cues], query=True,
                                                  background=True)
            for (message, _), query in zip(cues, queries, strict=True):
                sims = vectors @ query
                for index in np.argsort(-sims):
                    target = candidates[int(index)]
                    if sims[index] < self._pool.profile.related_cosine:
                        break
                    if (target.session_id == message.session_id
                            and message.msg_id in target.msg_ids):
                        continue  # the memory holding the reference itself
                    said = target.time_start or target.created_at
                    if said is not None and message.time is not None and said > message.time:
                        continue  # a reference points back, never forward
                    target.score_feedback = fb.add_boost(target.score_feedback)
                    work.change(target, score_feedback=target.score_feedback)
                    work.events.append(new_event(
                        target, "accessed", f"referenced: “{message.content[:80]}”", now,
                        {"reference": True, "msg_id": message.msg_id,
                         "boost": target.score_feedback}))
                    boosted += 1
                    break
        state.references_total += len(cues)

        # Implicit: recalled memories (hits or accesses since the last check) used later.
        recalled = {m.id: m.last_accessed for m in memories
                    if m.last_accessed and m.last_accessed > checked_at and m.state == "active"}
        recalled.update({k: v for k, v in pending.items() if k in by_id and k not in recalled})
        used: list[Dimensions] = []
        ignored: list[Dimensions] = []
        still_pending: list[dict[str, str]] = []
        for memory_id, at in recalled.items():
            memory = by_id[memory_id]
            terms = fb.memory_terms(memory.entities)
            later = [m for m in messages if m.received_at and m.received_at > at
                     and not (m.session_id == memory.session_id and m.msg_id in memory.msg_ids)]
            if any(fb.is_referenced(terms, m.content) for m in later):
                used.append(dimensions_of(memory))
            elif now - at > _FOLLOW_UP:
                ignored.append(dimensions_of(memory))
            else:
                still_pending.append({"id": memory_id, "at": at.isoformat()})
        evaluated = len(used) + len(ignored)
        if evaluated:
            state.hit_rate = fb.smoothed_rate(state.hit_rate, len(used) / evaluated)
            state.recalled_total += evaluated
            state.referenced_total += len(used)
            base = build_policy(live.name).weights.to_weights()
            current = live.weights.to_weights()
            learned = fb.adjust_weights(base, current, used, ignored)
            if learned != current:
                state.weights = learned.as_dict()
                state.preset = live.name
        state.history = [*state.history[-9:], {
            "at": now.isoformat(), "evaluated": evaluated, "used": len(used),
            "references": boosted}]
        state.pending = still_pending[-_MAX_PENDING:]
        state.checked_at = now
        return boosted

    # --- decisions ---------------------------------------------------------------------

    def _record_plan(self, plan: Plan, stream: list[MemoryRecord], work: _Work,
                     result: NamespaceResult, policy: Policy, now: datetime) -> None:
        age_days = self._settings.compression_age_days
        for memory, decision in zip(stream, plan.decisions, strict=True):
            if decision == Decision.hold and not memory.protected:
                work.change(memory, protected=True)
                work.events.append(new_event(
                    memory, "evolved", f"protected: weight {memory.weight_score:.2f} above the "
                    f"emergency hold {policy.emergency_hold:g}", now,
                    {"protected": True, "weight": memory.weight_score},
                    event_id=f"{memory.id}:hold:{memory.content_hash[:16]}"))
                result.held.append(memory.id)
            # `compress` is stored as `candidate` until the write turns it into `compressed`
            # (a dry run, or a group skipped because a source changed, stays a candidate).
            stored = str(decision) if decision != Decision.compress else str(Decision.candidate)
            if memory.decision != stored:
                work.change(memory, decision=stored, decided_at=now)
            kept = decision not in (Decision.candidate, Decision.compress)
            if (kept and memory.tier != "longterm"
                    and long_term_due(_moment(memory), now, age_days=age_days)):
                work.change(memory, tier="longterm")
                work.events.append(new_event(
                    memory, "promoted", f"{memory.tier} → longterm: older than {age_days:g} "
                    "days, kept as a long-term fact", now,
                    {"from": memory.tier, "to": "longterm", "reason": "age"},
                    event_id=f"{memory.id}:promoted:age"))
                result.promoted.append(memory.id)
        result.stream = len(stream)
        result.decisions = dict(Counter(str(d) for d in plan.decisions))
        result.candidate_ratio = round(plan.candidate_ratio, 4)
        result.max_window_ratio = round(plan.max_window_ratio, 4)
        result.windows_triggered = len(plan.windows)
        result.pressure = round(plan.pressure, 6)
        result.pressure_alarm = plan.pressure_alarm
        result.forced = plan.forced
        result.aged = [stream[i].id for i in plan.aged]

    @staticmethod
    def _shadow_report(name: str, stream: list[MemoryRecord], live: Plan, shadow: Plan,
                       live_scores: list[float], shadow_scores: list[float]) -> ShadowReport:
        pairs: Counter[str] = Counter()
        examples: list[ShadowDiff] = []
        for i, memory in enumerate(stream):
            a, b = live.decisions[i], shadow.decisions[i]
            if a != b:
                pairs[f"{a}→{b}"] += 1
                if len(examples) < _SHADOW_EXAMPLES:
                    examples.append(ShadowDiff(memory_id=memory.id, live=str(a), shadow=str(b),
                                               live_score=round(live_scores[i], 4),
                                               shadow_score=round(shadow_scores[i], 4)))
        return ShadowReport(policy=name, differing=sum(pairs.values()), by_pair=dict(pairs),
                            would_compress=len(shadow.to_compress), examples=examples)

    # --- execution ---------------------------------------------------------------------

    async def _prepare_groups(self, chosen: list[MemoryRecord], positions: list[int],
                              policy: Policy, now: datetime) -> list[_Group]:
        """Clusters of the memories to compress, each with its summary and triples."""
        by_session: dict[str, list[tuple[int, MemoryRecord]]] = {}
        for position, memory in zip(positions, chosen, strict=True):
            by_session.setdefault(memory.session_id, []).append((position, memory))
        groups: list[list[MemoryRecord]] = []
        for members in by_session.values():
            records = [m for _, m in members]
            if policy.clustering:
                vectors = _unit_rows([m.vector for m in records], self._pool.dim)
                texts = [m.text for m in records]
                parts = await asyncio.to_thread(
                    cluster, texts, vectors, distance=policy.cluster_distance,
                    max_size=policy.max_cluster_size, positions=[p for p, _ in members])
            else:
                parts = consecutive_runs([p for p, _ in members],
                                         max_size=policy.max_cluster_size)
            groups += [[records[i] for i in part] for part in parts]
        prepared = [_Group(sources=g) for g in groups]
        texts = await self._summaries(prepared, policy)
        if not texts:
            return []
        # A few summaries per forward pass: the embedding thread serves store and recall too,
        # and one pass over many 900-character texts would hold them up for seconds.
        vectors = np.concatenate([await self._pool.embed_many(texts[i: i + _EMBED_SLICE],
                                                              background=True)
                                  for i in range(0, len(texts), _EMBED_SLICE)])
        analyses = await asyncio.to_thread(lambda: [analyze(t) for t in texts])

        def triples() -> None:
            for group in prepared:
                for memory in group.sources:
                    entities = [*named_terms(memory.entities),
                                *json.loads(memory.entities or "{}").get("proper_nouns", [])]
                    group.compressed[memory.id] = compress_text(
                        memory.text, entities=entities,
                        keep_relations=policy.keep_entity_relations)

        await asyncio.to_thread(triples)
        for group, text, vector, analysis in zip(prepared, texts, vectors, analyses,
                                                 strict=True):
            group.summary = self._summary_record(group.sources, text, vector.tolist(),
                                                 analysis, now)
        return prepared

    async def _gate(self, memories: list[MemoryRecord], groups: list[_Group], policy: Policy
                    ) -> GateReport:
        """The quality gate of the prepared groups (app/compression/gate.py)."""
        sources = [m for g in groups for m in g.sources]
        probes = await asyncio.to_thread(gate.probes_of, sources)
        if not probes:
            return GateReport(probes=0, evaluated=0, coverage=1.0, bound=policy.min_coverage,
                              passed=True, failed_probes=0, failed=[])
        questions = await self._pool.embed_many([p.question for p in probes], query=True,
                                                background=True)
        questions = _unit_rows([list(map(float, q)) for q in questions], self._pool.dim)
        searchable = [m for m in memories if m.state == "active"]
        gone = {m.id for m in sources}
        summaries = [g.summary for g in groups if g.summary is not None]
        kept = [m for m in searchable if m.id not in gone]
        texts = {m.id: m.text for m in [*searchable, *summaries]}
        before = ([m.id for m in searchable], _unit_rows([m.vector for m in searchable],
                                                          self._pool.dim))
        after_records = [*kept, *summaries]
        after = ([m.id for m in after_records], _unit_rows([m.vector for m in after_records],
                                                            self._pool.dim))
        outcome = await asyncio.to_thread(gate.evaluate, probes, questions, before, after,
                                          texts)
        passed = outcome.coverage >= policy.min_coverage
        return GateReport(
            probes=outcome.probes, evaluated=outcome.evaluated,
            coverage=round(outcome.coverage, 4), bound=policy.min_coverage, passed=passed,
            failed_probes=outcome.failed_count,
            failed=[FailedProbe(**f) for f in outcome.failed],
            reason=None if passed else (
                f"answer coverage {outcome.coverage:.3f} of {outcome.evaluated} probe "
                f"questions is below {policy.min_coverage:g}: nothing compressed"))

    async def _summaries(self, groups: list[_Group], policy: Policy) -> list[str]:
        # No longer than a chunk: the embedding model reads ~256 tokens, a longer summary
        # would be searchable by its beginning only.
        max_chars = max(300, self._settings.chunk_max_chars)
        texts: list[str] = []
        for group in groups:
            sources = [m.text for m in group.sources]
            text = None
            if self._summarizer is not None:
                text = await self._summarizer.summarize(sources, max_chars=max_chars)
            if not text:
                keep = ([t for m in group.sources for t in named_terms(m.entities)]
                        if policy.protect_terms else [])
                facts = [n for m in group.sources for n in gate.entity_names(m)]
                text = await asyncio.to_thread(
                    extractive_summary, sources, ratio=policy.summary_ratio,
                    max_chars=max_chars, keep_terms=keep, facts=facts)
            texts.append(text or sources[0][:max_chars])
        return texts

    def _summary_record(self, sources: list[MemoryRecord], text: str, vector: list[float],
                        analysis: Analysis, now: datetime) -> MemoryRecord:
        from app.store.builder import language_of, text_hash

        first, last = sources[0], sources[-1]
        starts = [m.time_start for m in sources if m.time_start]
        ends = [m.time_end for m in sources if m.time_end]
        ids = [m.id for m in sources]
        digest = text_hash(text, [])
        dims = [dimensions_of(m) for m in sources]
        mean = {name: sum(getattr(d, name) for d in dims) / len(dims)
                for name in ("novelty", "entropy", "task", "emotion")}
        return MemoryRecord(
            id=summary_id(first.namespace, ids), namespace=first.namespace,
            session_id=first.session_id, text=text, vector=vector, content_hash=digest,
            created_at=now, updated_at=now, time_start=min(starts) if starts else None,
            time_end=max(ends) if ends else None, source="compression", branch=first.branch,
            tags=sorted({t for m in sources for t in m.tags}),
            subtopics=list(analysis.subtopics),
            entities=json.dumps(analysis.entities.to_dict(), ensure_ascii=False),
            speaker_pattern="summary", start_msg=first.start_msg, end_msg=last.end_msg,
            # Summaries hold no messages of their own (msg_ids stays empty) and sort before
            # every chunk, so the store's chunk planning never mistakes one for a chunk.
            start_seq=-1, end_seq=-1, category=str(analysis.category),
            category_confidence=analysis.confidence,
            importance=max(m.importance for m in sources), tier="longterm", state="active",
            score_novelty=mean["novelty"], score_entropy=mean["entropy"],
            score_task=mean["task"], score_emotion=mean["emotion"],
            weight_score=max(m.weight_score for m in sources), summary_of=ids,
            embedding_model=self._pool.name, language=language_of(text), score_hash=digest,
            decision=str(Decision.summary), decided_at=now,
        )

    async def _write(self, namespace: str, work: _Work, result: NamespaceResult,
                     now: datetime) -> None:
        """Apply the pass under the namespace lock; skip whatever changed meanwhile."""
        touched = set(work.changes) | {m.id for g in work.groups for m in g.sources}
        if not touched and not work.stale_archive and not work.events:
            return
        async with self._locks.hold(namespace):
            locked_at = time.monotonic()
            # Re-read what the pass touches: a long id list is slower than a namespace scan.
            reread = (await self._repo.get_memories(sorted(touched)) if len(touched) <= 500
                      else await self._repo.namespace_memories(namespace, with_vector=False))
            fresh = {m.id: m for m in reread}

            def unchanged(memory_id: str) -> bool:
                current = fresh.get(memory_id)
                expected = work.expected_hash.get(memory_id)
                return current is not None and (expected is None
                                                 or current.content_hash == expected)

            groups = []
            for group in work.groups:
                if all(unchanged(m.id) and fresh[m.id].state == "active"
                       and not fresh[m.id].protected and not fresh[m.id].pinned
                       for m in group.sources):
                    groups.append(group)
                else:
                    result.skipped_groups += 1
            archive: list[ArchiveRecord] = []
            summaries: list[MemoryRecord] = []
            for group in groups:
                assert group.summary is not None
                summaries.append(group.summary)
                work.events += [
                    new_event(group.summary, "created", "summary written by compression", now,
                              {"category": group.summary.category},
                              event_id=f"{group.summary.id}:created"),
                    new_event(group.summary, "merged",
                              f"merged {len(group.sources)} memories into a long-term summary",
                              now, {"sources": group.summary.summary_of},
                              event_id=f"{group.summary.id}:merged"),
                ]
                for source in group.sources:
                    current = fresh[source.id]
                    compact = group.compressed[source.id]
                    archive.append(ArchiveRecord(
                        memory_id=current.id, namespace=current.namespace,
                        session_id=current.session_id, text=current.text,
                        content_hash=current.content_hash, compressed_text=compact,
                        summary_id=group.summary.id, archived_at=now,
                        metadata=json.dumps({"weight": source.weight_score,
                                             "tier": current.tier}, ensure_ascii=False)))
                    work.changes.setdefault(source.id, {}).update(
                        text=compact, state="compressed", decision=str(Decision.compressed),
                        decided_at=now, updated_at=now)
                    work.events.append(new_event(
                        current, "compressed", f"into summary {group.summary.id}; full text "
                        f"archived ({len(current.text)} → {len(compact)} chars)", now,
                        {"summary_id": group.summary.id, "original_chars": len(current.text),
                         "compressed_chars": len(compact)},
                        event_id=f"{current.id}:compressed:{group.summary.id[4:20]}"))
                    result.compressed.append(source.id)
                result.summaries.append(group.summary.id)
                result.archived_chars += sum(len(fresh[m.id].text) for m in group.sources)
            rows = []
            for memory_id, values in work.changes.items():
                if not unchanged(memory_id):
                    continue  # rebuilt or deleted meanwhile: the next pass sees it anew
                latest = fresh[memory_id]
                row = {"id": memory_id, **{c: getattr(latest, c) for c in _MUTABLE}}
                row.update(values)
                delta = work.importance_delta.get(memory_id)
                if delta and not latest.importance_overridden:
                    row["importance"] = min(10, max(1, latest.importance + delta))
                rows.append(row)
            # Full text first: nothing is replaced before its original is safe.
            await self._repo.archive_memories(archive)
            await self._repo.upsert_memories(summaries)
            await self._repo.set_memory_columns(rows)
            written = {s.id for s in summaries}
            await self._repo.append_events([e for e in work.events
                                            if unchanged(e.memory_id) or e.memory_id in written])
            await self._delete_stale_archive(work.stale_archive,
                                             just_archived={a.memory_id for a in archive})
            result.lock_seconds = round(time.monotonic() - locked_at, 3)

    async def _delete_stale_archive(self, candidates: Sequence[str], *,
                                    just_archived: set[str]) -> None:
        """Drop the archive rows of memories that are active again (or gone). Caller holds
        the namespace lock, after the pass's own writes.

        The state read before the writes cannot decide this: a memory active then may be one
        this pass has just compressed, and its new archive row is then its only original.
        So the states are read again now, and what this pass archived is never dropped.
        """
        candidates = [i for i in candidates if i not in just_archived]
        if not candidates:
            return
        compressed = {m.id for m in await self._repo.get_memories(candidates)
                      if m.state == "compressed"}
        await self._repo.delete_archived([i for i in candidates if i not in compressed])

    def _finish(self, result: NamespaceResult, memories: list[MemoryRecord], work: _Work,
                policy: Policy, *, dry_run: bool) -> None:
        compressed = set(result.compressed)
        after = 0
        for memory in memories:
            if memory.id in compressed:
                after += len(work.changes[memory.id]["text"])
            else:
                after += len(memory.text)
        after += sum(len(g.summary.text) for g in work.groups
                     if g.summary is not None and g.summary.id in result.summaries)
        result.text_chars_after = after
        active = sum(len(m.text) for m in memories if m.state == "active"
                     and m.id not in compressed)
        active += sum(len(g.summary.text) for g in work.groups
                      if g.summary is not None and g.summary.id in result.summaries)
        result.pressure_after = round(active / self.capacity(policy), 6) if not dry_run \
            else result.pressure


class _Clock:
    """Seconds per phase of a pass, for the result (where a slow pass spends its time)."""

    def __init__(self, phases: dict[str, float], *, since: float) -> None:
        self._phases = phases
        self._last = since

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self._phases[name] = round(now - self._last, 3)
        self._last = now


def _moment(memory: MemoryRecord) -> datetime | None:
    """When a memory was said, for the age rule: its last message's time."""
    return memory.time_end or memory.time_start or memory.created_at


def _overlaps(history: list[MemoryRecord], todo: list[int], *, reach: int = 8
              ) -> dict[int, set[int]]:
    """For each row in `todo`, the few rows just before it that share a message with it."""
    found: dict[int, set[int]] = {}
    for i in todo:
        mine = set(history[i].msg_ids)
        found[i] = {j for j in range(max(0, i - reach), i)
                    if history[j].session_id == history[i].session_id
                    and mine.intersection(history[j].msg_ids)}
    return found


def _unit_rows(rows: Sequence[list[float] | None], dim: int) -> np.ndarray[Any, Any]:
    matrix = np.zeros((len(rows), dim), dtype=np.float32)
    for i, row in enumerate(rows):
        if row is not None and len(row) == dim:
            matrix[i] = row
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)

