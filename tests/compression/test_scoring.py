"""The four dimensions of the weight score, their combination, and the presets."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from app.classify import analyze
from app.compression.policy import PRESETS, build_policy
from app.compression.scoring import (
    Dimensions,
    Weights,
    combine,
    emotion_score,
    entropy_score,
    novelty_scores,
    task_score,
    text_dimensions,
    urgency_score,
)
from tests.compression.fixtures import CHATTER_EN, CHATTER_ZH, FACTS, TRICKY

RICH_EN = ("We compared LanceDB, PostgreSQL with pgvector and Qdrant on 100k rows: LanceDB "
           "answered filtered searches in 13 ms, pgvector in 40 ms, and Qdrant needed a server.")
RICH_ZH = "我们比较了三种向量数据库：LanceDB 在十万行数据上过滤检索只要13毫秒，部署也最简单。"


def task(text: str) -> float:
    return task_score(text, analyze(text))


class TestDimensions:
    def test_every_dimension_stays_in_range(self) -> None:
        for text in [*CHATTER_EN, *CHATTER_ZH, *FACTS, *TRICKY, "", "ok", "😀😀😀!!!"]:
            for value in text_dimensions(f"user: {text}", analyze(text)):
                assert 0.0 <= value <= 1.0, (text, value)

    def test_entropy_small_talk_vs_dense_text(self) -> None:
        assert entropy_score("ok ok thanks 哈哈") < 0.2
        assert entropy_score(RICH_EN) > 0.5 and entropy_score(RICH_ZH) > 0.4

    def test_entropy_falls_with_repetition(self) -> None:
        varied = "apples pears plums cherries grapes melons lemons limes figs dates"
        repeated = "apples apples apples apples apples pears pears pears pears pears"
        assert entropy_score(repeated) < entropy_score(varied)

    def test_task_relevance_bilingual(self) -> None:
        for fact in FACTS:
            assert task(fact) > 0.5, fact
        for chatter in (CHATTER_EN[0], CHATTER_ZH[0], CHATTER_ZH[4]):
            assert task(chatter) < 0.35, chatter

    def test_task_ignores_speaker_names(self) -> None:
        plain = "I went to the park and had some ice cream."
        assert task(f"Caroline: {plain}") == pytest.approx(task(plain), abs=0.05)

    def test_emotion_bilingual_and_signals(self) -> None:
        calm = "The meeting moved to the second floor room."
        assert emotion_score(calm) == 0.0
        assert emotion_score("I'm SO happy!!! My sister got married 😍😍") > 0.5
        assert emotion_score("我真的太难过了，压力好大，想哭😭") > 0.5
        assert emotion_score("I was happy.") < emotion_score("I was so happy!!")

    def test_emotion_is_per_length(self) -> None:
        short = "I love it!"
        long = short + " " + " ".join(["The report lists the rooms and their sizes."] * 8)
        assert emotion_score(long) < emotion_score(short)


class TestUrgency:
    def test_a_near_time_with_something_at_stake(self) -> None:
        for text in ("user: The server crashed and the demo is in 2 hours, otherwise we lose "
                     "the client!",
                     "user: 钱包被偷了，明天一早的火车票也在里面！",
                     "user: I'm so scared, the surgery is tomorrow.",
                     "user: 合同今晚必须签完，否则违约。"):
            assert urgency_score(text) > 0.85, text

    def test_ordinary_lines_are_not_urgent(self) -> None:
        for text in (*CHATTER_EN, *CHATTER_ZH, "See you tomorrow!", "明天见！",
                     "We must try that bakery some day.", "我们下个月必须去一次杭州。",
                     "I was worried last year, but it went fine."):
            assert urgency_score(f"user: {text}") < 0.7, text

    def test_urgency_alone_can_pass_the_emergency_hold(self) -> None:
        calm = Dimensions(novelty=0.2, entropy=0.3, task=0.3, emotion=0.0)
        weights = Weights(0.1, 0.3, 0.5, 0.1)
        assert combine(calm, weights) < 0.4
        assert combine(calm, weights, urgency=0.9) > 0.9
        assert combine(calm, weights, urgency=0.0) == combine(calm, weights)


class TestNovelty:
    def test_first_is_new_repeats_are_not(self) -> None:
        a, b = np.eye(3, dtype=np.float32)[0], np.eye(3, dtype=np.float32)[1]
        vectors = np.stack([a, b, a])
        assert novelty_scores(vectors, [0, 1, 2]) == {0: 1.0, 1: 1.0, 2: 0.0}

    def test_lookback_bounds_the_comparison(self) -> None:
        a, b = np.eye(2, dtype=np.float32)
        vectors = np.stack([a, b, b, a])
        assert novelty_scores(vectors, [3], lookback=2) == {3: 1.0}

    def test_overlapping_neighbours_are_left_out(self) -> None:
        a = np.array([1.0, 0.0], dtype=np.float32)
        vectors = np.stack([a, a])
        assert novelty_scores(vectors, [1], overlapping={1: {0}}) == {1: 1.0}


class TestCombine:
    def test_weighted_mean_with_normalised_weights(self) -> None:
        dims = Dimensions(novelty=1.0, entropy=0.5, task=0.0, emotion=0.0)
        assert combine(dims, Weights(1, 1, 0, 0)) == pytest.approx(0.75)
        assert combine(dims, Weights(2, 2, 0, 0)) == pytest.approx(0.75)

    def test_feedback_is_added_and_clamped(self) -> None:
        dims = Dimensions(0.9, 0.9, 0.9, 0.9)
        assert combine(dims, Weights(1, 1, 1, 1), feedback=0.3) == 1.0
        assert combine(Dimensions(0, 0, 0, 0), Weights(1, 1, 1, 1), feedback=0.1) == 0.1


class TestPolicies:
    def test_spec_defaults(self) -> None:
        p = PRESETS["default"]
        assert (p.base_threshold, p.emergency_hold, p.window_size, p.memory_limit) == (
            0.4, 0.9, 20, 0.7)
        assert (p.weights.entropy, p.weights.task, p.run_length, p.candidate_ratio) == (
            0.3, 0.5, 3, 0.6)

    def test_scenario_presets(self) -> None:
        assert PRESETS["customer_service"].weights.task == 0.6
        assert PRESETS["counselling"].weights.emotion > PRESETS["default"].weights.emotion
        short = PRESETS["short_dialogue"]
        assert short.base_threshold == 0.6 and 5 <= short.window_size <= 8
        assert not short.clustering
        assert PRESETS["long_technical"].protect_terms
        assert PRESETS["long_technical"].keep_entity_relations
        noisy = PRESETS["noisy_chitchat"]
        assert noisy.junk_filter and noisy.emotion_keep is not None

    def test_overrides_merge_weights(self) -> None:
        p = build_policy("customer_service", {"weights": {"emotion": 0.3}, "window_size": 10})
        assert p.weights.task == 0.6 and p.weights.emotion == 0.3 and p.window_size == 10
        assert p.name == "customer_service"

    def test_invalid_overrides(self) -> None:
        with pytest.raises(ValidationError):
            build_policy("default", {"emergency_hold": 0.3})
        with pytest.raises(ValidationError):
            build_policy("default", {"weights": {"novelty": 0, "entropy": 0, "task": 0,
                                                 "emotion": 0}})
        with pytest.raises(KeyError):
            build_policy("no_such_preset")
