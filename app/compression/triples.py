"""The low-precision form of a compressed memory: subject–verb–object triples.

Heuristic and bilingual; no parser is loaded. For each sentence:

* **English**: the verb is the first word found in a list of common verbs and their forms
  (or a regular past tense, "-ed"), together with the auxiliaries before it ("have been
  painting" → "painting", "didn't go" → "not go"); the subject is the nearest pronoun or
  name before it — "I" becomes the speaker's name — and the object the next few content
  words after it.
* **Chinese**: jieba's part-of-speech tags: the first verb (v*), the nearest noun, pronoun
  or name before it (我 → the speaker), and the nouns, numbers and times after it.

A sentence without a recognisable verb gives no triple. The result is one
`subject | verb | object` line per triple, at most about a quarter of the text's length:
when there are more, those naming the most entities and numbers are kept (in order). When
a memory yields none, a line of its key words is used instead. The full text is in
the archive, so this form only has to be good enough to recognise what the memory was about.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from app.classify.entities import warm_up
from app.classify.stopwords import EN_STOP_WORDS, word_set
from app.compression.text import content_tokens, sentences, split_speaker
from app.scripts import has_han

_BASE_VERBS: Final = word_set(
    """
    add agree allow answer apply arrive ask bake become begin believe borrow break bring build
    buy call care carry catch celebrate change check choose clean climb close collect come
    cook cost create cut dance decide deliver design destroy develop die discover discuss do
    draw dream drink drive drop eat enjoy explain fail fall feel fight find finish fix fly
    follow forget forgive get give go grow hate have hear help hike hold hope hurt import
    include join jump keep kill know launch learn leave lend let like listen live lose love
    make manage marry mean meet miss move need open order organize own paint pass pay pick
    plan plant play practice prefer prepare promise publish pull push put reach read receive
    recommend release remember rent repair report research rest return ride run save say see
    sell send set share show sing sit sleep speak spend start stay stop study support swim take
    talk teach tell test think throw travel try turn understand use visit volunteer wait walk
    want watch wear win wish work worry write adopt attend graduate migrate deploy store train
    """
)
_IRREGULAR: Final = word_set(
    """
    went gone came made took taken got gotten gave given saw seen found knew known thought told
    said felt left kept met ran bought brought built caught chose chosen cut drew drawn drank
    drove ate eaten fell fought flew forgot grew heard held hurt lent lost meant paid put read
    rode rose sang sat slept spoke spent stood swam taught thrown threw understood wore won
    wrote written began begun broke broken did done had lived
    """
)
_COPULA: Final = word_set("am is are was were be been being 'm 're 's")
_AUX: Final = word_set(
    "have has had do does did will would shall should can could may might must 've 'll 'd "
    "gonna wanna going to"
) | _COPULA
_NEGATION: Final = word_set("not n't never no")
_PRONOUNS: Final = word_set("i we you he she they it someone everyone nobody this that")
_WORD_RE: Final = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+(?:[.:/-]\d+)*")
_ZH_SUBJECT_FLAGS: Final = ("n", "r", "eng")  # not times: 昨天 is when, not who
_ZH_OBJECT_FLAGS: Final = ("n", "m", "q", "t", "eng", "a", "vn")
MAX_TRIPLES: Final = 12
MAX_OBJECT_WORDS: Final = 3
BUDGET_SHARE: Final = 0.25  # of the original length
MIN_BUDGET: Final = 40

Triple = tuple[str, str, str]


def _verb_forms() -> frozenset[str]:
    forms = set(_IRREGULAR)
    for verb in _BASE_VERBS:
        stem = verb[:-1] if verb.endswith("e") else verb
        forms |= {verb, verb + "s", verb + "es", stem + "ed", stem + "ing", verb + "ed",
                  verb + "ing", verb[:-1] + "ies" if verb.endswith("y") else verb,
                  verb[:-1] + "ied" if verb.endswith("y") else verb}
    return frozenset(forms)


_VERB_FORMS: Final = _verb_forms()


_ING_NOUNS: Final = word_set(
    "thing something nothing anything everything morning evening wedding ceiling during "
    "king ring spring string sibling darling pudding"
)
_CONTRACTED: Final = {"'m": "am", "'re": "are", "'s": "is", "'ve": "have", "'ll": "will",
                      "'d": "would"}


def _is_verb(word: str) -> bool:
    if word in _VERB_FORMS:
        return True
    # Regular forms of verbs not in the list ("planning", "volunteered").
    return len(word) > 5 and word not in EN_STOP_WORDS and (
        word.endswith("ed") or (word.endswith("ing") and word not in _ING_NOUNS))


def _english_triple(sentence: str, speaker: str) -> Triple | None:
    words = _WORD_RE.findall(sentence)
    lower = [w.lower().replace("’", "'") for w in words]
    # Split contractions so "I'm" and "didn't" read as subject + auxiliary.
    expanded: list[tuple[str, str]] = []
    for word, low in zip(words, lower, strict=True):
        for suffix in ("n't", "'m", "'re", "'s", "'ve", "'ll", "'d"):
            if low.endswith(suffix) and len(low) > len(suffix):
                expanded += [(word[: -len(suffix)], low[: -len(suffix)]), (suffix, suffix)]
                break
        else:
            expanded.append((word, low))
    verb_at = next((i for i, (_, low) in enumerate(expanded)
                    if _is_verb(low) and low not in _AUX), -1)
    copula_at = next((i for i, (_, low) in enumerate(expanded) if low in _COPULA), -1)
    if verb_at < 0 and copula_at < 0:
        return None
    if verb_at < 0 or (0 <= copula_at < verb_at - 2):
        verb_at = copula_at  # "the trip was amazing": copula + complement
    start = verb_at
    while start > 0 and (expanded[start - 1][1] in _AUX or expanded[start - 1][1] in _NEGATION):
        start -= 1
    negated = any(low in _NEGATION for _, low in expanded[start:verb_at])
    verb_word = expanded[verb_at][1]
    verb = ("not " if negated else "") + _CONTRACTED.get(verb_word, verb_word)
    subject = ""
    for word, low in reversed(expanded[:start]):
        if low in _PRONOUNS or (word[:1].isupper() and low not in EN_STOP_WORDS) or (
                low not in EN_STOP_WORDS and len(low) > 2):
            subject = word
            break
    if subject.lower() in ("i", "") and speaker:
        subject = speaker
    obj: list[str] = []
    for word, low in expanded[verb_at + 1:]:
        if low in ("and", "but", "because", "so", "which", "that") and obj:
            break
        if low.isdigit() or (low not in EN_STOP_WORDS and low not in _AUX and len(low) > 1):
            obj.append(word)
            if len(obj) == MAX_OBJECT_WORDS:
                break
    if not obj:  # "that's great" without its object says nothing worth keeping
        return None
    return subject or "?", verb, " ".join(obj)


def _chinese_triple(sentence: str, speaker: str) -> Triple | None:
    # Imported at the first Chinese triple, not with the app: jieba's part-of-speech tables
    # are ~52 MB resident, which a server that has not compressed yet need not hold.
    import jieba.posseg

    warm_up()
    pairs = [(p.word, p.flag) for p in jieba.posseg.lcut(sentence, HMM=False)]
    verb_at = next((i for i, (_, flag) in enumerate(pairs) if flag.startswith("v")
                    and flag != "vn"), -1)
    if verb_at < 0:
        return None
    subject = ""
    for word, flag in reversed(pairs[:verb_at]):
        if flag.startswith(_ZH_SUBJECT_FLAGS):
            subject = word
            break
    if subject in ("", "我") and speaker:
        subject = speaker
    obj: list[str] = []
    for word, flag in pairs[verb_at + 1:]:
        if flag == "x" and obj:
            break
        if flag.startswith(_ZH_OBJECT_FLAGS):
            obj.append(word)
            if len(obj) == MAX_OBJECT_WORDS:
                break
    if not obj:
        return None
    negated = verb_at > 0 and pairs[verb_at - 1][0] in ("不", "没", "没有", "别", "未")
    verb = ("不" if negated else "") + pairs[verb_at][0]
    return subject or "?", verb, "".join(obj)


def extract_triples(text: str) -> list[Triple]:
    """Subject–verb–object triples of a memory text, in order, without repeats."""
    found: list[Triple] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        speaker, content = split_speaker(line)
        for sentence in sentences(content):
            triple = (_chinese_triple(sentence, speaker) if has_han(sentence)
                      else _english_triple(sentence, speaker))
            if triple is not None and triple not in found:
                found.append(triple)
    return found


def _within_budget(triples: list[Triple], text: str, entities: Sequence[str]) -> list[Triple]:
    """The most specific triples that fit the budget, in their original order."""
    budget = max(MIN_BUDGET, int(BUDGET_SHARE * len(text)))

    def weight(triple: Triple) -> float:
        joined = " ".join(triple).casefold()
        named = sum(1 for e in entities if e.casefold() in joined)
        digits = sum(ch.isdigit() for ch in joined)
        return named * 2 + min(digits, 4) + len(triple[2]) / 40

    ranked = sorted(range(len(triples)), key=lambda i: -weight(triples[i]))
    kept: list[int] = []
    used = 0
    for i in ranked[:MAX_TRIPLES]:
        size = len(" | ".join(triples[i])) + 1
        if kept and used + size > budget:
            continue
        kept.append(i)
        used += size
    return [triples[i] for i in sorted(kept)]


def _keywords(text: str, limit: int = 8) -> str:
    words = list(dict.fromkeys(content_tokens(text)))[:limit]
    return "keywords: " + ", ".join(words) if words else text[:40]


def compress_text(text: str, *, entities: Sequence[str] = (), keep_relations: bool = False
                  ) -> str:
    """The triple form of `text`, always shorter than `text` (for non-trivial texts).

    Args:
        text: the memory's original text.
        entities: named entities of the memory (for `keep_relations`).
        keep_relations: keep every triple linking two entities, and add an
            `A ~ B` line for two entities named in one sentence that no triple links.
    """
    triples = _within_budget(extract_triples(text), text, entities)
    if keep_relations and entities:
        def mentions(value: str) -> list[str]:
            return [e for e in entities if e.casefold() in value.casefold()]

        linked = [t for t in triples if mentions(t[0]) and mentions(t[2])]
        rest = [t for t in triples if t not in linked]
        triples = linked + rest[: max(0, MAX_TRIPLES - len(linked))]
        lines = [" | ".join(t) for t in triples]
        for sentence in sentences(text):
            named = mentions(sentence)
            if len(named) >= 2 and not any(named[0] in t[0] + t[2] and named[1] in t[0] + t[2]
                                           for t in linked):
                lines.append(f"{named[0]} ~ {named[1]}")
        result = "\n".join(dict.fromkeys(lines))
    else:
        result = "\n".join(" | ".join(t) for t in triples[:MAX_TRIPLES])
    if not result or len(result) >= len(text):
        result = _keywords(text)
    if len(result) >= len(text):
        result = text[: max(1, len(text) // 2)]
    return result
