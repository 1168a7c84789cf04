"""The low-precision form of a compressed memory: subject–verb–object triples.

Heuristic and bilingual; no parser is loaded. For each sentence:

* **English**: the verb is the first word found in a list of common verbs and their forms
  (or a regular past tense, "-ed"), together with the auxiliaries before it ("have been
  painting" → "painting", "didn't go" → "not go"); the subject is the nearest pronoun or
  name before it — "I" becomes the speaker's name — and the object the next few content
  words after it.
* **Chinese**: jieba's part-of-speech tags: the first verb (v*), the nearest noun, pronoun
  or name before it (我 → the speaker), and the nouns, numbers and times after it.

A triple is kept only when it is **meaningful**: its verb is a real predicate (not a
copula, not a verb of thinking, seeming or knowing such as "think", "seem", 是, 觉得, 知道,
好像 — they frame a statement rather than make one), its subject is the speaker, a personal
pronoun, a name or a noun (not an adverb or a stray word: "mostly", 基本上), and its
object holds a noun, a name or a number (not only a time, an adjective or an adverb: 下午,
久). Each clause is tried in turn, so "是啊，我就慢慢走过来，顺便买了杯咖啡" gives
"user | 买 | 杯咖啡" from its third clause. A line without a meaningful triple is kept as it
was written ("阴天，不知道下午会不会下雨。" stays that sentence, not "阴天 | 不知道 | 下午").

The result is one item per triple or kept line, at most about a quarter of the text's
length: when there are more, those naming the most entities and numbers are kept (in
order). The full text is in the archive, so this form only has to be good enough to
recognise what the memory was about.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from app.classify.entities import warm_up
from app.classify.stopwords import EN_STOP_WORDS, word_set
from app.compression.text import content_tokens, is_content, sentences, split_speaker
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
# What makes an object a thing: a noun, a name, a verbal noun, an English word (LanceDB).
_ZH_NOUN_FLAGS: Final = ("n", "eng", "vn")
# Not real predicates: the copula and verbs that frame a statement (thinking, seeming,
# knowing, wanting, modals) rather than make one; the next verb of the clause is tried.
_LIGHT_EN: Final = word_set(
    "think thinks thought guess guessed suppose supposed know knows knew known seem seems "
    "seemed look looks looked feel feels felt mean means meant hope hoped wonder wondered"
) | _COPULA
_LIGHT_ZH: Final = frozenset((
    "是", "觉得", "感觉", "认为", "以为", "知道", "好像", "似乎", "像", "想", "看来", "估计",
    "猜", "会", "能", "能够", "可以", "要", "应该", "得", "不会", "可能", "不知道"))
_PERSONAL_EN: Final = word_set("i we you he she they")
_PERSONAL_ZH: Final = frozenset(("我", "我们", "你", "你们", "他", "她", "他们", "她们", "咱们",
                                 "大家"))
_DETERMINERS: Final = word_set("a an the my your his her our their this that these those")
# Objects that are only times say when, not what.
_EN_TIMES: Final = word_set(
    "today tomorrow tonight yesterday morning afternoon evening night later now soon week "
    "weekend month year day time while ago earlier"
)
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


def _expand(sentence: str) -> list[tuple[str, str]]:
    """(word, lower-case) pairs; contractions split so "I'm" and "didn't" read as subject +
    auxiliary."""
    expanded: list[tuple[str, str]] = []
    for word in _WORD_RE.findall(sentence):
        low = word.lower().replace("’", "'")
        for suffix in ("n't", "'m", "'re", "'s", "'ve", "'ll", "'d"):
            if low.endswith(suffix) and len(low) > len(suffix):
                expanded += [(word[: -len(suffix)], low[: -len(suffix)]), (suffix, suffix)]
                break
        else:
            expanded.append((word, low))
    return expanded


def _en_subject(before: list[tuple[str, str]], speaker: str) -> str:
    """The nearest personal pronoun, name or determined noun before the verb ("the cat",
    "my tea"); adverbs and stray words ("mostly", "slow") are passed over. The speaker when
    there is none (or it is "I")."""
    for i in range(len(before) - 1, -1, -1):
        word, low = before[i]
        determined = any(b[1] in _DETERMINERS or b[1].endswith("'s")
                         for b in before[max(0, i - 2): i])
        if low in _PERSONAL_EN:
            return speaker if low == "i" and speaker else word
        if low in EN_STOP_WORDS or low in _AUX or low.endswith("ly") or len(low) < 3:
            continue
        if (word[:1].isupper() and i > 0) or determined:
            return word
    return speaker


def _english_triple(sentence: str, speaker: str) -> Triple | None:
    expanded = _expand(sentence)
    for verb_at, (_, verb_word) in enumerate(expanded):
        if not _is_verb(verb_word) or verb_word in _AUX or verb_word in _LIGHT_EN:
            continue
        before = expanded[verb_at - 1] if verb_at else ("", "")
        if before[1] in _DETERMINERS or before[1].endswith("'s"):
            continue  # "a slow walk", "the painting": a noun, not a verb
        start = verb_at
        while start > 0 and (expanded[start - 1][1] in _AUX
                             or expanded[start - 1][1] in _NEGATION):
            start -= 1
        negated = any(low in _NEGATION for _, low in expanded[start:verb_at])
        subject = _en_subject(expanded[:start], speaker)
        obj: list[str] = []
        for word, low in expanded[verb_at + 1:]:
            if low in ("and", "but", "because", "so", "which", "that") and obj:
                break
            if low.isdigit() or (low not in EN_STOP_WORDS and low not in _AUX and len(low) > 1):
                obj.append(word)
                if len(obj) == MAX_OBJECT_WORDS:
                    break
        # An object of times only ("later today") or nothing says nothing worth keeping.
        if subject and any(w.isdigit() or w.lower() not in _EN_TIMES for w in obj):
            return subject, ("not " if negated else "") + verb_word, " ".join(obj)
    return None


def _zh_subject(before: list[tuple[str, str]]) -> str:
    """The subject of a Chinese clause: what comes before a preposition (在围墙上 is where,
    not who); a personal pronoun there, else the last noun (邻居家的猫 → 猫)."""
    cut = next((i for i, (_, flag) in enumerate(before) if flag == "p"), len(before))
    head = before[:cut]
    for i, (word, _) in enumerate(head):
        if word in _PERSONAL_ZH and (i + 1 == len(head) or head[i + 1][0] != "的"):
            return word
    for word, flag in reversed(head):
        if flag.startswith(_ZH_SUBJECT_FLAGS) and flag != "r" and is_content(word):
            return word
    return ""


def _chinese_triple(sentence: str, speaker: str) -> Triple | None:
    # Imported at the first Chinese triple, not with the app: jieba's part-of-speech tables
    # are ~52 MB resident, which a server that has not compressed yet need not hold.
    import jieba.posseg

    warm_up()
    pairs = [(p.word, p.flag) for p in jieba.posseg.lcut(sentence, HMM=False)]
    clauses: list[list[tuple[str, str]]] = [[]]
    for pair in pairs:
        if pair[1] == "x":
            clauses.append([])
        else:
            clauses[-1].append(pair)
    carried = ""  # a subject named once covers the clauses after it (我…，顺便买了杯咖啡)
    for clause in clauses:
        for verb_at, (verb_word, flag) in enumerate(clause):
            if not flag.startswith("v") or flag == "vn" or verb_word in _LIGHT_ZH:
                continue
            subject = _zh_subject(clause[:verb_at]) or carried
            if subject:
                carried = subject
            obj = [w for w, f in clause[verb_at + 1:] if f.startswith(_ZH_OBJECT_FLAGS)]
            obj = obj[:MAX_OBJECT_WORDS]
            nouns = [w for w, f in clause[verb_at + 1:]
                     if f.startswith(_ZH_NOUN_FLAGS) and is_content(w)]
            if not nouns:
                continue  # 走过来, 坐了很久, 不知道下午…: no thing done or named
            negated = verb_at > 0 and clause[verb_at - 1][0] in ("不", "没", "没有", "别", "未")
            who = speaker if subject in ("", "我") and speaker else subject
            if not who:
                continue
            return who, ("不" if negated else "") + verb_word, "".join(obj)
        carried = carried or _zh_subject(clause)
    return None


def _line_items(line: str) -> list[str]:
    """A line's meaningful triples, or the line itself when it has none."""
    speaker, content = split_speaker(line)
    found: list[str] = []
    for sentence in sentences(content):
        triple = (_chinese_triple(sentence, speaker) if has_han(sentence)
                  else _english_triple(sentence, speaker))
        if triple is not None:
            found.append(" | ".join(triple))
    if found:
        return found
    return [f"{speaker}: {content}" if speaker else content] if content else []


