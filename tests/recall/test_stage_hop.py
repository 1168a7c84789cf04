"""The second hop's line (`hop.bridge`): hand-made candidates, no server, no model."""

from __future__ import annotations

from app.recall.hop import bridge
from app.recall.text import Coverage, query_terms
from tests.recall.stages import candidate, memory


def bridged(question: str, *lines: str) -> tuple[str, str | None] | None:
    found = [candidate(memory("m1", *lines), score=0.9)]
    return bridge(found, Coverage(query_terms(question), [found[0].memory.text]))


class TestBridge:
    def test_a_line_of_several_sentences_hops_with_the_one_naming_the_thing(self) -> None:
        """A long message (an assistant's answer, a paragraph of notes) is one line; the hop
        carries the sentence that matches the question, not the whole answer, whose
        encoding took 50-160 ms for 900 characters."""
        for question, message, sentence in (
            ("我常去的商场怎么样？",
             "user: 周末又去逛街了，买了一件外套。我常去的商场是星光百货。晚饭吃了火锅。",
             "我常去的商场是星光百货。"),
            ("What is the mall I go to most like?",
             "assistant: Great question! Here is what I noted for you. The mall you go to "
             "most is Riverside Plaza. Enjoy the weekend!",
             "The mall you go to most is Riverside Plaza."),
        ):
            assert bridged(question, message) == (sentence, "m1"), question

    def test_a_line_of_one_sentence_hops_whole(self) -> None:
        for question, message in (
            ("我常去的商场怎么样？", "user: 我常去的商场是星光百货。"),
            ("What is the mall I go to most like?",
             "user: The mall I go to most is Riverside Plaza."),
        ):
            assert bridged(question, message) == (message.split(": ", 1)[1], "m1")
