"""Chinese names of people, places and organisations, from jieba's part-of-speech tags.

jieba's dictionary tags persons (``nr``, ``nrfg``, ``nrt``), places (``ns``) and organisations
(``nt``), but two things keep those tags from being used as they come:

* many everyday words carry them (明白 and 师傅 are ``nr``, 城市 and 哥哥 are ``ns``), nearly
  all among the dictionary's frequent words, while the names people mention in chat are rare
  there or missing. So a frequent word tagged as a person must also start with a family name,
  and a frequent "place" must be a well-known place (``data/zh_places.txt``) or end in an
  administrative suffix; ``nz`` (other proper) is left out: it holds chemistry terms and
  idioms more than names;
* most people's names are not in the dictionary at all: "张伟" is cut into 张 + 伟. A family
  name (``data/zh_surnames.txt``) opening a run of single characters is given to jieba's
  name-aware HMM (the one its own HMM mode runs, here only on that short run), and the word
  it finds there is the name; "小王" and "老李" are names too.

A name (or characters jieba does not know) right before an institution or event word
(``data/zh_name_suffixes.txt``: 大会, 医院 …) is one name with it: 云栖大会, 协和医院.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import jieba
import jieba.finalseg

from app.classify.wordlists import word_set

__all__ = ["NAME_TAGS", "OTHER_TAG", "name_tags", "names_in", "tagged"]

SURNAMES: Final = word_set("zh_surnames.txt")
PLACES: Final = word_set("zh_places.txt")
NAME_SUFFIXES: Final = word_set("zh_name_suffixes.txt")

# Dictionary frequency at and above which a word tagged as a person or a place is more
# likely an everyday word (明白 10,875, 城市 25,084) than a name (李娜 438, 阿里巴巴 82).
_COMMON_PERSON_FREQ: Final = 1000
_COMMON_PLACE_FREQ: Final = 400
_PERSON_TAGS: Final = frozenset({"nr", "nrfg"})
# The part-of-speech tags names are read from: persons, transliterated names, places,
# organisations, and the measure word that tells 张 in 一张纸 from a family name.
NAME_TAGS: Final = frozenset({*_PERSON_TAGS, "nrt", "ns", "nt", "q"})
# The tag of every other word (jieba's own tag for a word its dictionary does not tag).
OTHER_TAG: Final = "x"
_ADMIN_SUFFIXES: Final = frozenset("省市县区镇乡村")
# "一张纸", "那张票", "买了张票": 张 is a measure word there, not a family name.
_BEFORE_MEASURE: Final = frozenset("一二三四五六七八九十两几这那哪每某半了")
_FAMILIAR: Final = frozenset("小老")
# Function words and the commonest verbs, which no name is made of: what jieba's HMM joins
# to a family name or an institution word across one of these is not a name ("周会",
# "这周好", "不订酒店").
_NOT_IN_NAMES: Final = frozenset(
    "的了着过在是不没也都就还又很太更最要会能可该想让叫请说问去来到回把被给对从和跟与同"
    "吗呢吧啊呀嘛哦好个些只每几多少这那哪我你他她它们有等先再才已正点次天年月日号周"
)
# Given names have one or two characters.
_MAX_NAME_CHARS: Final = 4


@functools.cache
def name_tags() -> dict[str, str]:
    """jieba's dictionary words tagged with one of `NAME_TAGS`, with their tag.

    Read from jieba's own dictionary file ("word frequency tag" a line), as `jieba.posseg`
    reads it, but only these ~100k of its 349k words: posseg's full table is ~40 MB of a
    server's memory from its first import, for tags nothing here reads. A compression pass
    still imports posseg for its triples (app/compression/triples.py)."""
    table: dict[str, str] = {}
    with jieba.dt.get_dict_file() as lines:
        for line in lines:
            word, _, tag = line.decode("utf-8").split()
            if tag in NAME_TAGS:
                table[word] = sys.intern(tag)
    return table


def tagged(words: Iterable[str]) -> list[tuple[str, str]]:
    """`words` with the tag `names_in` reads: jieba's for a word it tags as a name or a
    measure word, `OTHER_TAG` for every other word."""
    tags = name_tags()
    return [(word, tags.get(word, OTHER_TAG)) for word in words]


def _is_surname_start(word: str) -> bool:
    return word[:2] in SURNAMES or word[:1] in SURNAMES


def _dictionary_name(word: str, tag: str) -> bool:
    """Whether a dictionary word with jieba's tag `tag` is a name."""
    if len(word) < 2:
        return False
    freq: int = jieba.dt.FREQ.get(word, 0)
    if tag in _PERSON_TAGS:
        familiar = word[0] in _FAMILIAR and word[1:] in SURNAMES
        return freq < _COMMON_PERSON_FREQ and len(word) <= _MAX_NAME_CHARS and (
            familiar or (_is_surname_start(word) and word[0] != word[1]))
    if tag == "nrt":  # transliterated names and brands: 丽莎, 阿里巴巴
        return freq < _COMMON_PERSON_FREQ
    if word[0] == word[1] and tag != "nrt":  # 拜拜, 哥哥: a given name (娜娜) is nrt
        return False
    if tag == "ns":
        return (freq < _COMMON_PLACE_FREQ or word in PLACES
                or (len(word) >= 3 and word[-1] in _ADMIN_SUFFIXES))
    return tag == "nt"


