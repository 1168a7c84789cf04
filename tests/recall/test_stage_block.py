"""The injection block and its token count (app/recall/block.py), both languages."""

from __future__ import annotations

from datetime import UTC, datetime

from app.recall.block import (
    HEADINGS,
    NOT_ADDITIVE,
    PREFACE,
    TokenCounter,
    block_language,
    render_block,
    whitespace_join_tokens,
)
from app.recall.candidates import Packed
from app.recall.schemas import BlockLanguage, Layer
from tests.recall.stages import candidate, memory, words


def packed(m_id: str, text: str, **fields: object) -> Packed:
    m = memory(m_id, text, **fields)  # type: ignore[arg-type]
    return Packed(candidate(m), m.text, list(m.msg_ids), words(m.text), trimmed=False)


class TestRender:
    def test_nothing_packed_is_no_block(self) -> None:
        assert render_block([], language=BlockLanguage.en) == ("", [])

    def test_one_layer_has_no_headings(self) -> None:
        block, frame = render_block([packed("a", "user: I live in Berlin")],
                                    language=BlockLanguage.en)
        assert block == f"{PREFACE[BlockLanguage.en]}\n\n- [2024-05-08] user: I live in Berlin"
        assert frame == [PREFACE[BlockLanguage.en], "- [2024-05-08]"]

    def test_both_layers_get_headings_and_lines_are_indented(self) -> None:
        fact = packed("f", "user: 我住在柏林", tier="longterm",
                      time_start=datetime(2024, 5, 1, tzinfo=UTC))
        detail = packed("d", "user: 周二体检\nassistant: 好的", time_start=None, time_end=None)
        block, frame = render_block([fact, detail], language=BlockLanguage.zh)
        heads = HEADINGS[BlockLanguage.zh]
        assert block.split("\n") == [
            PREFACE[BlockLanguage.zh], "", heads[Layer.longterm],
            "- [2024-05-01 – 2024-05-08] user: 我住在柏林", heads[Layer.detail],
            "- user: 周二体检", "  assistant: 好的"]
        assert frame == [PREFACE[BlockLanguage.zh], heads[Layer.longterm],
                         "- [2024-05-01 – 2024-05-08]", heads[Layer.detail], "-"]

    def test_auto_language_follows_the_question(self) -> None:
        assert block_language(BlockLanguage.auto, "我住在哪里") == BlockLanguage.zh
        assert block_language(BlockLanguage.auto, "where do I live") == BlockLanguage.en
        assert block_language(BlockLanguage.zh, "where do I live") == BlockLanguage.zh


class TestTokens:
    def test_summed_from_pieces_equals_counting_the_block(self) -> None:
        pieces = [packed("a", "user: I live in Berlin", tier="longterm"),
                  packed("b", "user: 周二 体检\nassistant: 好的")]
        for language in (BlockLanguage.en, BlockLanguage.zh):
            block, frame = render_block(pieces, language=language)
            counted = TokenCounter(words).block(block, frame, [p.text for p in pieces],
                                                [p.tokens for p in pieces])
            assert counted == words(block)

    def test_a_counter_whose_joins_vary_counts_the_block_whole(self) -> None:
        def squared(text: str) -> int:
            return words(text) ** 2

        assert whitespace_join_tokens(words) == 0
        assert whitespace_join_tokens(squared) == NOT_ADDITIVE
        p = packed("a", "user: I live in Berlin")
        block, frame = render_block([p], language=BlockLanguage.en)
        assert TokenCounter(squared).block(block, frame, [p.text], [squared(p.text)]) == \
            squared(block)

    def test_counts_are_cached(self) -> None:
        calls: list[str] = []

        def counting(text: str) -> int:
            calls.append(text)
            return words(text)

        tokens = TokenCounter(counting)
        assert tokens.count("a b c") == tokens.count("a b c") == 3
        assert calls == ["a b c"]
