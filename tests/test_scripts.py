"""One definition of Chinese characters (app/scripts.py), shared by every text feature."""

from app.recall.text import in_another_script, query_terms
from app.scripts import HAN_RUN, has_han
from app.store.builder import language_of


def test_han_is_found_in_chinese_and_mixed_text_only() -> None:
    assert has_han("我们决定用 LanceDB")
    assert has_han("㐀")  # Extension A
    assert not has_han("we decided on LanceDB")
    assert not has_han("ひらがな カタカナ 한국어")  # kana and hangul are not Han


def test_runs_split_mixed_text_where_the_script_changes() -> None:
    assert HAN_RUN.findall("用LanceDB做记忆存储, then 检索") == ["用", "做记忆存储", "检索"]


def test_modules_agree_on_what_is_chinese() -> None:
    chinese_question = query_terms("火锅")
    for text in ("火锅", "hotpot", "吃hotpot", "ソース", "㐀"):
        # recall: a text without Han characters is in another script than a Chinese question
        assert in_another_script(chinese_question, text) == (not has_han(text))
        assert language_of(text) == ("zh" if has_han(text) else "en")
