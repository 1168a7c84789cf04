"""Category rules: English, Chinese and mixed text, fallback to general, confidence."""

from __future__ import annotations

import pytest

from app.classify.categories import (
    Category,
    CategoryResult,
    _en,
    classify_category,
    line_categories,
)


def category_of(text: str) -> Category:
    return classify_category(text).category


class TestDecision:
    @pytest.mark.parametrize(
        "text",
        [
            "We decided to use LanceDB for the memory store.",
            "Let's go with the cheaper plan.",
            "I've settled on the grey sofa.",
            "我们决定使用 LanceDB 和 #向量检索 来构建记忆系统",
            "方案敲定了，下周开工。",
            "以后统一用 pnpm，不用 npm 了。",
            "我们最后决定 use Qdrant for the prototype。",
        ],
    )
    def test_decision(self, text: str) -> None:
        assert category_of(text) is Category.DECISION

    @pytest.mark.parametrize("text", ["服务终于稳定了", "服务又不稳定了"])
    def test_word_containing_ding_le_is_not_a_decision(self, text: str) -> None:
        # 稳定了 contains 定了, and 不稳定了 looks like 不…了, but neither is "decided".
        assert classify_category(text).scores["decision"] == 0


class TestPreference:
    @pytest.mark.parametrize(
        "text",
        [
            "I prefer tea",
            "I'd rather take the train than fly.",
            "My favourite editor is Neovim.",
            "我喜欢简短的回答。",
            "比起咖啡，我更愿意喝茶。",
            "请用中文回复我。",
            "我 prefer 用 Markdown 写文档。",
        ],
    )
    def test_preference(self, text: str) -> None:
        assert category_of(text) is Category.PREFERENCE

    def test_would_like_to_is_a_request_not_a_preference(self) -> None:
        assert category_of("I would like to book a table for Friday.") is not Category.PREFERENCE


class TestLearning:
    @pytest.mark.parametrize(
        "text",
        [
            "TIL Python evaluates default arguments once.",
            "Turns out the leak was an unclosed cursor.",
            "I just realized my passport expires in March.",
            "原来内存泄漏是因为游标没关。",
            "今天学到一个新技巧。",
            "终于搞懂测试为什么不稳定了。",
        ],
    )
    def test_learning(self, text: str) -> None:
        assert category_of(text) is Category.LEARNING


class TestTask:
    @pytest.mark.parametrize(
        "text",
        [
            "Remind me to call the dentist tomorrow.",
            "I need to renew my passport before May.",
            "Todo: write the migration script.",
            "Buy milk on the way home.",
            "Can you add printer ink to my shopping list?",
            "提醒我明天给牙医打电话。",
            "明天9点开会",
            "待办：写迁移脚本。",
            "记得 update 一下 README。",
        ],
    )
    def test_task(self, text: str) -> None:
        assert category_of(text) is Category.TASK

    def test_negated_need_is_not_a_task(self) -> None:
        needed = classify_category("这样就需要分片").scores["task"]
        not_needed = classify_category("这样就不需要分片").scores["task"]
        assert needed >= 2.0
        assert not_needed < needed


class TestProgress:
    @pytest.mark.parametrize(
        "text",
        [
            "Finished the migration script, all tests pass.",
            "The new onboarding flow is live since this morning.",
            "Still working on the recall endpoint.",
            "迁移脚本写完了，测试全部通过。",
            "新的注册流程已经上线了。",
            "前端 PR 已经 merged 了。",
        ],
    )
    def test_progress(self, text: str) -> None:
        assert category_of(text) is Category.PROGRESS


class TestQuestion:
    @pytest.mark.parametrize(
        "text",
        [
            "How do I reset my router?",
            "What's the difference between a vector index and a full-text index?",
            "Where did I put the notes from the design review",
            "布洛芬可以和咖啡一起吃吗？",
            "十公里比赛能戴耳机吗",
            "LanceDB 支持 hybrid search 吗？",
        ],
    )
    def test_question(self, text: str) -> None:
        assert category_of(text) is Category.QUESTION

    def test_one_question_mark_counts_once(self) -> None:
        # A closing "?" is strong evidence; it must not also count as a mid-text "?".
        assert classify_category("Really?").scores["question"] == 3.0

    def test_exclamative_what_is_not_a_question(self) -> None:
        assert classify_category("What a game last night").scores["question"] == 0