def _single_run(tokens: Sequence[tuple[str, str]], start: int) -> str:
    """The single-character tokens from `start` on, joined (what jieba's HMM would read)."""
    chars = []
    for word, _ in tokens[start:start + _MAX_NAME_CHARS]:
        if len(word) != 1:
            break
        chars.append(word)
    return "".join(chars)


def _person_at(tokens: Sequence[tuple[str, str]], i: int, before: str) -> str | None:
    """A name that jieba's dictionary does not know, starting at token `i`."""
    word, tag = tokens[i]
    following = tokens[i + 1][0] if i + 1 < len(tokens) else ""
    if word in _FAMILIAR and following in SURNAMES and len(following) == 1:
        return word + following  # 小王, 老李
    if len(word) == 2 and word[0] in _FAMILIAR and word[1] in SURNAMES:
        return word  # 老张 as one dictionary word
    if word not in SURNAMES or (tag == "q" and before in _BEFORE_MEASURE):
        return None
    if len(word) == 2:  # a compound family name: 欧阳 + 娜娜
        given = following if len(following) <= 2 and following not in NAME_SUFFIXES else ""
        return word + given if given else None
    run = _single_run(tokens, i)
    if len(run) < 2:
        return None
    first = next(iter(jieba.finalseg.cut(run)), "")
    if not 2 <= len(first) <= 3 or first[0] != word or _NOT_IN_NAMES.intersection(first[1:]):
        return None
    return first


def _unknown_before(tokens: Sequence[tuple[str, str]], end: int, floor: int) -> str | None:
    """The last word jieba's HMM finds in the single characters just before `end`."""
    start = end
    while start > floor and len(tokens[start - 1][0]) == 1:
        start -= 1
    run = "".join(word for word, _ in tokens[start:end])
    if len(run) < 2:
        return None
    last = list(jieba.finalseg.cut(run))[-1]
    return last if len(last) >= 2 and not _NOT_IN_NAMES.intersection(last) else None


def names_in(tokens: Sequence[tuple[str, str]]) -> Iterator[tuple[int, str]]:
    """The names in one run of Chinese, cut by jieba into (word, tag) pairs.

    Yields each name with its offset (in characters) from the start of the run.
    """
    offsets = [0]
    for word, _ in tokens:
        offsets.append(offsets[-1] + len(word))
    i = 0
    taken = 0  # tokens before this index are part of a name already
    while i < len(tokens):
        word, tag = tokens[i]
        before = tokens[i - 1][0][-1] if i else ""
        # A family name first: 欧阳 alone is also a place in jieba's dictionary.
        name = _person_at(tokens, i, before)
        if name is None and _dictionary_name(word, tag):
            name = word
        if name is None and word in NAME_SUFFIXES:
            unknown = _unknown_before(tokens, i, taken)
            if unknown is not None:
                yield offsets[i] - len(unknown), unknown + word
                i, taken = i + 1, i + 1
                continue
        if name is None:
            i += 1
            continue
        start = offsets[i]
        # Advance past the tokens the name covers (a name from the HMM spans several).
        j = i
        while j < len(tokens) and offsets[j + 1] - start <= len(name):
            j += 1
        j = max(j, i + 1)
        while j < len(tokens) and tokens[j][0] in NAME_SUFFIXES:
            name += tokens[j][0]
            j += 1
        yield start, name
        i = taken = j
