"""Reading a recall query before searching: reference phrases and chit-chat wrappers.

A **reference phrase** ("记得刚才说的", "和之前那个问题一样", "as I said before", "like last
time") tells us the user is pointing at something already said. The phrase itself is noise
for retrieval (a memory that happens to contain "said before" is not what they mean), so it
is cut from the search text; the cue is kept and the service favours what it points to:
the most recent session for "just now / 刚才", and a lower score threshold for any cue,
since the user asserts the memory exists.

A **counting** question ("有几个人…", "how many …") is noted: it asks for every instance,
so the service accepts weaker matches for it too.

A **wrapper** is chit-chat around the real question ("…对了，我其实想问的是：…",
"anyway, what I actually want to know is: …"): only the part after the last marker is
searched, so the small talk does not pull in small-talk memories.

Pure functions, no storage, no model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from app.recall.tuning import MAX_QUESTION_PARTS, MIN_QUESTION_CHARS


class ReferenceScope(StrEnum):
    recent = "recent"  # 刚才 / just now: the latest session
    earlier = "earlier"  # 之前 / 上次 / before / last time: an earlier conversation


@dataclass(frozen=True)
class ReferenceCue:
    phrase: str
    scope: ReferenceScope
    about_question: bool  # "the same question as before": favour question memories


@dataclass(frozen=True)
class ParsedQuery:
    text: str  # what is searched
    original: str
    reference: ReferenceCue | None = None
    unwrapped: bool = False
    reference_only: bool = False  # the query is nothing but a reference phrase
    counts: bool = False  # "有几个人…", "how many …": every instance is asked for


_ZH_RECENT = (
    r"(?:还)?记得(?:我们|我)?刚才(?:说|讲|提|聊)(?:过)?的(?:那个|那些|事|话|内容)?(?:吗|么)?",
    r"刚才(?:我|我们|你)?(?:说|讲|提|聊)(?:到|过)?的(?:那个|那些|事|话|内容)?",
    r"刚刚(?:我|我们|你)?(?:说|讲|提|聊)(?:到|过)?的(?:那个|那些|事|话|内容)?",
    r"前面(?:我|我们|你)?(?:说|讲|提|聊)(?:到|过)?的(?:那个|那些|事|话|内容)?",
)
_ZH_EARLIER = (
    r"(?:和|跟|与)(?:之前|以前|上次|上回|前面)(?:的|那个|那次)?(?:问题|事情|情况)?(?:一样|相同|类似)",
    r"(?:还)?记得(?:我们|我)?(?:之前|以前|上次|上回)(?:说|讲|提|聊|讨论)(?:到|过)?的(?:那个|那些|事|话|内容)?(?:吗|么)?",
    r"(?:之前|以前|上次|上回)(?:我|我们|你)?(?:说|讲|提|聊|讨论)(?:到|过)?的(?:那个|那些|事|话|内容)?",
    r"(?:像|如|按)(?:之前|以前|上次|上回)(?:那样|一样)",
    r"我(?:之前|以前|上次)(?:说过|提过|讲过|告诉过你)",
)
_EN_RECENT = (
    r"as (?:i|we) (?:just )?(?:said|mentioned|discussed|told you) (?:just now|a moment ago|"
    r"a minute ago|earlier today)",
    r"(?:what|the thing) (?:i|we|you) (?:just )?(?:said|mentioned) (?:just now|a moment ago)",
    r"(?:like|as) (?:i|we) just (?:said|mentioned|discussed)",
)
_EN_EARLIER = (
    r"as (?:i|we) (?:said|mentioned|discussed|told you)(?: (?:before|earlier|previously|"
    r"last time))?",
    r"(?:just )?like (?:last time|before|we discussed|we talked about)",
    r"(?:the )?same (?:question|issue|problem|thing) as (?:before|last time|earlier)",
    r"(?:do you )?remember (?:what|when) (?:i|we) (?:said|told you|discussed|talked about)",
    r"(?:what|the thing) (?:i|we|you) (?:said|mentioned|told you) (?:before|earlier|"
    r"last time|previously)",
    r"we (?:discussed|talked about) (?:this )?(?:before|earlier|last time)",
    r"you (?:mentioned|said) (?:before|earlier|last time)",
)


def _compile(patterns: tuple[str, ...], *, english: bool) -> re.Pattern[str]:
    body = "|".join(patterns)
    # ASCII-letter boundaries rather than \b: Chinese characters count as word characters.
    return re.compile(rf"(?<![A-Za-z])(?:{body})(?![A-Za-z])" if english else f"(?:{body})",
                      re.IGNORECASE)


_CUES: tuple[tuple[re.Pattern[str], ReferenceScope], ...] = (
    (_compile(_ZH_RECENT, english=False), ReferenceScope.recent),
    (_compile(_EN_RECENT, english=True), ReferenceScope.recent),
    (_compile(_ZH_EARLIER, english=False), ReferenceScope.earlier),
    (_compile(_EN_EARLIER, english=True), ReferenceScope.earlier),
)

# Markers after which the real question starts. The question is the text after the *last*
# marker ("…话说回来，我想问，那个…的展览，门票多少？").
_WRAPPER = re.compile(
    r"(?:我?(?:真正|实际上?|其实|主要|就是)?想(?:问|知道|要?了解|弄清楚|搞清楚|确认)(?:的(?:问题)?)?(?:是|就是)?"
    r"|我的问题(?:是|就是)|问题(?:是|就是))(?:这个|这样)?\s*[:：,，]"
    r"|(?<![A-Za-z])(?:what i (?:really |actually )?(?:want|wanted|meant) to (?:ask|know) is"
    r"|my (?:real |actual )?question is)\s*[:,]?",
    re.IGNORECASE,
)
# A question that counts ("一共有几场讲座超过两小时", "how many times did I …", "我去过几次
# 杭州": 几次 after a verb is Chinese's "how often") needs every memory holding the
# attribute, also those whose value does not match: the condition ("超过五百人", "以下",
# "before May") is for the reader to apply, not a keyword.
_COUNTING = re.compile(
    r"有几(?:个|位|场|次|家|种|天|件|本|部|回)|有多少(?:个|位|人|场|次|家|种|回)?|几个人"
    r"|几(?:次|回|遍)|一共|总共"
    r"|\bhow (?:many|often)\b|\bin total\b",
    re.IGNORECASE,
)
_PUNCT_ONLY = re.compile(r"^[\s\W_]*$")
_QUESTION_END = re.compile(r"[?？]|(?=[,，;；。.!！]?\s*(?:另外|此外|and also|also)\s*[,，:：])",
                           re.IGNORECASE)


def parse_query(query: str) -> ParsedQuery:
    """The text to search and any reference cue in `query`.

    >>> parse_query("记得刚才说的体检安排吗").reference.scope
    <ReferenceScope.recent: 'recent'>
    """
    text = query.strip()
    unwrapped = False
    markers = list(_WRAPPER.finditer(text))
    if markers:
        # The question after each marker; one that is not the last runs only to the first
        # question mark or "另外 / also" after it (chit-chat follows, then the next marker):
        # "…我真正想问的是：A？另外，<chit-chat>。实际上我想问的是：B？" searches A and B.
        questions = []
        for marker, following in zip(markers, [*markers[1:], None], strict=True):
            segment = text[marker.end():following.start() if following else len(text)]
            if following is not None:
                end = _QUESTION_END.search(segment)
                segment = segment[:end.end()] if end else segment
            segment = segment.strip(" ,，;；")
            if len(segment) >= MIN_QUESTION_CHARS:
                questions.append(segment)
        if questions:
            text, unwrapped = " ".join(questions), True

    cue: ReferenceCue | None = None
    reference_only = False
    for pattern, scope in _CUES:
        match = pattern.search(text)
        if match:
            phrase = match.group(0)
            about_question = bool(re.search(r"问题|question|issue|problem", phrase, re.I))
            cue = ReferenceCue(phrase=phrase, scope=scope, about_question=about_question)
            stripped = (text[:match.start()] + " " + text[match.end():]).strip(" ,，。.?？!！")
            # A query that is nothing but the phrase ("记得刚才说的吗") keeps its words: the
            # search then leans on the recency the cue asks for.
            if _PUNCT_ONLY.match(stripped):
                reference_only = True
            else:
                text = stripped
            break
    return ParsedQuery(text=text, original=query, reference=cue, unwrapped=unwrapped,
                       reference_only=reference_only, counts=bool(_COUNTING.search(text)))


# Where a compound query starts another question: after a question mark, or at "另外 / 还有 /
# 此外 / also / and another thing" ("我堂哥几岁了？另外，星河草地音乐节的规模是什么？").
_PART_BREAK = re.compile(
    r"(?<=[?？])\s*"
    r"|[,，;；。.!！]?\s*(?:另外|此外|还有就是|还有|顺便问一?下|and also|also|another thing)"
    r"\s*[,，:：]\s*",
    re.IGNORECASE,
)


def split_questions(text: str) -> list[str]:
    """The sub-questions of a compound query, each searched on its own so that the second
    question is not drowned by the first (one part for most queries). Pieces too short to
    be a question stay with the one before them."""
    parts: list[str] = []
    for piece in _PART_BREAK.split(text):
        piece = piece.strip(" ,，;；")
        if not piece:
            continue
        if parts and len(piece) < MIN_QUESTION_CHARS:
            parts[-1] = f"{parts[-1]} {piece}"
        else:
            parts.append(piece)
    if len(parts) > MAX_QUESTION_PARTS:
        parts = [*parts[:MAX_QUESTION_PARTS - 1], " ".join(parts[MAX_QUESTION_PARTS - 1:])]
    return parts or [text]
