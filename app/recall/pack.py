"""Packing: best first until `top_k` memories or the token budget, line by line where it helps.

Tokens are counted with the model's tokenizer. A message already returned by a better memory
(neighbouring chunks overlap by design) is not returned twice: the later memory keeps only
its new lines, and is skipped if nothing new is left. A dialogue about one of its speakers
("what does Leo do as a hobby?") gives that speaker's turns first, the others back while the
budget allows. A memory of one speaker's statements gives its lines that match the question
first, and the lines naming what a second hop identified ("the person who works in
Shenzhen" is 婶婶: `hop.hop_names`). `pack` returns, beside what it packed, each memory it
passed over and why: `why_not` reads that instead of re-deriving the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.recall.candidates import Candidate, Packed, Packing, PassedOver, Unit
from app.recall.lines import asked_about, lines, one_speaker
from app.recall.text import Coverage
from app.recall.tuning import FOCUS_RATIO, MIN_TOKENS_LEFT, MISSES_PER_TOP_K
from app.storage.records import MemoryRecord

Count = Callable[[str], int]  # tokens of a text (`block.TokenCounter.count`)


def pack(tiers: Sequence[Sequence[Candidate]], *, top_k: int, max_tokens: int,
         matcher: Coverage | None, count: Count, query: str = "",
         named: Coverage | None = None) -> Packing:
    """Best first until `top_k` memories or `max_tokens` tokens.

    `tiers` are packed one after the other, each best first: the memories that pass the
    configured threshold, then (with a lower per-call `min_score`) the others, which
    only fill what budget the first tier left. So a lower `min_score` never returns
    less than the default: its weaker fragments come after, never in place of, what the
    default returns.

    Lines (messages) already returned by a better memory are left out. A memory that
    does not fit whole contributes its core: the lines that match the query (see
    `core`). A memory of one speaker's statements (notes, a list of facts; the speaker
    is the name a line starts with, else its role: `lines.speaker`) is packed as its core
    first, since its other lines are unrelated facts; once its tier is exhausted or the
    budget full, those memories get their other lines back, best first, while the
    budget allows, also lines a weaker memory of the tier had returned (they move to
    the better memory), so the best memory's lines do not depend on `top_k`. A
    dialogue keeps its turns together: the answer to a question rarely repeats its
    words (on LoCoMo, packing dialogue by matching lines cost 6 points at 500 tokens;
    only as a fallback it gained 2). But a question that names one of its speakers is
    answered by that speaker's turns, whatever words they use: those are packed first
    like a statement memory's core (`lines.asked_about`), the others given back the same
    way. `named`: what a second hop identified (`hop.hop_names`); a statement memory's
    core also keeps the lines naming it.
    """
    packed: list[Packed | None] = []
    passed_over: dict[str, tuple[PassedOver, int]] = {}
    used = 0
    # A message is known by (session, msg_id, part), never msg_id alone: clients number
    # each session's messages 1, 2, 3 (the README does), and another session's message 1
    # is a different line. `part` tells the pieces of one long message apart. Each maps
    # to the index of the packed memory that returned it.
    returned: dict[tuple[str, str, int], int] = {}
    for ranked in tiers:
        focused: list[int] = []  # memories of this tier that may get other lines back
        misses = 0
        for c in ranked:
            if len(packed) >= top_k or max_tokens - used < MIN_TOKENS_LEFT:
                break
            units = lines(c.memory)
            part = c.memory.part if len(c.memory.msg_ids) == 1 else 0
            session = c.memory.session_id
            fresh = [u for u in units
                     if any((session, i, part) not in returned for i in u[0])]
            if not fresh:
                passed_over.setdefault(c.memory.id, (PassedOver.duplicate, 0))
                continue  # every message already returned by a better memory
            # The matching lines are worked out only when they can be used: packed
            # first (statements), or in place of a whole that does not fit.
            core_: list[Unit] | None = None
            if one_speaker(units):
                core_ = core(fresh, matcher, whole=units, named=named)
                if not core_:
                    passed_over.setdefault(c.memory.id, (PassedOver.matched_lines_returned, 0))
                    continue  # its matching lines were returned by a better memory
            elif packed:
                # A dialogue about one of its speakers: that speaker's turns first,
                # the others back when the budget allows (`_restore`). Not the first
                # memory: whether its turns come back would depend on how many
                # memories `top_k` lets in after it.
                core_ = asked_about(fresh, query) or None
            core_first = core_ is not None and len(core_) < len(fresh)
            choice = core_ if core_ is not None and core_first else fresh
            tokens = _units_tokens(c.memory, units, choice, count)
            if used + tokens > max_tokens and not core_first:
                core_ = core_ if core_ is not None else core(fresh, matcher)
                if len(core_) < len(fresh):
                    choice = core_
                    tokens = _units_tokens(c.memory, units, choice, count)
            if used + tokens > max_tokens:
                # Try smaller memories further down, but not forever: each try costs a
                # tokenization, and far down the list they barely match.
                passed_over.setdefault(c.memory.id, (PassedOver.budget, tokens))
                misses += 1
                if misses > MISSES_PER_TOP_K * top_k:
                    break
                continue
            if core_first:
                focused.append(len(packed))
            returned.update(((session, i, part), len(packed))
                            for ids, _ in choice for i in ids)
            packed.append(_packed(c, units, choice, tokens, part))
            used += tokens
        for index in focused:
            used += _restore(packed, index, returned, max_tokens - used, count)
    return Packing([p for p in packed if p is not None], passed_over)


def _restore(packed: list[Packed | None], index: int,
             returned: dict[tuple[str, str, int], int], room: int, count: Count) -> int:
    """Give the focused memory `packed[index]` its other lines back if they fit in
    `room` more tokens, taking them from weaker memories that returned them (a weaker
    memory left with no line is dropped). Returns the tokens this added."""
    p = packed[index]
    if p is None:
        return 0  # a better memory took all its lines
    session = p.candidate.memory.session_id
    extra = [u for u in p.units if u not in p.choice
             and any(returned.get((session, i, p.part), index) >= index for i in u[0])]
    if not extra:
        return 0
    choice = [u for u in p.units if u in p.choice or u in extra]
    tokens = _units_tokens(p.candidate.memory, p.units, choice, count)
    moved = {(session, i, p.part) for ids, _ in extra for i in ids}
    losers: dict[int, Packed | None] = {}
    for key in moved:
        owner = returned.get(key)
        if owner is not None and owner > index and owner not in losers:
            q = packed[owner]
            assert q is not None
            q_session = q.candidate.memory.session_id
            keep = [u for u in q.choice
                    if not all((q_session, i, q.part) in moved for i in u[0])]
            losers[owner] = _packed(
                q.candidate, q.units, keep,
                _units_tokens(q.candidate.memory, q.units, keep, count), q.part) \
                if keep else None
    change = tokens - p.tokens + sum(
        (q.tokens if q is not None else 0) - old.tokens
        for owner, q in losers.items() if (old := packed[owner]) is not None)
    if change > room:
        return 0
    for owner, q in losers.items():
        packed[owner] = q
    returned.update((key, index) for key in moved)
    packed[index] = _packed(p.candidate, p.units, choice, tokens, p.part)
    return change


def core(units: list[Unit], matcher: Coverage | None, whole: list[Unit] | None = None,
         named: Coverage | None = None) -> list[Unit]:
    """The lines that carry the memory's keyword match: at least `FOCUS_RATIO`
    of its best line's share of the query terms; with `named` (what a second hop
    identified: `hop.hop_names`), also the lines that name it.

    `units` may be what is left of the memory's lines (`whole`) after better memories
    returned the others: if what is left matches far less than the memory's best line,
    the match was in lines already returned, and the core is only the lines naming what
    the hop identified (often none).
    """
    if matcher is None or (len(units) < 2 and whole is None):
        return units
    ratio = FOCUS_RATIO
    share = {u: matcher.share(u[1]) for u in whole or units}  # `units` ⊆ `whole`
    shares = [share[u] for u in units]
    best = max(shares)
    naming = {u for u in units if named.share(u[1]) > 0} if named is not None else set()
    if whole is not None and len(whole) > len(units) and best < ratio * max(share.values()):
        return [u for u in units if u in naming]
    if best <= 0 or len(units) < 2:
        return units  # matched as a whole (by meaning): no line stands out
    return [u for u, line_share in zip(units, shares, strict=True)
            if line_share >= ratio * best or u in naming]


def _packed(c: Candidate, units: list[Unit], choice: list[Unit], tokens: int,
            part: int) -> Packed:
    whole = len(choice) == len(units)
    text = c.memory.text if whole else "\n".join(line for _, line in choice)
    msg_ids = [i for ids, _ in choice for i in ids if i != c.memory.id]
    return Packed(c, text, msg_ids, tokens, not whole, part, units, choice)


def _units_tokens(memory: MemoryRecord, units: list[Unit], choice: list[Unit],
                  count: Count) -> int:
    if len(choice) == len(units):
        return count(memory.text)
    return count("\n".join(line for _, line in choice))
