"""Newer facts win: a later statement of a fact goes before the older one it restates.

A user's facts change ("下周二上午我要去医院体检" → a week later "体检改到周四了"; "We live in
Berlin" → "we moved from Berlin to Munich"). Both stay stored (the older one is history, and
a question about the past still finds it), but a recall must put the newer statement first,
and the older memory's evolution log says it was superseded.

Two memories are *the same fact* when
- they come from different sessions (inside one session the chunk holds both lines),
- their vectors are close: cosine at least the model profile's `supersede_cosine`
  (app/embedding/profiles.py; e5 puts unrelated Chinese sentences as high as 0.91, so the
  cosine alone cannot decide), and
- they share a subject: a fifth or more of the newer memory's terms (`text.query_terms`:
  English words, Chinese words), each weighted by how rare it is among the namespace's
  memories at hand (`Rarity`: IDF over the best candidates a recall compares, or over a
  new memory's nearest neighbours after a build), are in the older one. "我现在在一家银行当柜员" and
  "体检改到周四了" are close for e5 (0.906) but share nothing. The weighting is what keeps
  the chunks of one long chat apart: the speakers' names open every line and words such as
  "really", "feel", 感觉 or 时间 are in most of them, so counted alike they made any two
  chunks "share a subject"; weighted, they count next to nothing, and a subject many
  memories talk about (a hobby the chat keeps coming back to) counts little too: that is a
  topic, not one fact restated. What counts is a rare word both hold (体检, dentist, Berlin).

The same test runs in two places: after a build (`mark_superseded`, which logs a
`superseded` event on each older memory, replay-safe) and in a recall (`newer_first`, which
moves a newer memory ahead of the older ones it restates among the memories that passed the
threshold, when it holds as many of the question's terms: the same answer, restated). The
recall does not read the events: it compares the vectors of its own candidates, so a memory
stored before this rule existed is ordered the same way.

A change is often worded without the question's words or the older statement's: "where do
I live?" after "I live in Delfshaven" and "we moved to Utrecht last month", "我现在房租多少钱？"
after "我每个月房租四千五" and "房东涨租了，从这个月开始每月五千二". In a recall the question
is the shared subject: a later memory that answers it too (it passes the threshold),
is close to the older one (`supersede_cosine`) and announces a change (`announces_change`:
moving, switching, stopping, replacing, rescheduling, a price going up, "now", "现在", "不…了";
`data/changes.txt`) in a line about the question, goes first. What this cannot tell: a
change of another attribute of the same subject worded as a change ("我表姐搬到杭州了" asked
for her job goes first and marks the job as earlier), and a change with no such word and
no shared words ("I'm in bed by 10:30" after "I go to bed around 1 am" is caught only
through "these days").
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum
from typing import TypeVar

import numpy as np

from app.recall.text import QueryTerms, data_sections, idf, latin_words, query_terms
from app.recall.tuning import RARITY_NEIGHBOURS, SUBJECT_SHARE, SUPERSEDE_NEIGHBOURS
from app.scripts import HAN_RUN
from app.storage.records import EventRecord, MemoryRecord, new_event
from app.storage.repository import Repository, SearchFilter

_ROLE_LABEL = re.compile(r"^(?:user|assistant|system|tool): ", re.MULTILINE)

T = TypeVar("T")


def _when(memory: MemoryRecord) -> datetime | None:
    when = memory.time_end or memory.time_start or memory.created_at
    if when is None:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def _start(memory: MemoryRecord) -> datetime | None:
    when = memory.time_start or memory.time_end or memory.created_at
    if when is None:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def _content(text: str) -> str:
    """A memory's text without its lines' role labels ("user: "), which every memory shares."""
    return _ROLE_LABEL.sub("", text)


@functools.lru_cache(maxsize=1024)
def _latin_word_set(lowered: str) -> frozenset[str]:
    """A lowered content's English words, tokenized once per process, not once per
    `Rarity`: a build's new memories share most of their 30 neighbours, and the next store
    of the namespace meets the same ones again (tokenizing them was ~0.11 CPU s of each
    LoCoMo-style store call). ~5 KB an entry (the text and its words)."""
    return frozenset(latin_words(lowered))


@functools.lru_cache(maxsize=1024)
def _subject_terms(text: str) -> QueryTerms:
    """`text`'s terms, without the role labels. A Chinese compound counts once, not with
    its parts too (自行车, not also 自行 and 行车): the segmenter's search mode gives both,
    which would count one shared word three times. Once per process, as `query_terms`
    (whose cache holds the same texts): the same memories come back recall after recall,
    and finding the parts compares every two words of a long chunk."""
    terms = query_terms(_content(text))
    words = terms.cjk | terms.guessed
    parts = frozenset(w for w in words if any(w != other and w in other for other in words))
    return terms.without(parts)


@dataclass(frozen=True)
class _Weighed:
    """A text's terms with their weights (`Rarity.weight`), English then Chinese, in the
    order their shares are summed, and the sum of all."""

    latin: tuple[tuple[str, float], ...]
    chinese: tuple[tuple[str, float], ...]
    total: float


class Rarity:
    """How much each term says about a memory among `texts` (the namespace's memories at
    hand): the IDF that `Coverage` gives a query's terms, so a term that nearly every text
    holds (a speaker's name, "really", 感觉) weighs next to nothing.

    It also holds what the comparisons read of each text (its content, its weighed terms,
    its pairs of Chinese characters), read once per text: a recall compares every two of
    its best candidates, and reading both texts again for each pair was most of its order
    stage."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._lowered = [_content(t).lower() for t in texts]
        self._contents = dict(zip(texts, self._lowered, strict=True))
        self._word_counts: Counter[str] | None = None  # English words' document counts
        self._weights: dict[tuple[str, bool], float] = {}
        self._weighed: dict[str, _Weighed] = {}
        self._bigrams: dict[str, frozenset[str]] = {}

    def content(self, text: str) -> str:
        """`text` lowered, without its role labels."""
        if text not in self._contents:
            self._contents[text] = _content(text).lower()
        return self._contents[text]

    @staticmethod
    def words(lowered: str) -> frozenset[str]:
        """The English words of a lowered content (tokenized once per text: the costly
        step, ~1 ms for a chunk of dialogue)."""
        return _latin_word_set(lowered)

    def weight(self, term: str, *, cjk: bool) -> float:
        key = (term, cjk)
        if key not in self._weights:
            # Chinese terms match as substrings, English ones as (stemmed) words, as in
            # `Coverage`; the English counts are taken once, on the first English term.
            if cjk:
                df = sum(term in text for text in self._lowered)
            else:
                if self._word_counts is None:
                    self._word_counts = Counter(
                        w for text in self._lowered for w in self.words(text))
                df = self._word_counts[term]
            self._weights[key] = idf(len(self._lowered), df)
        return self._weights[key]

    def weighed(self, text: str) -> _Weighed:
        """`text`'s terms (`_subject_terms`) with their weights."""
        if text not in self._weighed:
            terms = _subject_terms(text)
            latin = tuple((t, self.weight(t, cjk=False)) for t in terms.latin)
            chinese = tuple((t, self.weight(t, cjk=True)) for t in terms.cjk | terms.guessed)
            self._weighed[text] = _Weighed(
                latin, chinese, total=sum(w for _, w in (*latin, *chinese)))
        return self._weighed[text]

    def bigrams(self, text: str) -> frozenset[str]:
        """Every two Chinese characters in a row of `text`'s content."""
        if text not in self._bigrams:
            self._bigrams[text] = frozenset(
                run[i:i + 2] for run in HAN_RUN.findall(_content(text))
                for i in range(len(run) - 1))
        return self._bigrams[text]


def subject_share(newer: str, older: str, rarity: Rarity) -> float:
    """The share of `newer`'s terms, weighted by `rarity`, that `older`'s content holds."""
    terms = rarity.weighed(newer)
    if terms.total <= 0:
        return 0.0
    content = rarity.content(older)
    words = rarity.words(content) if terms.latin else frozenset()
    held = [w for t, w in terms.latin if t in words] + \
        [w for t, w in terms.chinese if t in content]
    return sum(held) / terms.total


def share_a_subject(newer: str, older: str, rarity: Rarity) -> bool:
    """At least `SUBJECT_SHARE` of `newer`'s terms (weighted by rarity) are in `older`."""
    return subject_share(newer, older, rarity) >= SUBJECT_SHARE


class Change(IntEnum):
    """What a statement says of a change (`announces_change`)."""

    none = 0
    now = 1  # only contrasts the present with before: "now", "现在", "不…了"
    said = 2  # names one: moved, switched, stopped, replaced, 改成, 搬家, 取消


@functools.cache
def _change_cues(kind: str) -> re.Pattern[str]:
    sections = data_sections("changes.txt")
    english = "|".join(f"(?:{p})" for p in sections["en" + kind])
    chinese = "|".join(f"(?:{p})" for p in sections["zh" + kind])
    # English cues whole-word; Chinese ones anywhere (no spaces between words).
    return re.compile(rf"(?<![A-Za-z])(?:{english})(?![A-Za-z])|{chinese}", re.IGNORECASE)


@functools.lru_cache(maxsize=1024)
def announces_change(text: str) -> Change:
    """What `text` (a line, without its role label) says of a change: names one (moved,
    switched, stopped, replaced, rescheduled, 改成, 搬家), only contrasts now with before
    ("now", "现在", "不…了"), or nothing (data/changes.txt). Once per process per line, as
    `_subject_terms`: a recall asks it of the same candidates in each tier, and the same
    memories come back recall after recall; the cues' alternation took ~0.1 ms a long line."""
    content = _content(text)
    if _change_cues("").search(content):
        return Change.said
    return Change.now if _change_cues("-now").search(content) else Change.none


def share_words(newer: str, older: str, rarity: Rarity) -> bool:
    """Whether `newer` holds any word of `older`'s, weighted by rarity, or any two Chinese
    characters in a row of it (住在, 房租 / 涨租 hold none in common, 个月 both): the least
    a change of a fact says of it. The segmenter does not keep every Chinese word as a term
    (住在 is not one), so the pairs of characters stand in for them."""
    return subject_share(newer, older, rarity) > 0 or \
        not rarity.bigrams(newer).isdisjoint(rarity.bigrams(older))


def later_statement(newer: MemoryRecord, older: MemoryRecord, cosine: float, *,
                    threshold: float) -> bool:
    """Whether `newer` was said after `older`, in another session of the same namespace,
    and is close to it (cosine at least `threshold`): what any restatement or change needs."""
    if newer.id == older.id or newer.namespace != older.namespace:
        return False
    if newer.session_id == older.session_id or cosine < threshold:
        return False
    new_start, old_end = _start(newer), _when(older)
    return new_start is not None and old_end is not None and old_end < new_start


def supersedes(newer: MemoryRecord, older: MemoryRecord, cosine: float, *,
               threshold: float, rarity: Rarity) -> bool:
    """Whether `newer` restates or changes the fact `older` holds (module docstring)."""
    return later_statement(newer, older, cosine, threshold=threshold) and \
        share_a_subject(newer.text, older.text, rarity)


async def mark_superseded(repo: Repository, records: Sequence[MemoryRecord], *,
                          threshold: float, now: datetime) -> list[EventRecord]:
    """Log a `superseded` event on every older memory a just-built record restates.

    The event id is deterministic (older id, newer id), so a replayed build logs nothing
    twice. Returns the events written.
    """
    events: list[EventRecord] = []
    for record in records:
        if record.vector is None:
            continue
        hits = await repo.vector_search(record.vector, SearchFilter(namespace=record.namespace),
                                        limit=RARITY_NEIGHBOURS)
        rarity = Rarity([record.text, *(h.memory.text for h in hits if h.memory.id != record.id)])
        for hit in hits[:SUPERSEDE_NEIGHBOURS + 1]:
            older = hit.memory
            if not supersedes(record, older, hit.cosine or 0.0, threshold=threshold,
                              rarity=rarity):
                continue
            events.append(new_event(
                older, "superseded", f"restated or changed by a later memory {record.id}",
                now, {"by": record.id, "by_session": record.session_id,
                      "cosine": round(hit.cosine or 0.0, 4)},
                event_id=f"{older.id}:superseded:{record.id}"))
    if events:
        await repo.append_events(events)
    return events


def newer_first(head: list[T], newcomers: list[T], memory: dict[int, MemoryRecord],
                vectors: dict[int, np.ndarray], *, threshold: float,
                covers: Callable[[int], float], changes: Callable[[int, int], bool],
                rarity: Rarity) -> tuple[list[T], list[T], list[tuple[T, T]]]:
    """`head` with each newer statement moved just ahead of the first older memory it
    supersedes, and `newcomers` (memories that did not pass the threshold) that supersede a
    memory of `head` inserted likewise: the change of a fact that is returned is returned
    with it, although it may not repeat the question's words ("Which city do we live in?"
    finds "We live in Berlin"; "we moved from Berlin to Munich" must come with it).

    Positions count `head` first, then `newcomers`; `memory` / `vectors` map a position to
    its record and unit vector (a position without a vector is left as it is), `covers` to
    the share of the question's terms it holds: a restatement must hold as many; `changes`
    (newer, older) to whether the newer announces a change of the older's answer to the
    question (module docstring): then the question is the shared subject. `rarity` weighs
    the terms over the memories compared. Returns the new head, the newcomers it took in,
    and each (older, newer) pair of a statement and a later one among them that restates or
    changes it (moved ahead, or ahead already).
    """
    def changed(j: int, earlier: int) -> bool:
        """Whether position `j` restates or changes position `earlier`'s fact."""
        if j not in vectors or earlier not in vectors:
            return False
        cosine = float(vectors[j] @ vectors[earlier])
        if not later_statement(memory[j], memory[earlier], cosine, threshold=threshold):
            return False
        # Only the same answer to this question: a later note about the same person or
        # place but another attribute ("我表姐住在杭州" after "我表姐是一名护士", asked for
        # her job) matches the question's words less, and stays where it is, unless it says
        # that something changed. Holding none of them (a question in the other language)
        # is no sign of the same answer: "每个月转三千块生活费" is not the rent.
        restated = covers(j) > 0 and covers(j) >= covers(earlier) and share_a_subject(
            memory[j].text, memory[earlier].text, rarity)
        return restated or changes(j, earlier)

    order = list(range(len(head)))
    taken: list[int] = []
    pairs: list[tuple[int, int]] = []
    for j in range(1, len(head) + len(newcomers)):
        position = order.index(j) if j < len(head) else len(order)
        for earlier in order[:position]:
            if earlier >= len(head) or not changed(j, earlier):
                continue
            if j < len(head):
                order.remove(j)
            else:
                taken.append(j)
            order.insert(order.index(earlier), j)
            pairs.append((earlier, j))
            break
    # A later statement already ahead of the older one it changes: marked all the same.
    moved = {old for old, _ in pairs}
    for position, j in enumerate(order):
        for older in order[position + 1:]:
            if older not in moved and changed(j, older):
                pairs.append((older, j))
                moved.add(older)
    items = [*head, *newcomers]
    return ([items[i] for i in order], [items[i] for i in taken],
            [(items[old], items[new]) for old, new in pairs])
