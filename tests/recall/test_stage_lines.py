"""A memory's lines and their speakers (app/recall/lines.py), in English and Chinese."""

from __future__ import annotations

import pytest

from app.recall.lines import asked_about, lines, name, names_in, one_speaker, speaker
from tests.recall.stages import memory


class TestLines:
    def test_one_line_per_message(self) -> None:
        m = memory("m", "user: I moved to Berlin", "assistant: 好的，记住了")
        assert lines(m) == [(("1",), "user: I moved to Berlin"),
                            (("2",), "assistant: 好的，记住了")]

    def test_a_message_with_line_breaks_stays_one_line(self) -> None:
        m = memory("m", "user: my list:\n- milk\n- 鸡蛋", "assistant: noted", ids=["1", "2"])
        assert [ids for ids, _ in lines(m)] == [("1",), ("2",)]
        assert lines(m)[0][1] == "user: my list:\n- milk\n- 鸡蛋"

    def test_text_that_does_not_line_up_is_one_unit(self) -> None:
        m = memory("m", "a line without a role", "another", "third", ids=["1", "2"])
        assert lines(m) == [(("1", "2"), m.text)]

    def test_a_memory_without_messages_is_known_by_its_id(self) -> None:
        m = memory("m", "user: 我喜欢爬山", ids=[])
        assert lines(m) == [(("m",), "user: 我喜欢爬山")]


class TestSpeakers:
    @pytest.mark.parametrize(("line", "who"), [
        ("user: Caroline: I went to a support group", "caroline"),
        ("user: 林阿杰：我下周去杭州", "林阿杰"),
        ("assistant: Sounds good!", "assistant"),
        ("user: 好的", "user"),
    ])
    def test_the_name_a_line_opens_with_else_its_role(self, line: str, who: str) -> None:
        assert speaker(line) == who

    def test_name_is_none_without_a_label(self) -> None:
        assert name("user: I went hiking") is None

    def test_notes_are_one_speaker_a_chat_sent_as_user_is_not(self) -> None:
        notes = lines(memory("m", "user: 体检在周二", "user: 牙医在周四"))
        chat = lines(memory("m", "user: Caroline: hi", "user: Melanie: hey"))
        assert one_speaker(notes)
        assert not one_speaker(chat)
        assert not one_speaker(lines(memory("m", "user: one line")))


class TestNamesAsked:
    @pytest.mark.parametrize(("who", "query", "named"), [
        ("anna lee", "where did anna go?", True),
        ("anna", "what is anna's hobby?", True),
        ("anna", "what does annabel do?", False),
        ("anna", "anna去了哪里", True),
        ("林阿杰", "阿杰去哪里了", True),
        ("欧阳娜娜", "娜娜喜欢什么", True),
        ("李娜", "娜喜欢什么", False),
    ])
    def test_whole_name_or_given_name(self, who: str, query: str, named: bool) -> None:
        assert names_in(who, query) is named

    def test_the_named_speakers_turns(self) -> None:
        units = lines(memory("m", "user: Caroline: I paint on weekends",
                             "assistant: Melanie: Wow, that sounds great!",
                             "user: Caroline: mostly landscapes"))
        assert [ids for ids, _ in asked_about(units, "What does Caroline paint?") or []] == \
            [("1",), ("3",)]

    def test_none_when_no_or_both_speakers_are_named(self) -> None:
        units = lines(memory("m", "user: 小王：我去了杭州", "user: 小李：我去了上海"))
        assert asked_about(units, "谁去了杭州？") is None
        assert asked_about(units, "小王和小李去了哪里？") is None
        assert asked_about(units, "") is None
