"""Query terms and how much of a query a memory covers, in English and Chinese.

The full-text index ranks keyword hits (BM25) but its scores have no fixed scale: they grow
with the namespace and the query length. Recall needs a keyword score that means the same
thing everywhere, so that one `min_score` works for every store. `coverage` gives it: the
share of the query's information (IDF-weighted terms) that a memory contains, 0–1.

Terms: English words lower-cased, lightly stemmed, function words dropped; Chinese words
from jieba's search-mode segmentation (a compound and its parts), single characters and
function words dropped; plus the words jieba's HMM puts together where the dictionary left
single characters, mostly names (`QueryTerms.guessed`; without them "宋嘉树和林婉清谁更年长"
has no term but 年长). Chinese terms are matched as substrings of the memory text, so a
different segmentation of the same words on the two sides never hides a match. IDF is
taken over the candidate memories of this query (the only corpus at hand without another
query): a term found in every candidate (a speaker's name in a two-person chat) weighs
nothing; a term found in none weighs like a rare term and lowers every memory's coverage:
the query may ask about something the store does not hold.

With `equivalents`, a query's attribute word also matches the other words of its group
(`data/equivalents.txt`: 年龄 ~ 岁, 教育背景 ~ 学历, birthday ~ born), the paraphrases a user
makes most between stating a fact and asking about it, and a kind of thing matches the
things of that kind (`data/kinds.txt`: 家电 finds 洗碗机, phone finds Pixel; not the reverse).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jieba

from app.classify.entities import ROLE_LABEL_RE, warm_up
from app.classify.stopwords import word_set
from app.recall import bilingual
from app.scripts import HAN_RUN, has_han

_LATIN_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NUMBER_WITH_UNIT = re.compile(r"(\d{2,})[a-z]{1,3}")
# Capitalised English words in a row: a name ("Xiao Zhang", "Xiaoming"), perhaps in pinyin.
_CAPITALISED_RUN = re.compile(r"(?<![A-Za-z'])[A-Z][a-z]+(?: [A-Z][a-z]+)*(?![A-Za-z])")
_AGE = re.compile(r"[\d零一二两三四五六七八九十]\s*岁")
_NUMBER_TERM = re.compile(r"\d+|[零一二两三四五六七八九十百千万亿]+[人岁天个周年月次场位]?")

# Function words only: unlike the classifier's list, words such as "decided", "tomorrow"
# or "需要" can be exactly what a recall asks about.
_EN_STOP = word_set("""
a an the and or but if of to in on at by for with from as am is are was were be been being
do does did done have has had having i you he she it we they me him her us them my your
his its our their this that these those what when where which who whom whose why how not
no so than too very can could will would should shall may might must just also about into
over after before up down out off then once here there all any both each few more most
other some such only own same s t d ll m re ve yes oh ok okay well really like get got
gets go going went lot much many ever anything something thing things kind one ones
tell told know think say said remember recall again
""")
_ZH_STOP = word_set("""
的 了 是 在 我 你 他 她 它 我们 你们 他们 她们 这 那 这个 那个 这些 那些 哪 哪个 哪些
哪天 哪里 什么 怎么 怎么样 为什么 吗 呢 吧 啊 呀 哦 嗯 和 与 跟 及 或 或者 就 都 也 还
又 很 太 最 更 一个 一些 有 没有 没 不 要 会 能 可以 对 把 被 给 让 从 到 向 上 下 中
里 个 们 着 过 得 地 之 其 而 并 但 但是 如果 因为 所以 是不是 有没有 多少 几 请问 请
一下 告诉 知道 记得 还记得 问 问题 想 想问 说 说过 之前 以前 刚才 上次
""")


# The reviewed word lists (data, not code): groups of words that name the same attribute
# (年龄 ~ 岁, father ~ dad) and kinds with their members (家电: 洗碗机 …). Each file says
# the user scenario it serves and its review rule.
_DATA = Path(__file__).with_name("data")


def _data_lines(name: str) -> list[str]:
    text = (_DATA / name).read_text(encoding="utf-8")
    return [line.split("#", 1)[0].rstrip() for line in text.splitlines()
            if line.split("#", 1)[0].strip()]


@functools.cache
def data_sections(name: str) -> dict[str, list[str]]:
    """A data file of `[section]` headings, each followed by its lines (comments and blank
    lines dropped): turns.txt, changes.txt."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in _data_lines(name):
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        elif current is not None:
            current.append(line)
    return sections


