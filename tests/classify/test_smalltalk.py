"""Small-talk detection: filler is small talk, anything substantive is not."""

from __future__ import annotations

import pytest

from app.classify.smalltalk import is_small_talk


class TestEnglishSmallTalk:
    @pytest.mark.parametrize(
        "text",
        [
            "hi",
            "Hello there!",
            "ok",
            "OK thanks",
            "thanks!",
            "Thank you so much!!",
            "lol",
            "haha yes",
            "Good morning :)",
            "sounds good 👍",
            "got it, thanks",
            "Bye, talk later!",
            "How's it going?",
            "Hey, how's your day going?",
            "you're welcome",
            "no worries",
            "I'm fine",
        ],
    )
    def test_is_small_talk(self, text: str) -> None:
        assert is_small_talk(text)


class TestChineseSmallTalk:
    @pytest.mark.parametrize(
        "text",
        [
            "哈哈",
            "哈哈哈哈",
            "好的",
            "嗯嗯",
            "早上好",
            "谢谢！",
            "好的，谢谢啦",
            "收到👌",
            "晚安",
            "拜拜，明天见",
            "嗨，今天过得怎么样？",
            "没问题",
        ],
    )
    def test_is_small_talk(self, text: str) -> None:
        assert is_small_talk(text)


class TestEmojiAndPunctuation:
    @pytest.mark.parametrize("text", ["👍", "🙏🙏", "😂😂😂", "...", "!!", "👍🏽", "❤️"])
    def test_symbols_only_is_small_talk(self, text: str) -> None:
        assert is_small_talk(text)


class TestSubstantiveMessages:
    @pytest.mark.parametrize(
        "text",
        [
            "I prefer tea",
            "明天9点开会",
            "ok, use Postgres",
            "好的，那就用 Postgres",
            "thanks for fixing the docker build",
            "I'm good with Python",
            "no, the meeting is on Friday",
            "哈尔滨",
            "今天好冷啊",
            "yes to LanceDB",
            "42",
            "Call mom",
        ],
    )
    def test_is_not_small_talk(self, text: str) -> None:
        assert not is_small_talk(text)


class TestEdgeCases:
    @pytest.mark.parametrize("text", ["", "   ", "\n"])
    def test_empty_is_not_small_talk(self, text: str) -> None:
        # Nothing to classify is not the same as chit-chat; callers decide what to do.
        assert not is_small_talk(text)

    def test_long_text_is_never_small_talk(self) -> None:
        assert not is_small_talk("thanks " * 30)

    def test_curly_apostrophe(self) -> None:
        assert is_small_talk("you’re welcome")
