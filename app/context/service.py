"""Context without a query: what an assistant should know when a session starts.

Three sections, in this order, within one token budget:

1. **pinned**: every memory the client pinned (unless forgotten), most important first;
2. **durable**: active long-term facts (tier `longterm`, compression summaries) and
   decisions and preferences of importance >= `context_durable_min_importance`, most
   important first, newer first among equals;
3. **latest_session**: the gist of the session stored most recently (or the one asked
   for): its most important memories that still fit, shown in the session's order.

Memories are taken in that order until the budget is full; one that does not fit is left
out (counted in `left_out`) and smaller ones after it are still tried. Tokens are counted
with the embedding model's tokenizer, the block is rendered by recall's own `render_block`
and counted by its `TokenCounter` (from its pieces), so a context and a recall read and
count alike. A context records no
recall hits: nothing was matched against a question.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

from app.config import Settings
from app.context.schemas import ContextMemory, ContextReason, ContextRequest, ContextResponse
from app.embedding.pool import EmbeddingPool
from app.recall.block import TokenCounter, render_block
from app.recall.candidates import Candidate, Packed, public
from app.recall.schemas import BlockLanguage
from app.storage.records import MemoryRecord, SessionRecord
from app.storage.repository import Repository
from app.time_range import as_utc

_DURABLE_CATEGORIES = ("decision", "preference")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _moment(memory: MemoryRecord) -> datetime:
    return as_utc(memory.time_end or memory.time_start or memory.created_at or _EPOCH)


def _by_importance(memories: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    """Most important first; newer first among equals (the id keeps the order stable)."""
    return sorted(memories, key=lambda m: (-m.importance, -_moment(m).timestamp(), m.id))


def _latest(sessions: Sequence[SessionRecord]) -> SessionRecord | None:
    return max(sessions, key=lambda s: (as_utc(s.updated_at or s.stored_at or _EPOCH),
                                        s.session_id), default=None)


class ContextService:
    def __init__(self, repo: Repository, pool: EmbeddingPool, settings: Settings) -> None:
        self._repo = repo
        self._pool = pool
        self._settings = settings
        self._tokens = TokenCounter(pool.count_tokens)

    async def context(self, request: ContextRequest) -> ContextResponse:
        started = time.perf_counter()
        s = self._settings
        max_tokens = request.max_tokens or s.context_max_tokens
        found = await self._repo.context_memories(
            request.namespace, durable_categories=_DURABLE_CATEGORIES,
            durable_min_importance=s.context_durable_min_importance)
        pinned = _by_importance([m for m in found if m.pinned])
        durable = _by_importance([m for m in found if not m.pinned])
        session_id = request.session_id
        if session_id is None:
            latest = _latest(await self._repo.list_sessions(request.namespace))
            session_id = latest.session_id if latest else None
        taken = {m.id for m in found}
        gist = [] if session_id is None else _by_importance([
            m for m in await self._repo.session_memories(request.namespace, session_id)
            if m.state == "active" and m.id not in taken])

        chosen: list[tuple[MemoryRecord, ContextReason, int]] = []
        used = left_out = 0
        for reason, memories in ((ContextReason.pinned, pinned),
                                 (ContextReason.durable, durable),
                                 (ContextReason.latest_session, gist)):
            for memory in memories:
                tokens = self._tokens.count(memory.text)
                if used + tokens > max_tokens:
                    left_out += 1
                    continue
                chosen.append((memory, reason, tokens))
                used += tokens
        # The gist reads as the session went, not by importance.
        head = [c for c in chosen if c[1] != ContextReason.latest_session]
        tail = sorted((c for c in chosen if c[1] == ContextReason.latest_session),
                      key=lambda c: (c[0].start_seq, c[0].part))
        chosen = head + tail

        packed = [Packed(Candidate(m, score=m.importance / 10), m.text, list(m.msg_ids),
                         tokens, trimmed=False) for m, _, tokens in chosen]
        language = request.language
        if language == BlockLanguage.auto:
            chinese = sum(1 for m, _, _ in chosen if m.language == "zh")
            language = BlockLanguage.zh if chosen and 2 * chinese >= len(chosen) \
                else BlockLanguage.en
        block, frame = render_block(packed, language=language)
        return ContextResponse(
            namespace=request.namespace,
            memories=[ContextMemory(**public(p).model_dump(), reason=reason)
                      for p, (_, reason, _) in zip(packed, chosen, strict=True)],
            count=len(chosen),
            tokens=used,
            max_tokens=max_tokens,
            language=language.value,
            block=block,
            block_tokens=self._tokens.block(block, frame, [p.text for p in packed],
                                            [p.tokens for p in packed]),
            session_id=session_id,
            left_out=left_out,
            took_ms=round((time.perf_counter() - started) * 1000, 2),
        )
