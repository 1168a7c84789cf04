"""The combined analysis and its public schema."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.classify import analyze
from app.classify.categories import Category
from app.classify.schemas import ClassifyPublic, ClassifyRequest

EXAMPLE = "我们决定使用 LanceDB 和 #向量检索 来构建记忆系统"


class TestAnalyze:
    def test_required_example(self) -> None:
        a = analyze(EXAMPLE)
        assert a.category is Category.DECISION
        assert "LanceDB" in a.entities.technologies
        assert "向量检索" in a.entities.hashtags
        assert a.subtopics[:2] == ("LanceDB", "向量检索")
        assert a.importance >= 7
        assert not a.small_talk

    def test_small_talk(self) -> None:
        a = analyze("哈哈好的")
        assert a.small_talk
        assert a.category is Category.GENERAL
        assert a.importance == 1

    def test_weight_score_is_passed_on(self) -> None:
        text = "Finished the migration script."
        assert (
            analyze(text, weight_score=1.0).importance > analyze(text, weight_score=0.0).importance
        )

    def test_long_mixed_chunk(self) -> None:
        text = (
            "user: 我们决定把 embedding 服务部署到 Kubernetes。\n"
            "assistant: Got it. Remind me to update the Helm chart tomorrow.\n"
        ) * 8
        a = analyze(text)
        assert a.category in {Category.DECISION, Category.TASK}
        assert {"Kubernetes", "Helm"} <= set(a.entities.technologies)


class TestSchemas:
    def test_public_model_from_analysis(self) -> None:
        body = ClassifyPublic.from_analysis(analyze(EXAMPLE)).model_dump(mode="json")
        assert body["category"] == "decision"
        assert body["entities"]["hashtags"] == ["向量检索"]
        assert set(body["scores"]) == {c.value for c in Category}

    def test_examples_validate(self) -> None:
        schema = ClassifyPublic.model_json_schema()
        for example in schema["examples"]:
            ClassifyPublic.model_validate(example)
        for example in ClassifyRequest.model_json_schema()["examples"]:
            ClassifyRequest.model_validate(example)

    def test_schema_example_matches_the_analyzer(self) -> None:
        # The documented example is real output, not an invented one.
        example = ClassifyPublic.model_json_schema()["examples"][0]
        assert ClassifyPublic.from_analysis(analyze(EXAMPLE)).model_dump(mode="json") == example

    @pytest.mark.parametrize(
        "payload", [{"text": ""}, {"text": "x" * 20_001}, {}, {"text": "a", "x": 1}]
    )
    def test_request_limits(self, payload: dict[str, object]) -> None:
        with pytest.raises(ValidationError):
            ClassifyRequest.model_validate(payload)