def _parse_groups() -> dict[str, tuple[str, ...]]:
    forms: dict[str, tuple[str, ...]] = {}
    for line in _data_lines("equivalents.txt"):
        group = tuple(line.split())
        for word in group:
            forms[word] = group
    kinds_text = "\n".join(_data_lines("kinds.txt"))
    for kinds, members in re.findall(r"^(\S+):((?:.*\n?)(?:^ +.*\n?)*)", kinds_text,
                                     flags=re.MULTILINE):
        for kind in kinds.split("/"):  # "job/occupation": two names of one kind
            forms[kind] = tuple(dict.fromkeys([*forms.get(kind, (kind,)), *members.split()]))
    return forms


_EQUIVALENTS = _parse_groups()

_CJK_EQUIVALENT_WORDS = frozenset(w for w in _EQUIVALENTS if len(w) >= 2 and HAN_RUN.fullmatch(w))


def stem(word: str) -> str:
    # A light suffix strip, enough for "researched" ~ "research" and "groups" ~ "group";
    # a real stemmer would buy little here since matching is whole-word on both sides.
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@dataclass(frozen=True)
class QueryTerms:
    latin: frozenset[str]  # stemmed English words
    cjk: frozenset[str]  # Chinese words, matched as substrings
    # Chinese words outside the segmenter's dictionary that its HMM put together from single
    # characters: mostly names ("宋嘉树", "星光百货"), sometimes scaffolding ("更高"). They
    # count only where some candidate holds them (`Coverage`).
    guessed: frozenset[str] = frozenset()
    # Chinese words of one character ("买什么车": 买, 车): too common inside other words to be
    # found as substrings, so no term of a Chinese memory; an English memory holds them by
    # their translations (bilingual.py: 车 → car). They count only where some candidate
    # holds them (`Coverage`), and alone they are no term to search for (`bool`).
    glossed: frozenset[str] = frozenset()
    # English words of a name spelled in pinyin, with the name ("Xiao Zhang": (xiao,
    # xiaozhang), (zhang, xiaozhang)): a Chinese text that reads so holds them
    # (bilingual.py).
    spelled: frozenset[tuple[str, str]] = frozenset()
    # English words of a phrase the dictionary translates as a whole, with a Chinese form
    # of it ("next week": (next, 下周), (week, 下周), ...): a Chinese text holding the form
    # holds them (bilingual.py, `phrase_forms`).
    phrased: frozenset[tuple[str, str]] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.latin or self.cjk or self.guessed)

    def without(self, words: frozenset[str]) -> QueryTerms:
        return QueryTerms(latin=self.latin - words, cjk=self.cjk - words,
                          guessed=self.guessed - words, glossed=self.glossed - words,
                          spelled=frozenset(p for p in self.spelled if p[0] not in words),
                          phrased=frozenset(p for p in self.phrased if p[0] not in words))

    def merged(self, other: QueryTerms) -> QueryTerms:
        return QueryTerms(latin=self.latin | other.latin, cjk=self.cjk | other.cjk,
                          guessed=self.guessed | other.guessed,
                          glossed=self.glossed | other.glossed,
                          spelled=self.spelled | other.spelled,
                          phrased=self.phrased | other.phrased)

    def only(self, words: frozenset[str]) -> QueryTerms:
        return QueryTerms(latin=self.latin & words, cjk=self.cjk & words,
                          guessed=self.guessed & words, glossed=self.glossed & words,
                          spelled=frozenset(p for p in self.spelled if p[0] in words),
                          phrased=frozenset(p for p in self.phrased if p[0] in words))

    def names(self) -> frozenset[str]:
        return self.latin | self.cjk | self.guessed | self.glossed

    def translations(self) -> list[str]:
        """The terms' forms in the other language (bilingual.py), for the full-text search:
        "hotpot" → 火锅, 锅子; 房租 → rent; 王磊 → wang lei."""
        return list(dict.fromkeys([
            *(f for t in sorted(self.latin) for f in bilingual.chinese_forms(t)),
            *(f for _, f in sorted(self.phrased)),
            *(f for t in sorted(self.cjk | self.glossed)
              for f in bilingual.english_forms(t)),
            *(f for t in sorted(self.cjk | self.guessed) for f in bilingual.readings_of(t))]))

    def without_numbers(self) -> QueryTerms:
        """The terms without numbers ("40", "五百人"): the values a counting question
        compares against, which the memories it needs mostly do not hold."""
        return self.without(frozenset(
            t for t in self.latin | self.cjk | self.guessed if _NUMBER_TERM.fullmatch(t)))


