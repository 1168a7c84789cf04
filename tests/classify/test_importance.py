"""Importance estimate: category first, entities a little, weight score blended in."""

from __future__ import annotations

import pytest

from app.classify.categories import Category
from app.classify.entities import Entities
from app.classify.importance import estimate_importance

NONE = Entities()
RICH = Entities(technologies=("LanceDB", "Redis"), hashtags=("memory",), proper_nouns=("Alice",))


class TestCategoryOrder:
    def test_decisions_outrank_general_chatter(self) -> None:
        ranked = [
            estimate_importance(c, 0.9, NONE)
            for c in (Category.DECISION, Category.PROGRESS, Category.QUESTION, Category.GENERAL)
        ]
        assert ranked == sorted(ranked, reverse=True)
        assert ranked[0] > ranked[-1]

    @pytest.mark.parametrize("category", [Category.DECISION, Category.TASK, Category.PREFERENCE])
    def test_high_value_categories_are_important(self, category: Category) -> None:
        assert estimate_importance(category, 0.9, NONE) >= 7

    def test_general_is_low(self) -> None:
        assert estimate_importance(Category.GENERAL, 0.6, NONE) <= 4

    def test_low_confidence_pulls_towards_neutral(self) -> None:
        sure = estimate_importance(Category.DECISION, 1.0, NONE)
        unsure = estimate_importance(Category.DECISION, 0.0, NONE)
        assert unsure < sure


class TestEntities:
    def test_named_entities_raise_importance_a_little(self) -> None:
        plain = estimate_importance(Category.NOTE, 0.7, NONE)
        rich = estimate_importance(Category.NOTE, 0.7, RICH)
        assert plain < rich <= plain + 2

    def test_entity_bonus_is_capped(self) -> None:
        many = Entities(technologies=tuple(f"T{i}" for i in range(50)))
        assert estimate_importance(Category.GENERAL, 0.6, many) <= 5


class TestWeightScore:
    def test_weight_score_blends_in(self) -> None:
        low = estimate_importance(Category.PROGRESS, 0.7, NONE, weight_score=0.0)
        high = estimate_importance(Category.PROGRESS, 0.7, NONE, weight_score=1.0)
        assert low < estimate_importance(Category.PROGRESS, 0.7, NONE) < high

    @pytest.mark.parametrize("weight", [-5.0, 7.0])
    def test_out_of_range_weight_is_clamped(self, weight: float) -> None:
        assert 1 <= estimate_importance(Category.TASK, 0.5, NONE, weight_score=weight) <= 10


class TestBounds:
    @pytest.mark.parametrize("category", list(Category))
    @pytest.mark.parametrize("confidence", [-1.0, 0.0, 0.5, 1.0, 3.0])
    @pytest.mark.parametrize("weight", [None, 0.0, 1.0])
    def test_always_between_one_and_ten(
        self, category: Category, confidence: float, weight: float | None
    ) -> None:
        value = estimate_importance(category, confidence, RICH, weight_score=weight)
        assert isinstance(value, int)
        assert 1 <= value <= 10

    def test_small_talk_is_one(self) -> None:
        assert estimate_importance(Category.DECISION, 1.0, RICH, small_talk=True) == 1