def extract_triples(text: str) -> list[Triple]:
    """Meaningful subject–verb–object triples of a memory text, in order, without repeats."""
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


def _within_budget(items: list[str], text: str, entities: Sequence[str]) -> list[str]:
    """The most specific items (triples, kept lines) that fit the budget, in order."""
    budget = max(MIN_BUDGET, int(BUDGET_SHARE * len(text)))

    def weight(item: str) -> float:
        joined = item.casefold()
        named = sum(1 for e in entities if e.casefold() in joined)
        digits = sum(ch.isdigit() for ch in joined)
        if " | " in item:
            return named * 2 + min(digits, 4) + len(item.split(" | ")[-1]) / 40
        # A kept line: by what it says (its distinct content words), not by its speaker's
        # name; a triple says as much in fewer characters, so it goes first at equal worth.
        return named * 2 + min(digits, 4) + min(1.0, len(set(content_tokens(item))) / 16)

    ranked = sorted(range(len(items)), key=lambda i: -weight(items[i]))
    kept: list[int] = []
    used = 0
    for i in ranked[:MAX_TRIPLES]:
        size = len(items[i]) + 1
        if kept and used + size > budget:
            continue
        kept.append(i)
        used += size
    return [items[i] for i in sorted(kept)]


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
    items = list(dict.fromkeys(i for line in text.splitlines() if line.strip()
                               for i in _line_items(line)))
    chosen = _within_budget(items, text, entities)
    if keep_relations and entities:
        def mentions(value: str) -> list[str]:
            return [e for e in entities if e.casefold() in value.casefold()]

        linked = [i for i in items if " | " in i
                  and mentions(i.split(" | ")[0]) and mentions(i.split(" | ")[-1])]
        rest = [i for i in chosen if i not in linked]
        lines = linked + rest[: max(0, MAX_TRIPLES - len(linked))]
        for sentence in sentences(text):
            named = mentions(sentence)
            if len(named) >= 2 and not any(named[0] in i and named[1] in i for i in linked):
                lines.append(f"{named[0]} ~ {named[1]}")
        result = "\n".join(dict.fromkeys(lines))
    else:
        result = "\n".join(chosen[:MAX_TRIPLES])
    if not result or len(result) >= len(text):
        result = _keywords(text)
    if len(result) >= len(text):
        result = text[: max(1, len(text) // 2)]
    return result