def latin_words(text: str) -> set[str]:
    words = set()
    for raw in _LATIN_WORD.findall(text.lower()):
        word = raw.split("'")[0]  # "caroline's" -> "caroline"
        if not word or word in _EN_STOP or (word.isdigit() and len(word) < 2):
            continue
        number = _NUMBER_WITH_UNIT.fullmatch(word)
        # "173cm" as 173, which also finds "173厘米" and "173 cm" (terms match word starts).
        words.add(number.group(1) if number else stem(word))
    return words


@functools.lru_cache(maxsize=4096)
def query_terms(text: str) -> QueryTerms:
    """The English and Chinese terms of a query (or of a memory's text: supersession reads
    the candidates' terms on every recall, and the same memories come back recall after
    recall; segmenting them again was most of the order stage on Chinese text). Cached per
    process: the result is immutable and jieba's dictionary never changes at run time."""
    cjk: set[str] = set()
    guessed: set[str] = set()
    glossed: set[str] = set()
    runs = HAN_RUN.findall(text)
    if runs:
        warm_up()
        for run in runs:
            for word in jieba.cut_for_search(run, HMM=False):
                if word in _ZH_STOP:
                    continue
                (cjk if len(word) >= 2 else glossed).add(word)
            # The dictionary segmentation leaves a name it does not know as single
            # characters ("宋嘉树和林婉清" → 宋 嘉 树 和 林 婉 清), which carry no term at
            # all. A guess that starts or ends with a function word ("我用", "更高") is the
            # HMM gluing scaffolding together, not a name.
            for word in jieba.cut(run, HMM=True):
                if len(word) >= 2 and word not in _ZH_STOP and word[0] not in _ZH_STOP \
                        and word[-1] not in _ZH_STOP \
                        and word not in cjk and not any(word in w for w in cjk):
                    guessed.add(word)
            # An attribute named in a compound the segmenter splits ("教育背景" → 教育, 背景)
            # counts as one term, not as its parts, so that its equivalents can match.
            named = {w for w in _CJK_EQUIVALENT_WORDS if w in run}
            cjk = {t for t in cjk if not any(t != w and t in w for w in named)} | named
    if _AGE.search(text):  # "40岁以下": the age, though no word names it
        cjk.add("年龄")
    without_han = HAN_RUN.sub(" ", text)
    latin = latin_words(without_han)
    spelled = set()
    for run in _CAPITALISED_RUN.findall(text):
        words = run.split()
        name = bilingual.pinyin_name(words)
        if name is not None:
            spelled |= {(term, name) for w in words if (term := stem(w.lower())) in latin}
    return QueryTerms(latin=frozenset(latin), cjk=frozenset(cjk),
                      guessed=frozenset(guessed - cjk), glossed=frozenset(glossed),
                      spelled=frozenset(spelled), phrased=_phrased(without_han, latin))


def _phrased(text: str, latin: set[str]) -> frozenset[tuple[str, str]]:
    """(term, Chinese form) for each run of two or three English words in `text` (its
    Chinese taken out) that the dictionary translates as a whole (`QueryTerms.phrased`),
    the longest run first."""
    words = [stem(w.split("'")[0]) for w in _LATIN_WORD.findall(text.lower())]
    found: set[tuple[str, str]] = set()
    covered: set[int] = set()
    for size in (3, 2):
        for start in range(len(words) - size + 1):
            span = range(start, start + size)
            if covered.intersection(span):
                continue
            forms = bilingual.phrase_forms(" ".join(words[start:start + size]))
            if forms:
                covered.update(span)
                found |= {(words[i], form) for i in span if words[i] in latin for form in forms}
    return frozenset(found)


