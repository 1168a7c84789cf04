"""Reading a query before the search: reference phrases, wrappers, dates, keyword coverage."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.recall.references import ReferenceScope, parse_query, split_questions
from app.recall.text import Coverage, coverage, query_terms
from app.recall.when import find_time_hint, strip_phrase

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)


class TestReferencePhrases:
    @pytest.mark.parametrize(("query", "scope", "rest"), [
        ("记得刚才说的体检安排吗", ReferenceScope.recent, "体检安排吗"),
        ("和之前那个问题一样，数据库怎么选", ReferenceScope.earlier, "数据库怎么选"),
        ("As I said before, the deadline is Friday", ReferenceScope.earlier,
         "the deadline is Friday"),
        ("like last time, book the window seat", ReferenceScope.earlier,
         "book the window seat"),
        ("as I just said, the hotel is full", ReferenceScope.recent, "the hotel is full"),
        ("上次说的那个餐厅叫什么", ReferenceScope.earlier, "餐厅叫什么"),
    ])
    def test_cue_found_and_cut(self, query: str, scope: ReferenceScope, rest: str) -> None:
        parsed = parse_query(query)
        assert parsed.reference is not None and parsed.reference.scope == scope
        assert parsed.text == rest and not parsed.reference_only

    def test_same_question_cue(self) -> None:
        parsed = parse_query("和之前那个问题一样")
        assert parsed.reference is not None and parsed.reference.about_question
        assert parsed.reference_only

    @pytest.mark.parametrize("query", [
        "I said hello to the neighbours", "what did the doctor say", "刚才的天气很好",
        "before the meeting, check the slides",
    ])
    def test_no_false_cues(self, query: str) -> None:
        assert parse_query(query).reference is None

    def test_chit_chat_wrapper_is_cut(self) -> None:
        query = ("这几天忙得团团转，周末总算能歇口气。不扯远了，我其实想知道的是："
                 "那个在杭州办的展览，门票多少钱？")
        parsed = parse_query(query)
        assert parsed.unwrapped and parsed.text == "那个在杭州办的展览，门票多少钱？"
        english = parse_query("Nice weather today. Anyway, my real question is: when is "
                              "the dentist?")
        assert english.text == "when is the dentist?"

    def test_each_wrapped_question_is_kept_and_the_chit_chat_between_cut(self) -> None:
        query = ("我其实想知道的是：我堂哥几岁了？另外，今天阳光不错，下午想去公园转转，"
                 "不知道会不会下雨呢？问题是这个，星河草地音乐节有多少人参加？")
        parsed = parse_query(query)
        assert parsed.text == "我堂哥几岁了？ 星河草地音乐节有多少人参加？"
        assert split_questions(parsed.text) == ["我堂哥几岁了？", "星河草地音乐节有多少人参加？"]
        english = parse_query("My real question is: when is the dentist? Also, lovely "
                              "weather, isn't it? What I really want to know is: who is "
                              "my landlord?")
        assert english.text == "when is the dentist? who is my landlord?"


class TestDates:
    @pytest.mark.parametrize(("query", "start", "end"), [
        ("What did Maria do on 3 June, 2023?", "2023-06-02", "2023-06-05"),
        ("What happened in August 2023?", "2023-08-01", "2023-09-01"),
        ("the week before August 3, 2023", "2023-07-19", "2023-08-04"),
        ("How often did she go to the beach in 2023?", "2023-01-01", "2024-01-01"),
        ("我2023年6月3日说了什么", "2023-06-02", "2023-06-05"),
        ("6月3日的会议", "2026-06-02", "2026-06-05"),
        ("2023年5月的账单", "2023-05-01", "2023-06-01"),
        ("what did I say yesterday", "2026-11-28", "2026-11-30"),
        ("上周我们聊了什么", "2026-11-16", "2026-11-23"),
        ("what did we do last month", "2026-10-01", "2026-11-01"),
        ("what did I say the past week", "2026-11-22", "2026-11-30"),
        ("11 月 27 号说了什么", "2026-11-26", "2026-11-29"),
        ("2025年十一月的账单", "2025-11-01", "2025-12-01"),
        ("去年三月我们聊了什么", "2025-03-01", "2025-04-01"),
        ("今年3月份的计划", "2026-03-01", "2026-04-01"),
        ("What did we discuss in March last year?", "2025-03-01", "2025-04-01"),
        ("What did we talk about on November 27?", "2026-11-26", "2026-11-29"),
    ])
    def test_window(self, query: str, start: str, end: str) -> None:
        hint = find_time_hint(query, reference=NOW)
        assert hint is not None
        assert (hint.start.date().isoformat(), hint.end.date().isoformat()) == (start, end)

    @pytest.mark.parametrize("query", ["Maria may go home", "I have 2 cats and 3 dogs",
                                       "we met in March", "on 31/02", "我学了3个月钢琴",
                                       "有几个人在五月份过生日", "我表哥今年多大了",
                                       "his camping trip last year"])
    def test_no_date(self, query: str) -> None:
        assert find_time_hint(query, reference=NOW) is None

    def test_phrase_is_cut_from_the_search(self) -> None:
        assert strip_phrase("What did Maria do on 3 June, 2023?", "on 3 June, 2023") == \
            "What did Maria do?"
        assert strip_phrase("我2023年6月3日说了什么", "2023年6月3日") == "我说了什么"


class TestCoverage:
    def test_chinese_terms_match_inside_words(self) -> None:
        terms = query_terms("我的体检安排是哪天")
        assert terms.cjk == {"体检", "安排"}
        docs = ["下周二上午体检，记得空腹", "我喜欢喝咖啡", "周末安排了体检复查"]
        covered = coverage(terms, docs)
        assert covered[1] == 0 and covered[2] == pytest.approx(1.0)
        assert 0.3 < covered[0] < 0.7

    def test_term_in_every_document_weighs_nothing(self) -> None:
        terms = query_terms("What did Caroline research?")
        docs = ["Caroline: I researched adoption agencies", "Caroline: I went hiking",
                "Caroline: the weather is nice"]
        covered = coverage(terms, docs)
        assert covered[0] > 0.9 and covered[1] < 0.2

    def test_no_terms_no_coverage(self) -> None:
        assert coverage(query_terms("what is the"), ["anything"]) == [0.0]

    @pytest.mark.parametrize(("query", "doc"), [
        ("那个身高是173cm的人叫什么？", "我同事身高有173厘米。"),
        ("Who is 173cm tall?", "My colleague is 173 cm tall."),
    ])
    def test_a_number_with_a_unit_matches_the_number_in_any_unit(self, query: str,
                                                                  doc: str) -> None:
        covered = coverage(query_terms(query), [doc, "something else entirely"])
        assert covered[0] > 0.4 and covered[1] == 0


# Lines of a day of notes, Chinese and English, sharing words in different combinations.
_NOTE_LINES = [
    "用户: 城市设计论坛的持续时间是三天。", "用户: 城市设计论坛在深圳举行。",
    "用户: 高尔夫友谊赛的持续时间是一天。", "用户: 我婶婶在深圳工作。", "用户: 今天天气不错。",
    "user: The design forum runs for three days.", "user: Planning the forum in Shenzhen.",
    "user: My aunt works in Shenzhen; the planner researched it.", "user: nice weather today",
]
_QUESTIONS = ["城市设计论坛的持续时间是什么？", "我婶婶在哪里工作？",
              "How long does the design forum run?", "who planned research in Shenzhen",
              "深圳的design forum持续时间"]


class TestCoverageShortcuts:
    """What recall asks of every candidate memory, answered from what its whole text was
    found to hold, equals asking each line or each subset of terms from scratch."""

    @settings(max_examples=60, deadline=None)
    @given(question=st.sampled_from(_QUESTIONS),
           days=st.lists(st.lists(st.sampled_from(_NOTE_LINES), min_size=1, max_size=5),
                         min_size=1, max_size=6))
    def test_best_line_share_is_the_best_of_the_lines(self, question: str,
                                                     days: list[list[str]]) -> None:
        matcher = Coverage(query_terms(question), ["\n".join(lines) for lines in days])
        for index, lines in enumerate(days):
            assert matcher.best_part_share(index, lines) == max(matcher.share(line)
                                                                for line in lines)

    @settings(max_examples=60, deadline=None)
    @given(question=st.sampled_from(_QUESTIONS), keep=st.integers(0, 2**16),
           days=st.lists(st.sampled_from(_NOTE_LINES), min_size=1, max_size=6))
    def test_fewer_terms_weigh_as_if_read_again(self, question: str, keep: int,
                                               days: list[str]) -> None:
        terms = query_terms(question)
        names = sorted(terms.names())
        subset = terms.only(frozenset(n for i, n in enumerate(names) if keep >> i & 1))
        fewer = Coverage(terms, days).only(subset)
        again = Coverage(subset, days)
        assert fewer.scores == again.scores and fewer.holding == again.holding
        assert [fewer.share(line) for line in _NOTE_LINES] == \
            [again.share(line) for line in _NOTE_LINES]

    @settings(max_examples=60, deadline=None)
    @given(question=st.sampled_from(_QUESTIONS),
           first=st.lists(st.sampled_from(_NOTE_LINES), min_size=1, max_size=6),
           more=st.lists(st.sampled_from(_NOTE_LINES), max_size=6))
    def test_rows_already_read_weigh_as_if_read_again(self, question: str, first: list[str],
                                                     more: list[str]) -> None:
        terms = query_terms(question)
        known = Coverage(terms, first).rows_by(first)
        merged = [*dict.fromkeys(first + more)]
        reused = Coverage(terms, merged, rows=[known.get(text) for text in merged])
        again = Coverage(terms, merged)
        assert reused.scores == again.scores and reused.absent == again.absent
        assert [reused.share(line) for line in _NOTE_LINES] == \
            [again.share(line) for line in _NOTE_LINES]


class TestCountingQuestions:
    @pytest.mark.parametrize("query", [
        "有几个人身高超过一米七？", "我一共去过几次杭州？", "有多少场比赛在周末？",
        "我去过几次日本？", "这本书你看过几遍？",
        "How many times did I go hiking last month?", "How often do I call my mother?",
    ])
    def test_counting_questions_are_noted(self, query: str) -> None:
        assert parse_query(query).counts

    @pytest.mark.parametrize("query", [
        "我上司的电话是多少？", "我的体检安排是哪天", "When is my dentist appointment?",
        "How much did the new bike cost?",
    ])
    def test_other_questions_are_not(self, query: str) -> None:
        assert not parse_query(query).counts

    def test_numbers_are_the_condition_not_terms(self) -> None:
        terms = query_terms("有几场演出的观众超过三百人？").without_numbers()
        assert "观众" in terms.cjk and not {"三百", "三百人"} & terms.cjk
        terms = query_terms("How many people are over 40?").without_numbers()
        assert "40" not in terms.latin and "people" in terms.latin

    def test_an_age_is_named_by_its_number(self) -> None:
        assert "年龄" in query_terms("有几个人在40岁以下？").cjk
