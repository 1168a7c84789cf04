"""A memory's lines and who said them: what packing trims by and scoring reads per line.

A memory's text is one line per message ("role: content"). A speaker is the name a line's
content starts with ("user: Caroline: …", the shape of imports, group chats and transcripts),
else its role; a memory of one speaker's statements (notes, a list of facts) is packed and
ranked line by line, a dialogue as a whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.recall.candidates import Unit
from app.scripts import HAN, has_han
from app.storage.records import MemoryRecord

_ROLE_LINE = re.compile(r"\n(?=(?:user|assistant|system|tool): )")
# A speaker's name opening a message: up to three words (or a CJK name) and a colon.
_NAME_LABEL = re.compile(rf"([^\W\d_][\w.'-]*(?: [\w.'-]+){{0,2}}|[{HAN}]{{1,8}})(?:: |：)")
# A word character that is not CJK: what a Latin name must not touch to be a whole word.
_LATIN_WORD = rf"[^\W\u3040-\u30ff{HAN}\uac00-\ud7af]"  # kana, Han, hangul excluded


def lines(memory: MemoryRecord) -> list[Unit]:
    """The memory's text as (msg_ids, line) units: one line per message ("role: content").

    A message whose content holds line breaks is rejoined by splitting only before a role
    prefix; if the text still does not line up with msg_ids, the memory is one unit.
    """
    ids = memory.msg_ids
    if len(ids) > 1:
        split = memory.text.split("\n")
        if len(split) != len(ids):
            split = _ROLE_LINE.split(memory.text)
        if len(split) == len(ids):
            return [((i,), line) for i, line in zip(ids, split, strict=True)]
    return [(tuple(ids) or (memory.id,), memory.text)]


def speaker(line: str) -> str:
    """Who said a line ("role: content"): the name its content starts with when it has one
    ("user: Caroline: …", the shape of imports, group chats and transcripts, where every
    turn is often sent as `user`), else its role. Roles alone would make a two-person
    chat sent all as `user` look like one person's notes, and trim its answers away."""
    return name(line) or line.partition(": ")[0]


def name(line: str) -> str | None:
    """The speaker's name a line's content starts with (casefolded), None without one."""
    named = _NAME_LABEL.match(line.partition(": ")[2])
    return named.group(1).casefold() if named else None


def one_speaker(units: Sequence[Unit]) -> bool:
    """Whether every line of a memory comes from the same speaker (`speaker`)."""
    return len(units) > 1 and len({speaker(line) for _, line in units}) == 1


def asked_about(units: Sequence[Unit], query: str) -> list[Unit] | None:
    """The lines of the one speaker of a dialogue the question names ("what did Tom say
    about the budget?", "Caroline 去年搬去了哪里？"), or None if it names none or several.

    What a named person did, thinks or plans is in that person's own turns; the other
    speaker's replies around them ("Wow, that sounds great!") are what a tight budget can
    do without. Only names that label lines count, never roles: a name is the same in a
    chat sent as user/assistant and one sent all as `user`, so both keep the same lines.
    """
    if not query:
        return None
    lowered = query.casefold()
    speakers = {name(line) for _, line in units}
    asked = {n for n in speakers if n is not None and names_in(n, lowered)}
    if len(asked) != 1 or len(speakers) < 2:
        return None
    return [u for u in units if name(u[1]) in asked]


def names_in(name: str, query: str) -> bool:
    """Whether a casefolded query names a speaker: the whole name or the given name people
    call them by. A name of several words by its first word, as a word ("Anna" names
    "Anna Lee", "Anna's" names Anna, "Annabel" does not; a CJK character next to it is not
    part of the word: "Anna去了哪里"). A Chinese name of three or four characters also by
    its last two, the given name after a family name of one or two characters ("阿杰" names
    林阿杰, "娜娜" names 欧阳娜娜); one of two characters only whole (its given name is one
    character, too short to tell from any other word)."""
    forms = [name, name.split(" ")[0]]
    if has_han(name) and len(name) in (3, 4):
        forms.append(name[-2:])
    for form in dict.fromkeys(forms):
        if has_han(form):
            if form in query:
                return True
        elif re.search(rf"(?<!{_LATIN_WORD}){re.escape(form)}(?!{_LATIN_WORD})", query):
            return True
    return False