_LATIN_LETTER = re.compile(r"[A-Za-z]")


def in_another_script(terms: QueryTerms, text: str) -> bool:
    """No term of the query can occur in `text`: the query's words are all English and the
    text (role labels aside) has no Latin letter, or they are all Chinese and the text has
    no Chinese character. "what is the name of my cat" against "我家的猫叫小白": its keyword
    part is 0 by construction, not because the memory is about something else."""
    if not terms:
        return False
    content = ROLE_LABEL_RE.sub("", text)
    if terms.latin and not (terms.cjk or terms.guessed):
        return not _LATIN_LETTER.search(content)
    if not terms.latin:
        return not has_han(content)
    return False


def idf(documents: int, holding: int) -> float:
    """BM25's inverse document frequency of a term `holding` of `documents` texts hold
    (at least one: a term none holds weighs like a rare one)."""
    holding = max(1, holding)
    return math.log(1 + (documents - holding + 0.5) / (holding + 0.5))


class Coverage:
    """The IDF-weighted share of the query's terms each of a set of texts contains (0–1).

    Built on the query's candidate memories, which are also the IDF corpus (see the module
    docstring); `share` then scores any other text, such as one line of a memory, with the
    same term weights.
    """

    def __init__(self, terms: QueryTerms, documents: Sequence[str], *,
                 equivalents: bool = False, drop_absent: bool = False,
                 across_languages: bool = False,
                 rows: Sequence[list[bool] | None] | None = None) -> None:
        """`rows`: which terms a document holds where that is already known (`only`,
        `rows_by`), for the terms in the same order; such a document is not read again."""
        def forms(term: str) -> tuple[str, ...]:
            return _EQUIVALENTS.get(term, (term,)) if equivalents else (term,)

        def across(term: str, cjk: bool) -> tuple[str, ...]:
            if not across_languages:
                return ()
            return bilingual.english_forms(term) or bilingual.readings_of(term) if cjk \
                else bilingual.chinese_forms(term)

        names_spelled: defaultdict[str, list[str]] = defaultdict(list)
        phrase_forms: defaultdict[str, list[str]] = defaultdict(list)
        if across_languages:
            for term, name in sorted(terms.spelled):
                names_spelled[term].append(name)
            for term, form in sorted(terms.phrased):
                phrase_forms[term].append(form)

        self._equivalents, self._drop_absent = equivalents, drop_absent
        self._across_languages = across_languages
        self._documents = documents
        self._names = _ordered(terms)
        # Each term's forms matched as substrings and those matched at a word's start: its
        # Chinese forms and its English ones, its translations among them (bilingual.py).
        self._terms: list[_Forms] = \
            [_forms((*across(t, False), *phrase_forms[t]), forms(t), tuple(names_spelled[t]))
             for t in sorted(terms.latin)] + \
            [_forms(forms(t), across(t, True)) for t in sorted(terms.cjk)] + \
            [_forms((t,), bilingual.readings_of(t) if across_languages else ())
             for t in sorted(terms.guessed)] + \
            [_forms((), across(t, True)) for t in sorted(terms.glossed)]
        first_guessed = len(terms.latin) + len(terms.cjk)
        self._latin: re.Pattern[str] | None = None
        words = {w for _, _, group, _ in self._terms for w in group}
        if words:
            # One regex pass per text instead of tokenizing it in Python (the hot spot of a
            # recall): an English term matches a word that starts with it ("research" finds
            # "researched"), which is what the light stemming on the query side aims at.
            alternatives = "|".join(re.escape(t) for t in sorted(words, key=len, reverse=True))
            self._latin = re.compile(rf"(?<![a-z0-9])(?:{alternatives})")
        known = rows if rows is not None else [None] * len(documents)
        read = iter(_holding([d for d, row in zip(documents, known, strict=True) if row is None],
                             self._terms, self._latin))
        present = [next(read) if row is None else row for row in known]
        n = len(present)
        self._weights: list[float] = []
        absent = []
        # How many of the documents hold each term, by its name (none without documents).
        self.holding: dict[str, int] = dict.fromkeys(self._names, 0)
        for i, column in enumerate(zip(*present, strict=True) if present else ()):
            held = sum(column)
            self.holding[self._names[i]] = held
            if not held:
                absent.append(self._names[i])
            # A term no candidate holds weighs like a rare one, not more: it cannot tell the
            # candidates apart, and it is as often the question's scaffolding ("安排",
            # "scheduled") as something the store lacks. A guessed word no candidate holds
            # weighs nothing (it was no term before the guess), nor does a one-character
            # word no candidate holds by its translation, nor any absent term
            # with `drop_absent` (a counting question's condition: "超过", "以下").
            if (drop_absent or i >= first_guessed) and not held:
                self._weights.append(0.0)
                continue
            self._weights.append(idf(n, held))
        self._total = sum(self._weights)
        self._rows = present
        # Most documents of a large set (a namespace's pending messages) hold no term.
        self.scores = [self._share(row) if any(row) else 0.0 for row in present]
        self.absent = frozenset(absent)  # the query's terms no document holds

    def only(self, terms: QueryTerms) -> Coverage:
        """The same documents weighed over only `terms` (a subset of this one's), from
        what each document was found to hold: no second reading of them."""
        column = {name: i for i, name in enumerate(self._names)}
        keep = [column[name] for name in _ordered(terms)]
        return Coverage(terms, self._documents, equivalents=self._equivalents,
                        drop_absent=self._drop_absent, across_languages=self._across_languages,
                        rows=[[row[i] for i in keep] for row in self._rows])

    def rows_by(self, keys: Sequence[str]) -> dict[str, list[bool]]:
        """Which terms each document holds, by the documents' keys (in their order): for a
        `Coverage` of the same terms over some of the same documents (`rows`)."""
        return dict(zip(keys, self._rows, strict=True))

    def _present(self, text: str) -> list[bool]:
        """Which of the query's terms `text` holds."""
        return _holds(text, self._terms, self._latin)

    def _share(self, row: Sequence[bool]) -> float:
        if self._total <= 0:
            return 0.0
        return sum(w for w, hit in zip(self._weights, row, strict=True) if hit) / self._total

    def share(self, text: str) -> float:
        """The share of the query's terms in `text`, weighted as over the candidates."""
        if not self._weights:
            return 0.0
        return self._share(self._present(text))

    def best_part_share(self, index: int, parts: Sequence[str]) -> float:
        """The largest share any one of `parts` holds, where the parts (a memory's lines)
        are pieces of document `index`: the same as the best `share(part)`, but a part can
        only hold terms its document holds, so only those are looked for. A recall asks this
        of every candidate memory, once per line: looking for every term was its cost."""
        held = [i for i, hit in enumerate(self._rows[index]) if hit and self._weights[i] > 0]
        if not held:
            return 0.0
        # The held terms and their regex are picked once per memory, not once per line.
        terms = [self._terms[i] for i in held]
        latin = self._latin if any(words for _, _, words, _ in terms) else None
        rows = (_holds(part, terms, latin) for part in parts)
        best = max((sum(self._weights[i] for i, hit in zip(held, row, strict=True) if hit)
                    for row in rows), default=0.0)
        return best / self._total

    def held_share(self, text: str) -> float:
        """The share in `text` of the query's terms that some document holds: without the
        words of the question that no candidate has (scaffolding, or an attribute the
        memories word otherwise: 年龄 asked, 岁 stated)."""
        row = self._present(text)
        held = [(w, hit) for name, w, hit in zip(self._names, self._weights, row, strict=True)
                if name not in self.absent]
        total = sum(w for w, _ in held)
        return sum(w for w, hit in held if hit) / total if total > 0 else 0.0


