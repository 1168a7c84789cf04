"""Scoring arithmetic (app/recall/score.py) on hand-made candidates: the vector band, the
keyword part, relevance and ranking, decay and the boosts. English and Chinese."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.recall.candidates import Candidate
from app.recall.score import decay, newest, score
from app.recall.text import query_terms
from app.recall.tuning import IMPORTANCE_BOOST, TIER_BOOST, TIME_BOOST
from app.recall.when import TimeHint
from tests.recall.stages import DAY, candidate, memory, query, settings


def band(s_cosine: float, floor: float, ceiling: float) -> float:
    return min(1.0, max(0.0, (s_cosine - floor) / max(1e-6, ceiling - floor)))


class TestRelevance:
    def test_vector_part_maps_the_profiles_band_to_0_1(self, tmp_path: Path) -> None:
        s = settings(tmp_path)
        floor, ceiling = s.model_profile.cosine_band(chinese_pair=False)
        found = [candidate(memory(f"m{n}", "user: something"), cosine=cos)
                 for n, cos in enumerate((floor - 0.1, (floor + ceiling) / 2, ceiling + 0.1))]
        # No terms: no keyword part; relevance is the vector part's share.
        assert score(found, query("?"), s, terms=query_terms(""), chinese=False) is None
        assert [c.vector for c in found] == pytest.approx([0.0, 0.5, 1.0])
        w = s.model_profile.keyword_weight
        assert [c.relevance for c in found] == [(1 - w) * c.vector for c in found]

    def test_a_chinese_pair_reads_on_the_chinese_band(self, tmp_path: Path) -> None:
        s = settings(tmp_path)
        floor, ceiling = s.model_profile.cosine_band(chinese_pair=True)
        c = candidate(memory("m", "user: 我住在柏林"), cosine=0.9)
        score([c], query("我住在哪里"), s, terms=query_terms("我住在哪里"), chinese=True)
        assert c.vector == band(0.9, floor, ceiling)

    def test_keyword_part_is_half_coverage_half_relative_bm25(self, tmp_path: Path) -> None:
        s = settings(tmp_path)
        both = candidate(memory("a", "user: Anna plays tennis"), cosine=0.8, bm25=4.0)
        half = candidate(memory("b", "user: Anna likes chess"), cosine=0.8, bm25=2.0)
        matcher = score([both, half], query("does Anna play tennis"), s,
                        terms=query_terms("does Anna play tennis"), chinese=False)
        assert matcher is not None
        cover = matcher.scores
        assert cover[0] == 1.0
        assert both.keyword == 0.5 * cover[0] + 0.5 * cover[0] * (4.0 / 4.0)
        assert half.keyword == 0.5 * cover[1] + 0.5 * cover[0] * (2.0 / 4.0)
        w = s.model_profile.keyword_weight
        assert both.relevance == (1 - w) * both.vector + w * both.keyword
        assert both.relevance > half.relevance


class TestScore:
    def test_boosts_multiply_the_ranking(self, tmp_path: Path) -> None:
        s = settings(tmp_path)
        fact = candidate(memory("f", "user: 我住在柏林", tier="longterm", importance=10),
                         cosine=0.9)
        hint = TimeHint(start=DAY - timedelta(hours=12), end=DAY + timedelta(hours=12),
                        phrase="那天")
        score([fact], query("我住在哪里", hint=hint), s, terms=query_terms("我住在哪里"),
              chinese=True)
        assert fact.importance == 1 + IMPORTANCE_BOOST
        assert fact.tier == TIER_BOOST["longterm"]
        assert fact.time == TIME_BOOST
        assert fact.score == fact.ranking * fact.decay * (
            fact.importance * fact.tier * fact.branch * fact.time * fact.reference)

    def test_age_is_measured_from_the_newest_candidate(self, tmp_path: Path) -> None:
        s = settings(tmp_path)
        old_day = DAY - timedelta(days=s.recall_decay_after_days + s.recall_decay_half_life_days)
        new = candidate(memory("new", "user: I live in Munich"), cosine=0.8)
        old = candidate(memory("old", "user: I live in Berlin", time_start=old_day,
                               time_end=old_day), cosine=0.8)
        new.when, old.when = DAY.timestamp(), old_day.timestamp()
        score([new, old], query("where do I live"), s, terms=query_terms("where do I live"),
              chinese=False)
        floor = s.recall_decay_floor
        assert new.decay == 1.0
        assert old.decay == pytest.approx(floor + (1 - floor) * 0.5)
        assert new.score > old.score


class TestDecay:
    def test_no_decay_within_the_first_days_then_halving_to_the_floor(
            self, tmp_path: Path) -> None:
        s = settings(tmp_path)
        m = memory("m", "user: hi")
        assert decay(m, None, s) == 1.0
        assert decay(m, DAY + timedelta(days=s.recall_decay_after_days), s) == 1.0
        far = DAY + timedelta(days=s.recall_decay_after_days + 100 * s.recall_decay_half_life_days)
        assert decay(m, far, s) == pytest.approx(s.recall_decay_floor)

    def test_newest_is_none_without_times(self) -> None:
        assert newest([Candidate(memory("m", "user: hi"))]) is None
        c = Candidate(memory("m", "user: hi"), when=DAY.timestamp())
        assert newest([c]) == datetime.fromtimestamp(DAY.timestamp(), UTC)