class TestNote:
    @pytest.mark.parametrize(
        "text",
        [
            "Note that the staging API key rotates every 30 days.",
            "For the record, my blood type is O negative.",
            "My daughter is allergic to peanuts.",
            "注意：测试环境的 API key 每三十天轮换一次。",
            "记住生产数据库在法兰克福区域。",
            "我的护照号尾号是 4471。",
        ],
    )
    def test_note(self, text: str) -> None:
        assert category_of(text) is Category.NOTE

    def test_label_prefix_outweighs_a_date(self) -> None:
        assert category_of("备忘：公司报销每月 25 号截止提交。") is Category.NOTE


class TestGeneralFallback:
    @pytest.mark.parametrize("text", ["The weather is lovely.", "今天好热。", "😂😂"])
    def test_no_rule_fires(self, text: str) -> None:
        result = classify_category(text)
        assert result.category is Category.GENERAL

    @pytest.mark.parametrize("text", ["thanks!", "好的", "Hey, how's your day going?"])
    def test_small_talk_is_general_even_with_a_question_mark(self, text: str) -> None:
        assert category_of(text) is Category.GENERAL

    def test_one_weak_hint_is_not_enough(self) -> None:
        # "tomorrow" alone is weak task evidence (1.0), below the decision threshold.
        result = classify_category("Tomorrow the weather turns.")
        assert result.scores["task"] == 1.0
        assert result.category is Category.GENERAL


class TestResultShape:
    def test_scores_cover_every_category(self) -> None:
        result = classify_category("We decided to use Redis.")
        assert set(result.scores) == {c.value for c in Category}
        assert result.scores["decision"] > 0

    @pytest.mark.parametrize(
        "text", ["", "ok", "We decided to use Redis.", "明天提醒我开会吗？", "x" * 5000]
    )
    def test_confidence_in_unit_interval(self, text: str) -> None:
        assert 0.0 <= classify_category(text).confidence <= 1.0

    def test_more_evidence_more_confidence(self) -> None:
        one = classify_category("We decided to use Redis.")
        two = classify_category("We decided to use Redis. It's settled, final decision.")
        assert two.category is one.category is Category.DECISION
        assert two.confidence > one.confidence

    def test_competing_evidence_lowers_confidence(self) -> None:
        clear = classify_category("We decided to use Redis.")
        mixed = classify_category("We decided to use Redis, but do you think it scales?")
        assert mixed.confidence < clear.confidence

    def test_result_is_frozen(self) -> None:
        result = classify_category("hi")
        assert isinstance(result, CategoryResult)
        with pytest.raises(AttributeError):
            result.category = Category.NOTE  # type: ignore[misc]

    def test_category_is_a_string(self) -> None:
        assert Category.DECISION == "decision"
        assert str(Category.NOTE) == "note"


class TestMixedScripts:
    def test_english_directly_beside_chinese(self) -> None:
        # No spaces: ASCII letter boundaries, not \\b, keep the English rule working.
        assert category_of("我们decided用它") is Category.DECISION

    def test_english_inside_a_word_does_not_match(self) -> None:
        assert classify_category("undecided").scores["decision"] == 0


class TestRuleDefinitions:
    def test_english_patterns_must_be_lower_case(self) -> None:
        # English rules read lower-cased text; an upper-case pattern would never match.
        with pytest.raises(ValueError, match="lower case"):
            _en(r"Decided")

    def test_escapes_are_allowed(self) -> None:
        assert _en(r"\d+ \S+").regex.search("3 things")


class TestLineCategories:
    """A memory of several messages: every category its lines have, the main one first."""

    def test_readme_memory(self) -> None:
        text = "user: 下周二上午我要去体检\nuser: We decided to use LanceDB for the memory store."
        main = classify_category(text).category
        assert line_categories(text, main)[0] == main
        assert set(line_categories(text, main)) == {Category.TASK, Category.DECISION}

    def test_one_line_is_its_own_category(self) -> None:
        assert line_categories("我喜欢喝绿茶", Category.PREFERENCE) == (Category.PREFERENCE,)

    def test_lines_without_a_category_add_none(self) -> None:
        text = "user: 好的谢谢\nassistant: ok 👍\nuser: Remind me to call Anna tomorrow."
        assert line_categories(text, Category.TASK) == (Category.TASK,)

    def test_others_follow_by_evidence(self) -> None:
        text = ("user: I prefer tea.\nuser: We decided to go with Postgres, final decision.\n"
                "user: 你觉得呢？")
        assert line_categories(text, Category.PREFERENCE) == (
            Category.PREFERENCE, Category.DECISION, Category.QUESTION)