# A term's forms as `Coverage` keeps them: matched as substrings, those with a Chinese
# character apart (no use looking for them in a text without one), then matched at a word's
# start, then the pinyin names it is part of (`bilingual.spells`, in a Chinese text).
_Forms = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def _forms(substrings: tuple[str, ...], words: tuple[str, ...],
           spelled: tuple[str, ...] = ()) -> _Forms:
    chinese = tuple(s for s in substrings if has_han(s))
    return chinese, tuple(s for s in substrings if not has_han(s)), words, spelled


def _holds(text: str, terms: Sequence[_Forms], latin: re.Pattern[str] | None) -> list[bool]:
    """Which of `terms` `text` holds; `latin` finds their word forms at a word's start.

    An English term's Chinese translations are many (bilingual.py: a dozen for "time"), and
    looking for each in a long English memory was most of a recall's scoring: they are
    looked for only in a text with a Chinese character."""
    lowered = text.lower()
    found = set(latin.findall(lowered)) if latin else set()
    chinese_text = has_han(lowered)
    return [not found.isdisjoint(words)
            or (chinese_text and bool(chinese) and any(t in lowered for t in chinese))
            or (bool(others) and any(t in lowered for t in others))
            or (chinese_text and bool(spelled)
                and any(bilingual.spells(lowered, n) for n in spelled))
            for chinese, others, words, spelled in terms]


