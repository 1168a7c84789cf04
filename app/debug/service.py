"""The debug snapshot of a namespace: every memory's forms, scores and decision."""

from __future__ import annotations

from datetime import UTC, datetime

from app.compression.rules import Decision
from app.compression.service import CompressionService, score_key, stream_order
from app.debug.schemas import (
    CompressLevel,
    DumpItem,
    DumpMetrics,
    DumpRequest,
    DumpScores,
    MemoryDump,
)
from app.storage.records import MemoryRecord
from app.storage.repository import Repository


class DebugService:
    def __init__(self, repo: Repository, compression: CompressionService) -> None:
        self._repo = repo
        self._compression = compression

    async def memory_dump(self, request: DumpRequest) -> MemoryDump:
        """The namespace's memories in time order, with the forms `compress_level` asks for.

        The metrics are computed from the stored rows now (and the Prometheus gauges set to
        them), so they are current even between compression passes.
        """
        namespace = request.namespace
        memories = sorted(await self._repo.namespace_memories(namespace, with_vector=False),
                          key=stream_order)
        view = await self._compression.policy(namespace)
        capacity = self._compression.capacity(view.live)
        active = sum(len(m.text) for m in memories if m.state == "active")
        stream = [m for m in memories if m.state == "active" and not m.summary_of]
        candidates = sum(m.decision == Decision.candidate for m in stream)
        metrics = DumpMetrics(
            pressure_score=round(active / capacity, 6), alarm_level=view.live.memory_limit,
            candidate_ratio=round(candidates / len(stream), 4) if stream else 0.0,
            context_hit_rate=view.feedback.hit_rate, active_chars=active,
            capacity_chars=capacity)
        self._compression.metrics.set(namespace, pressure=metrics.pressure_score,
                                      candidate_ratio=metrics.candidate_ratio,
                                      hit_rate=metrics.context_hit_rate)

        chosen = [m for m in memories
                  if (request.state == "any" or m.state == request.state)
                  and (request.session_id is None or m.session_id == request.session_id)]
        page = chosen[request.offset: request.offset + request.limit]
        archived = {a.memory_id: a for a in await self._repo.get_archived(
            namespace, [m.id for m in page if m.state == "compressed"])}
        items = []
        for memory in page:
            entry = archived.get(memory.id)
            original = entry.text if entry is not None else memory.text
            compressed: str | None = None
            if memory.summary_of:
                compressed, original = memory.text, memory.text
            elif memory.state == "compressed":
                compressed = memory.text
            items.append(self._item(memory, request.compress_level, original, compressed,
                                    entry.summary_id if entry is not None else None))
        return MemoryDump(namespace=namespace, compress_level=request.compress_level,
                          generated_at=datetime.now(UTC), policy=view.live.name,
                          count=len(chosen), offset=request.offset, limit=request.limit,
                          metrics=metrics, items=items)

    @staticmethod
    def _item(memory: MemoryRecord, level: CompressLevel, original: str,
              compressed: str | None, summary: str | None) -> DumpItem:
        return DumpItem(
            id=memory.id, session_id=memory.session_id,
            kind="summary" if memory.summary_of else "chunk", state=memory.state,
            tier=memory.tier, protected=memory.protected, category=memory.category,
            importance=memory.importance, msg_ids=memory.msg_ids,
            summary_of=memory.summary_of, summarized_by=summary,
            original=original if level != CompressLevel.compressed else None,
            compressed=compressed if level != CompressLevel.originals else None,
            original_chars=len(original),
            compressed_chars=len(compressed) if compressed is not None else None,
            scores=DumpScores(novelty=round(memory.score_novelty, 4),
                              entropy=round(memory.score_entropy, 4),
                              task=round(memory.score_task, 4),
                              emotion=round(memory.score_emotion, 4),
                              feedback=round(memory.score_feedback, 4),
                              total=round(memory.weight_score, 4)),
            scored=memory.score_hash == score_key(memory),
            decision=memory.decision or None, decided_at=memory.decided_at,
            created_at=memory.created_at, time_start=memory.time_start,
            time_end=memory.time_end)
