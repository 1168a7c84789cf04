"""Reading the question (app/recall/query.py): search text, thresholds, budget."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from app.recall.query import read_query
from app.recall.schemas import RecallRequest
from app.storage.repository import Repository
from tests.recall.stages import settings

# Only a reference phrase ("as I said before") makes the reading ask for sessions.
NO_REPO = cast(Repository, None)


async def test_a_plain_question_gets_the_profiles_threshold_and_the_default_budget(
        tmp_path: Path) -> None:
    s = settings(tmp_path)
    for text in ("where do I live?", "我住在哪里？"):
        q = await read_query(RecallRequest(namespace="n", query=text), s, NO_REPO)
        assert (q.search_text, q.min_score, q.default_min_score, q.max_tokens, q.favoured) == \
            (text, s.model_profile.min_score, s.model_profile.min_score,
             s.recall_max_tokens, frozenset())


async def test_a_counting_question_lowers_both_thresholds_by_the_profiles_factor(
        tmp_path: Path) -> None:
    s = settings(tmp_path)
    factor = s.model_profile.count_threshold_factor
    for text in ("how many cats do I have?", "我一共养过几只猫？"):
        q = await read_query(RecallRequest(namespace="n", query=text, min_score=0.5,
                                           max_tokens=300), s, NO_REPO)
        assert q.parsed.counts
        assert (q.min_score, q.default_min_score, q.max_tokens) == \
            (0.5 * factor, s.model_profile.min_score * factor, 300)


async def test_a_named_date_leaves_the_search_text(tmp_path: Path) -> None:
    q = await read_query(RecallRequest(namespace="n", query="What did I buy on 3 June, 2023?",
                                       as_of="2024-01-01T00:00:00Z"),
                         settings(tmp_path), NO_REPO)
    assert q.hint is not None and q.hint.phrase in "What did I buy on 3 June, 2023?"
    assert "June" not in q.search_text and "buy" in q.search_text