class _Joined:
    """Some of a set of texts joined into one string, to find which of them hold a form
    with a few passes of `str.find` over all of them, not a search in each."""

    # Joins them: no form holds it, so no match spans two texts.
    _APART = "\x00"

    def __init__(self, texts: Sequence[str], indices: Sequence[int]) -> None:
        self._indices = indices
        self._joined = self._APART.join(texts[i] for i in indices)
        self._starts = list(itertools.accumulate(
            (len(texts[i]) + len(self._APART) for i in indices[:-1]), initial=0))

    def holding(self, form: str) -> set[int]:
        """The indices of the texts that hold `form`."""
        held: set[int] = set()
        at = self._joined.find(form) if self._indices else -1
        while at >= 0:
            k = bisect.bisect_right(self._starts, at) - 1
            held.add(self._indices[k])
            at = self._joined.find(form, self._starts[k + 1]) if k + 1 < len(self._starts) \
                else -1
        return held


def _holding(texts: Sequence[str], terms: Sequence[_Forms], latin: re.Pattern[str] | None
             ) -> list[list[bool]]:
    """`_holds` of each of `texts`, with each substring form of a term looked for once in
    all of them, not in each: the same rows, at a few passes over the texts. A recall
    scores every pending message of the namespace by the question's words, twice with a
    hop (pending.py): looking for each term in each message was its cost under an ingest."""
    lowered = [text.lower() for text in texts]
    by_word: defaultdict[str, set[int]] = defaultdict(set)
    if latin is not None:
        for index, text in enumerate(lowered):
            for word in set(latin.findall(text)):
                by_word[word].add(index)
    every = _Joined(lowered, range(len(lowered)))
    # As `_holds`: a Chinese form only in a text with a Chinese character.
    chinese_texts = _Joined(lowered, [i for i, text in enumerate(lowered) if has_han(text)])
    rows = [[False] * len(terms) for _ in texts]
    for column, (chinese, others, words, spelled) in enumerate(terms):
        held = set().union(*(by_word.get(w, ()) for w in words),
                           *(chinese_texts.holding(s) for s in chinese),
                           *(every.holding(s) for s in others),
                           *({i for i, text in enumerate(lowered)
                              if has_han(text) and bilingual.spells(text, n)}
                             for n in spelled))
        for index in held:
            rows[index][column] = True
    return rows


def _ordered(terms: QueryTerms) -> list[str]:
    """A query's term names in `Coverage`'s column order."""
    return [*sorted(terms.latin), *sorted(terms.cjk), *sorted(terms.guessed),
            *sorted(terms.glossed)]


def coverage(terms: QueryTerms, documents: Sequence[str]) -> list[float]:
    """For each document, the IDF-weighted share of the query terms it contains (0–1).

    The documents are also the IDF corpus (see the module docstring). Empty query terms:
    every coverage is 0.
    """
    if not terms or not documents:
        return [0.0] * len(documents)
    return Coverage(terms, documents).scores
