"""Reading the question: what to search for, the threshold it gets, and what it points to.

Reference phrases ("as I said before", "记得刚才说的") and chit-chat wrappers are cut
(`references.py`), and a date it names ("on 3 June, 2023", "上周") is taken out of the
search text (`when.py`); both are kept as cues. A reference phrase lowers `min_score` (the
user says the memory exists) and points to recent sessions; a counting question lowers it
by the model profile's factor (every instance is asked for). A turn with nothing to look up
(a greeting, thanks, a joke asked for) and a question about a period as a whole are told
apart here (`turns.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from app.config import Settings
from app.recall.candidates import utc
from app.recall.references import ParsedQuery, ReferenceScope, parse_query
from app.recall.schemas import RecallRequest
from app.recall.text import query_terms
from app.recall.tuning import REFERENCE_THRESHOLD_FACTOR
from app.recall.turns import about_period_only, nothing_to_look_up
from app.recall.when import TimeHint, find_bare_month, find_time_hint, strip_phrase
from app.storage.records import SessionRecord
from app.storage.repository import Repository


@dataclass(frozen=True)
class Query:
    """A recall request's question as the stages read it."""

    request: RecallRequest
    parsed: ParsedQuery
    hint: TimeHint | None  # the date the question names, if any
    search_text: str  # the question without reference phrase, wrapper and date
    min_score: float  # the threshold this call applies (its own, or the configured one)
    default_min_score: float  # the configured threshold, adjusted like min_score
    max_tokens: int
    favoured: frozenset[str]  # the sessions a reference phrase points to
    # A greeting, thanks or joke: nothing to look up, nothing returned (turns.py).
    nothing_to_look_up: bool = False
    # "what did we talk about last week?": a date and nothing else to find (turns.py).
    about_period_only: bool = False


async def read_query(request: RecallRequest, settings: Settings, repo: Repository) -> Query:
    """The question's search text, date, threshold, budget and the sessions it points to."""
    s = settings
    parsed = parse_query(request.query)
    reference = utc(request.as_of or datetime.now(UTC))
    hint = find_time_hint(parsed.text, reference=reference)
    if hint is None:
        # "九月份我们聊了什么？": a bare month is read where it is all the question asks.
        month = find_bare_month(parsed.text, reference=reference)
        if month is not None and about_period_only(
                query_terms(strip_phrase(parsed.text, month.phrase))):
            hint = month
    search_text = strip_phrase(parsed.text, hint.phrase) if hint else parsed.text
    default_min_score = s.model_profile.min_score
    min_score = default_min_score if request.min_score is None else request.min_score
    if parsed.reference is not None:
        # The user says the memory exists: accept a weaker match for it.
        min_score *= REFERENCE_THRESHOLD_FACTOR
        default_min_score *= REFERENCE_THRESHOLD_FACTOR
    if parsed.counts:
        # Every instance is asked for, also those the question's condition rules out.
        # How much weaker such a memory scores is the model's (its profile).
        min_score *= s.model_profile.count_threshold_factor
        default_min_score *= s.model_profile.count_threshold_factor
    max_tokens = request.max_tokens or s.recall_max_tokens
    cued = hint is not None or parsed.reference is not None
    return Query(request=request, parsed=parsed, hint=hint, search_text=search_text,
                 min_score=min_score, default_min_score=default_min_score,
                 max_tokens=max_tokens,
                 favoured=await _favoured_sessions(repo, request.namespace, parsed,
                                                   as_of=request.as_of),
                 nothing_to_look_up=not cued and nothing_to_look_up(parsed.text),
                 about_period_only=hint is not None
                 and about_period_only(query_terms(search_text)))


async def _favoured_sessions(repo: Repository, namespace: str, parsed: ParsedQuery, *,
                             as_of: datetime | None) -> frozenset[str]:
    """The sessions a reference phrase points to: the latest one for "just now / 刚才", the
    latest three for "before / last time"; with `as_of`, among those begun by then."""
    if parsed.reference is None:
        return frozenset()
    sessions = await repo.list_sessions(namespace)
    if as_of is not None:
        sessions = [x for x in sessions if _began_by(x, utc(as_of))]

    def last_active(session: SessionRecord) -> datetime:
        when = session.time_end or session.updated_at or session.stored_at
        return utc(when) if when else datetime.min.replace(tzinfo=UTC)

    keep = 1 if parsed.reference.scope == ReferenceScope.recent else 3
    return frozenset(x.session_id for x in sorted(sessions, key=last_active, reverse=True)[:keep])


def _began_by(session: SessionRecord, when: datetime) -> bool:
    """Whether the session's conversation began at or before `when` (its store time when it
    has no message times), as `existed_at` reads a memory."""
    first = session.time_start or session.stored_at
    return first is None or utc(first) <= when
