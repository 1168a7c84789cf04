"""Turns that give recall nothing to look up, and questions about a period as a whole.

An assistant that recalls on every turn sends its greetings, thanks and jokes too. Such a
turn talks about the conversation itself, so recall returns nothing for it (`nothing_to_look_up`):
small talk as the store already knows it (`app/classify/smalltalk.py`: greetings, thanks,
acknowledgements, laughter), and what a user says to the assistant about the assistant or
its output ("tell me a joke", "that's hilarious", "再讲一个笑话吧", "你真棒": `data/turns.txt`).
A turn that says anything else keeps its content: "I love jokes about cats" and "what jokes
do I like?" are looked up.

A question about a period ("what did we talk about on November 27?", "上周我们聊了什么？")
names a date and nothing else to find (`about_period_only`): every memory of the period
answers it (`order.py`).
"""

from __future__ import annotations

import re
from functools import cache

from app.classify.smalltalk import is_small_talk
from app.recall.text import QueryTerms, data_sections

_PUNCTUATION = re.compile(r"[\W_]+")


@cache
def _addressed() -> re.Pattern[str]:
    # Latin phrases whole-word; Chinese ones anywhere (no spaces between words).
    alternatives = "|".join(f"(?:{p})" for p in data_sections("turns.txt")["addressed"])
    return re.compile(rf"(?<![A-Za-z])(?:{alternatives})(?![A-Za-z])", re.IGNORECASE)


@cache
def _period_words() -> frozenset[str]:
    return frozenset(word for line in data_sections("turns.txt")["period"] for word in line.split())


def nothing_to_look_up(text: str) -> bool:
    """Whether a turn talks only about the conversation (module docstring)."""
    if not _PUNCTUATION.sub("", text):
        return False  # an empty question is not a chat turn (a reference phrase alone)
    if is_small_talk(text):
        return True
    rest = _addressed().sub(" ", text)
    if rest == text:
        return False
    return not _PUNCTUATION.sub("", rest) or is_small_talk(rest)


def about_period_only(terms: QueryTerms) -> bool:
    """Whether a question's terms (its date cut out) are only the words of asking about a
    period ("what did we talk about", "我们聊了什么")."""
    return all(t in _period_words() for t in (*terms.latin, *terms.cjk))
