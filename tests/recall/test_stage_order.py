"""Ordering (app/recall/order.py) on hand-made, already scored candidates: who is admitted,
ties, the two tiers, and a newer statement of a fact ahead of the older one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import numpy as np

from app.recall.candidates import Candidate
from app.recall.order import order
from app.recall.tuning import CONTEXT_THRESHOLD_FACTOR
from app.storage.repository import Repository
from tests.recall.stages import DAY, memory, query

# Every candidate carries its stored vector, as the searches return it, so ordering reads
# nothing: a repository that is not there would fail the test if it were used.
NO_REPO = cast(Repository, None)


def scored(memory_id: str, relevance: float, score: float, *, axis: int, text: str = "",
           session: str | None = None, days: float = 0, keyword: float = 0.0) -> Candidate:
    when = DAY + timedelta(days=days)
    m = memory(memory_id, text or f"user: note {memory_id}", session=session or memory_id,
               time_start=when, time_end=when)
    vector = np.zeros(8, dtype=np.float32)
    vector[axis] = 1.0
    return Candidate(m, relevance=relevance, score=score, when=when.timestamp(),
                     stored=vector, keyword=keyword)


async def run(candidates: list[Candidate], **q: Any) -> list[list[str]]:
    tiers = await order(candidates, query("where do I live", **q), None, repo=NO_REPO,
                        supersede_cosine=0.99)
    return [[c.memory.id for c in tier] for tier in tiers]


class TestAdmission:
    async def test_nothing_passes_nothing_is_returned(self) -> None:
        found = [scored("a", 0.34, 0.9, axis=0), scored("b", 0.2, 0.8, axis=1)]
        assert await run(found, min_score=0.35) == [[], []]

    async def test_once_one_passes_weaker_context_fills_down_to_a_share_of_it(self) -> None:
        floor = 0.35 * CONTEXT_THRESHOLD_FACTOR
        found = [scored("answer", 0.5, 0.5, axis=0),
                 scored("context", floor + 0.01, 0.6, axis=1, keyword=0.2),
                 scored("noise", floor - 0.01, 0.7, axis=2, keyword=0.2),
                 scored("near", floor + 0.05, 0.65, axis=3)]
        # The context fills what the answer leaves: packed after it, though it scores higher;
        # one near in meaning alone, holding no word of the question, does not.
        assert await run(found, min_score=0.35) == [["answer"], ["context"]]


class TestOrder:
    async def test_equal_scores_to_three_decimals_the_newer_first(self) -> None:
        found = [scored("older", 0.5, 0.5004, axis=0, days=0),
                 scored("newer", 0.5, 0.5001, axis=1, days=3),
                 scored("best", 0.5, 0.6, axis=2)]
        assert await run(found) == [["best", "newer", "older"], []]

    async def test_a_lower_per_call_min_score_only_adds_a_second_tier(self) -> None:
        found = [scored("strong", 0.5, 0.5, axis=0), scored("weak", 0.2, 0.9, axis=1)]
        assert await run(found, min_score=0.1, default_min_score=0.35) == \
            [["strong"], ["weak"]]

    async def test_a_newer_statement_of_a_fact_goes_ahead_of_the_older(self) -> None:
        older = scored("older", 0.6, 0.62, axis=0, days=0, text="user: 我的牙医预约在周二")
        newer = scored("newer", 0.6, 0.58, axis=0, days=7, text="user: 牙医预约改到周四了")
        other = scored("other", 0.6, 0.5, axis=1, text="user: 周末去爬山")
        tiers = await order([older, newer, other], query("牙医预约是哪天"), None, repo=NO_REPO,
                            supersede_cosine=0.9)
        assert [c.memory.id for c in tiers[0]] == ["newer", "older", "other"]
