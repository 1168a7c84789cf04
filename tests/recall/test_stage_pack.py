"""Packing (app/recall/pack.py) on hand-made candidates: budget, top_k, duplicates, lines,
tiers, and the trace of what was passed over. Tokens are words here (`stages.words`)."""

from __future__ import annotations

from app.recall.candidates import Candidate, PassedOver
from app.recall.pack import core, pack
from app.recall.text import Coverage, query_terms
from app.recall.tuning import MIN_TOKENS_LEFT
from tests.recall.stages import candidate, memory, words


def run(tiers: list[list[Candidate]], *, top_k: int = 10, max_tokens: int = 1000,
        query: str = "") -> tuple[list[str], dict[str, tuple[PassedOver, int]]]:
    texts = [c.memory.text for tier in tiers for c in tier]
    matcher = Coverage(query_terms(query), texts) if query else None
    packing = pack(tiers, top_k=top_k, max_tokens=max_tokens, matcher=matcher, count=words,
                   query=query)
    return [p.candidate.memory.id for p in packing.packed], packing.passed_over


def chat(memory_id: str, *turns: str, **fields: object) -> Candidate:
    return candidate(memory(memory_id, *turns, **fields))  # type: ignore[arg-type]


class TestBudget:
    def test_best_first_until_top_k(self) -> None:
        tiers = [[chat(f"m{n}", f"user: Anna: line {n}", "user: Ben: ok",
                       session=f"s{n}") for n in range(5)]]
        assert run(tiers, top_k=3)[0] == ["m0", "m1", "m2"]

    def test_a_memory_that_does_not_fit_is_passed_over_and_a_smaller_one_taken(self) -> None:
        big = chat("big", "user: Anna: " + "word " * 30, "user: Ben: wow", session="a")
        small = chat("small", "user: Anna: short one", "user: Ben: ok", session="b")
        packed, over = run([[big, small]], max_tokens=MIN_TOKENS_LEFT + 2)
        assert packed == ["small"]
        assert over == {"big": (PassedOver.budget, words(big.memory.text))}

    def test_packing_stops_when_too_few_tokens_are_left(self) -> None:
        first = chat("first", "user: Anna: one two three", "user: Ben: four", session="a")
        tiny = chat("tiny", "user: x", "user: y", session="b")
        budget = words(first.memory.text) + MIN_TOKENS_LEFT - 1
        assert run([[first, tiny]], max_tokens=budget) == (["first"], {})


class TestDuplicates:
    def test_messages_returned_by_a_better_memory_are_left_out(self) -> None:
        better = chat("better", "user: Anna: we moved", "user: Ben: where?")
        overlap = chat("overlap", "user: Ben: where?", "user: Anna: to Munich",
                       ids=["2", "3"])
        packing = pack([[better, overlap]], top_k=10, max_tokens=100, matcher=None,
                       count=words)
        second = packing.packed[1]
        assert (second.text, second.msg_ids, second.trimmed) == \
            ("user: Anna: to Munich", ["3"], True)

    def test_a_memory_with_nothing_new_is_a_duplicate(self) -> None:
        better = chat("better", "user: 小王：我们搬家了", "user: 小李：搬到哪里？")
        same = chat("same", "user: 小王：我们搬家了", "user: 小李：搬到哪里？")
        assert run([[better, same]]) == (["better"], {"same": (PassedOver.duplicate, 0)})

    def test_the_same_message_number_in_another_session_is_another_message(self) -> None:
        one = chat("one", "user: Anna: hi", "user: Ben: hello", session="a")
        other = chat("other", "user: Anna: bye", "user: Ben: see you", session="b")
        assert run([[one, other]])[0] == ["one", "other"]


class TestStatements:
    # Tokens are words here: the matching line is 2, the others 7 and 8.
    NOTES = ("user: 体检改到周四上午", "user: 周末 和 朋友 去 爬山 then lunch",
             "user: 买了 新的 自行车 和 头盔 很 贵")

    def test_the_matching_line_first_the_others_back_while_the_budget_allows(self) -> None:
        notes = chat("notes", *self.NOTES)
        packing = pack([[notes]], top_k=10, max_tokens=100, count=words, query="体检是哪天",
                       matcher=Coverage(query_terms("体检是哪天"), [notes.memory.text]))
        assert (packing.packed[0].text, packing.packed[0].trimmed) == (notes.memory.text, False)

    def test_only_the_matching_line_in_a_tight_budget(self) -> None:
        notes = chat("notes", *self.NOTES)
        # Room for the matching line only.
        packing = pack([[notes]], top_k=10, max_tokens=MIN_TOKENS_LEFT, count=words,
                       query="体检是哪天",
                       matcher=Coverage(query_terms("体检是哪天"), [notes.memory.text]))
        assert (packing.packed[0].text, packing.packed[0].msg_ids) == (self.NOTES[0], ["1"])

    def test_lines_given_back_move_from_a_weaker_memory_that_returned_them(self) -> None:
        notes = chat("notes", *self.NOTES)
        later = chat("later", *self.NOTES[1:], ids=["2", "3"])
        texts = [notes.memory.text, later.memory.text]
        packing = pack([[notes, later]], top_k=10, max_tokens=100, count=words,
                       query="体检是哪天", matcher=Coverage(query_terms("体检是哪天"), texts))
        # The weaker memory held nothing else: it is dropped, the better one is whole.
        assert [(p.candidate.memory.id, p.trimmed) for p in packing.packed] == \
            [("notes", False)]

    def test_core_keeps_lines_with_half_the_best_lines_share(self) -> None:
        units = [(("1",), "user: Anna plays tennis on Sunday"),  # share 1
                 (("2",), "user: Anna plays chess"),  # 2/3
                 (("3",), "user: tennis club fee is high"),  # 1/3
                 (("4",), "user: bought new shoes")]  # 0
        matcher = Coverage(query_terms("when does Anna play tennis"), [u[1] for u in units])
        assert core(units, matcher) == units[:2]

    def test_without_a_keyword_match_no_line_stands_out(self) -> None:
        units = [(("1",), "user: 周末去爬山"), (("2",), "user: 买了新的自行车")]
        matcher = Coverage(query_terms("tennis"), [u[1] for u in units])
        assert core(units, matcher) == units


class TestTiers:
    def test_the_second_tier_only_fills_what_the_first_left(self) -> None:
        strong = chat("strong", "user: Anna: " + "word " * 6, "user: Ben: ok", session="a")
        weak = chat("weak", "user: Anna: a bit", "user: Ben: ok", session="b")
        tiers = [[strong], [weak]]
        assert run(tiers)[0] == ["strong", "weak"]
        assert run(tiers, max_tokens=words(strong.memory.text))[0] == ["strong"]
        assert run([[], [weak]])[0] == ["weak"]
