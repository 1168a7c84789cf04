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
(`_EQUIVALENT_GROUPS`: 年龄 ~ 岁, 教育背景 ~ 学历, birthday ~ born), the paraphrases a user
makes most between stating a fact and asking about it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import jieba

from app.classify.entities import warm_up
from app.classify.stopwords import word_set

_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_LATIN_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

# Function words only: unlike the classifier's list, words such as "decided", "tomorrow"
# or "需要" can be exactly what a recall asks about.
_EN_STOP = word_set("""
a an the and or but if of to in on at by for with from as is are was were be been being
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


# Ways to name the same personal attribute, which the bundled English-centred model cannot
# tell are related in Chinese ("我姑妈多大了" vs "我的姑妈今年六十一岁了"). A query term in a
# group matches a memory holding any word of its group. Kept to attributes people state
# about themselves and others, where the words differ but the question is the same.
_EQUIVALENT_GROUPS = """
年龄 年纪 多大 岁
名字 姓名 名叫 叫
家乡 老家 籍贯 来自
电话 手机号 联系电话 电话号码 号码
邮箱 邮箱地址 电子邮件 邮件
学历 教育背景 毕业
爱好 兴趣 兴趣爱好 喜欢
身高 多高 厘米
生日 过生日 出生
单位 工作单位 公司
age old
birthday born
phone number mobile
email mail
hobby hobbies enjoy
hometown grew
"""
_EQUIVALENTS: dict[str, tuple[str, ...]] = {
    word: tuple(group) for group in (line.split() for line in _EQUIVALENT_GROUPS.strip()
                                     .splitlines()) for word in group}

_CJK_EQUIVALENT_WORDS = frozenset(w for w in _EQUIVALENTS if len(w) >= 2 and _CJK_RUN.fullmatch(w))


def _stem(word: str) -> str:
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
    # characters: mostly names ("张伟", "大润发"), sometimes scaffolding ("更高"). They
    # count only where some candidate holds them (`Coverage`).
    guessed: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.latin or self.cjk or self.guessed)


def latin_words(text: str) -> set[str]:
    words = set()
    for raw in _LATIN_WORD.findall(text.lower()):
        word = raw.split("'")[0]  # "caroline's" -> "caroline"
        if not word or word in _EN_STOP or (word.isdigit() and len(word) < 2):
            continue
        words.add(_stem(word))
    return words


def query_terms(text: str) -> QueryTerms:
    """The English and Chinese terms of a query."""
    cjk: set[str] = set()
    guessed: set[str] = set()
    runs = _CJK_RUN.findall(text)
    if runs:
        warm_up()
        for run in runs:
            for word in jieba.cut_for_search(run, HMM=False):
                if len(word) >= 2 and word not in _ZH_STOP:
                    cjk.add(word)
            # The dictionary segmentation leaves a name it does not know as single
            # characters ("张伟和王宇" → 张 伟 和 王 宇), which carry no term at all.
            for word in jieba.cut(run, HMM=True):
                if len(word) >= 2 and word not in _ZH_STOP and word not in cjk \
                        and not any(word in w for w in cjk):
                    guessed.add(word)
            # An attribute named in a compound the segmenter splits ("教育背景" → 教育, 背景)
            # counts as one term, not as its parts, so that its equivalents can match.
            named = {w for w in _CJK_EQUIVALENT_WORDS if w in run}
            cjk = {t for t in cjk if not any(t != w and t in w for w in named)} | named
    latin = latin_words(_CJK_RUN.sub(" ", text))
    return QueryTerms(latin=frozenset(latin), cjk=frozenset(cjk),
                      guessed=frozenset(guessed - cjk))


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


class Coverage:
    """The IDF-weighted share of the query's terms each of a set of texts contains (0–1).

    Built on the query's candidate memories, which are also the IDF corpus (see the module
    docstring); `share` then scores any other text, such as one line of a memory, with the
    same term weights.
    """

    def __init__(self, terms: QueryTerms, documents: Sequence[str], *,
                 equivalents: bool = False) -> None:
        def forms(term: str) -> tuple[str, ...]:
            return _EQUIVALENTS.get(term, (term,)) if equivalents else (term,)

        self._terms = [(forms(t), False) for t in sorted(terms.latin)] + \
            [(forms(t), True) for t in sorted(terms.cjk)] + \
            [((t,), True) for t in sorted(terms.guessed)]
        first_guessed = len(self._terms) - len(terms.guessed)
        self._latin: re.Pattern[str] | None = None
        if terms.latin:
            # One regex pass per text instead of tokenizing it in Python (the hot spot of a
            # recall): an English term matches a word that starts with it ("research" finds
            # "researched"), which is what the light stemming on the query side aims at.
            words = {w for group, cjk in self._terms if not cjk for w in group}
            alternatives = "|".join(re.escape(t) for t in sorted(words, key=len, reverse=True))
            self._latin = re.compile(rf"(?<![a-z0-9])(?:{alternatives})")
        present = [self._present(d) for d in documents]
        n = len(documents)
        self._weights: list[float] = []
        for i, column in enumerate(zip(*present, strict=True) if present else ()):
            # A term no candidate holds weighs like a rare one, not more: it cannot tell the
            # candidates apart, and it is as often the question's scaffolding ("安排",
            # "scheduled") as something the store lacks. A guessed word no candidate holds
            # weighs nothing: it was no term before the guess.
            if i >= first_guessed and not any(column):
                self._weights.append(0.0)
                continue
            df = max(1, sum(column))
            self._weights.append(math.log(1 + (n - df + 0.5) / (df + 0.5)))
        self._total = sum(self._weights)
        self.scores = [self._share(row) for row in present]

    def _present(self, text: str) -> list[bool]:
        lowered = text.lower()
        found = set(self._latin.findall(lowered)) if self._latin else set()
        return [any((t in lowered) if cjk else (t in found) for t in group)
                for group, cjk in self._terms]

    def _share(self, row: Sequence[bool]) -> float:
        if self._total <= 0:
            return 0.0
        return sum(w for w, hit in zip(self._weights, row, strict=True) if hit) / self._total

    def share(self, text: str) -> float:
        """The share of the query's terms in `text`, weighted as over the candidates."""
        if not self._weights:
            return 0.0
        return self._share(self._present(text))


def coverage(terms: QueryTerms, documents: Sequence[str]) -> list[float]:
    """For each document, the IDF-weighted share of the query terms it contains (0–1).

    The documents are also the IDF corpus (see the module docstring). Empty query terms:
    every coverage is 0.
    """
    if not terms or not documents:
        return [0.0] * len(documents)
    return Coverage(terms, documents).scores
