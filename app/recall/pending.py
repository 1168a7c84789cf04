"""The pending search: read-your-writes for messages not built into memories yet.

A `wait=true` or `wait=false` store is acknowledged once its messages are in the raw
log as `pending`; its build (chunking, classifying, embedding) runs after, in the
background. Until it lands, no memory holds them, and a recall made right after the
acknowledgement would not find what the user just said. So each search also looks at the
namespace's pending messages (held between recalls: app/storage/pending_cache.py): the
ones holding a word of the question (the terms recall matches memories by, `query_terms`,
with their equivalents and their translations in the other language: bilingual.py)
become candidates, and so do those whose own vector (computed by a `wait=true` store before
it answered: app/storage/pending_vectors.py) gives them a relevance of at least the
recall's `min_score` on its own, with no word in common (score.py's `relevance`, the same
scale and model bands as any memory: a Chinese question about an English turn just stored).
One candidate per session, scored like any memory with the best of its messages' own
vectors, or, where one has none, a vector of its line computed in the question's pass (and
kept for the next recalls), and packed like any memory within the budget. They are marked
provisional: their id is `pending:<session>:<first msg_id>`, which no memory id can be
(assign_ids), and the response says `provisional: true`; they record no hits and `why_not`
does not list them.

A message that a memory already holds is never provisional: the build writes its memories
before it marks the messages done, so the built memories of the sessions concerned are read
after the other searches ran, and their messages are left out (a memory the searches found
was written before that read).

What the build would cut out of a message is cut out here too: an injection block it
carries (the recall firewall's rule 1); a message that is nothing but one is left out.

Limits: a `wait=false` store's messages only by keyword (a question in another language
finds them only through the dictionary's translations), a `wait=true` one's by each
message's own vector, not its chunk's; only messages that pass the request's branch,
session and time filters (none when it filters by category: a pending message has none
yet), at most `PENDING_CANDIDATES` sessions (the latest) and `PENDING_LINES` messages of
each (the best matching).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, defaultdict
from dataclasses import replace

import numpy as np
import structlog

from app.config import Settings
from app.embedding.pool import EmbeddingPool
from app.recall.candidates import PENDING_PREFIX, Candidate, utc
from app.recall.deadline import Deadline
from app.recall.schemas import Stage
from app.recall.score import coverage, relevance
from app.recall.text import QueryTerms
from app.recall.tuning import PENDING_CANDIDATES, PENDING_LINES, PENDING_TEXTS
from app.scripts import has_han
from app.storage.records import MemoryRecord, MessageRecord
from app.storage.repository import Repository, SearchFilter
from app.store.chunker import render_line
from app.store.firewall import own_words

log = structlog.get_logger(__name__)


class PendingSearch:
    """Finds a question's words, or its meaning by their own vectors, in a namespace's
    pending messages (module docstring)."""

    def __init__(self, repo: Repository, pool: EmbeddingPool, settings: Settings) -> None:
        self._repo = repo
        self._pool = pool
        self._settings = settings
        self._firewall = settings.store_firewall
        # A pending message's vector of its line, computed by a recall (`_embed`), by
        # (namespace, session, msg_id, content hash): an edited message is never scored
        # by its old content's vector.
        self._vectors: OrderedDict[_Held, np.ndarray] = OrderedDict()
        # The encoding of a message's line in flight, shared by the recalls needing it.
        self._encoding: dict[_Held, asyncio.Task[None]] = {}
        # (role, content) -> its own words (firewall rule 1), None: it carries no block.
        self._own: OrderedDict[tuple[str, str], str | None] = OrderedDict()

    async def read(self, where: SearchFilter) -> list[MessageRecord]:
        """The namespace's pending messages that the request's filters let a search see, as
        their build will take them: an injection block a message carries cut out (the
        recall firewall's rule 1, app/store/firewall.py), so recall never serves its own
        block back as something said."""
        if where.categories is not None or (where.tiers is not None
                                            and "session" not in where.tiers):
            return []
        messages = [m for m in await self._repo.pending_messages(where.namespace)
                    if _passes(m, where)]
        if not self._firewall:
            return messages
        kept = []
        for m in messages:
            words = self._own_words(m)
            if words is None:
                kept.append(m)
            elif words:
                kept.append(replace(m, content=words))
        return kept

    def _own_words(self, message: MessageRecord) -> str | None:
        key = (message.role, message.content)
        if key in self._own:
            self._own.move_to_end(key)
            return self._own[key]
        words = self._own[key] = own_words(message.content, message.role)
        while len(self._own) > PENDING_TEXTS:
            self._own.popitem(last=False)
        return words

    async def candidates(self, messages: list[MessageRecord], terms: QueryTerms, *,
                         query_vector: np.ndarray | None, found: list[Candidate],
                         min_score: float, chinese: bool, deadline: Deadline,
                         hop: bool = False) -> list[Candidate]:
        """Provisional candidates: per session, its pending messages holding a term of the
        question or close enough by their own vector (`min_score`; `chinese`: whether the
        question is Chinese, for the model's bands), without those a memory holds (`found`,
        or built since the read). Without `query_vector` (past the recall's deadline) they
        are matched by keyword only; a session none of whose lines has a vector by the
        `deadline` is scored by their words (`Stage.pending`, `Candidate.words_only`).
        A second `hop`'s search waits for no vector not held yet; its encoding starts, for
        the next recall. The hop adds to an answer the first search gave; under an ingest
        its new lines kept the slowest recalls to their deadline."""
        if not messages:
            return []
        # Held by the same words as a built memory (its equivalents, its translations):
        # a question in the other language finds what was just stored.
        shares = coverage(terms, [m.content for m in messages], self._settings).scores \
            if terms else [0.0] * len(messages)
        own = self._own_vectors(messages) if query_vector is not None else {}
        near = self._near(messages, shares, own, terms, query_vector=query_vector,
                          min_score=min_score, chinese=chinese)
        matching = [m for i, (m, share) in enumerate(zip(messages, shares, strict=True))
                    if share > 0 or i in near]
        if not matching:
            return []
        built = {(c.memory.session_id, i) for c in found for i in c.memory.msg_ids}
        built |= await self._built(messages[0].namespace,
                                   {m.session_id for m in matching}, deadline)
        sessions: dict[str, list[tuple[float, float, MessageRecord]]] = defaultdict(list)
        for i, (m, share) in enumerate(zip(messages, shares, strict=True)):
            if (share > 0 or i in near) and (m.session_id, m.msg_id) not in built:
                sessions[m.session_id].append((share, near.get(i, 0.0), m))
        # Per session its best matching messages (by words, then by their own vector; the
        # latest of equals), in order.
        groups = [sorted((m for _, _, m in sorted(held, key=lambda h: (-h[0], -h[1], -h[2].seq))
                          [:PENDING_LINES]), key=lambda m: m.seq)
                  for held in sessions.values()]
        # The latest sessions first: what was just said is what is asked about.
        latest = sorted(groups, key=_latest, reverse=True)[:PENDING_CANDIDATES]
        if not latest:
            return []
        memories = [_provisional(group) for group in latest]
        if query_vector is None:  # past the deadline: by their words (no full-text rank)
            return [Candidate(memory, when=_latest(group), words_only=True)
                    for memory, group in zip(memories, latest, strict=True)]
        question = query_vector.astype(np.float32)
        # A message with no vector of its own (a `wait=false` store's) gets one of its line,
        # in the question's pass, kept for every later recall whatever it asks: the same
        # new turns are matched again and again until their build lands. (One vector per
        # session's matching lines was a new text, and a model call, for each question.)
        own |= await self._embed([g for group in latest for g in group
                                  if _key(g) not in own], None if hop else deadline)
        result = []
        for memory, group in zip(memories, latest, strict=True):
            vectors = [own[_key(g)] for g in group if _key(g) in own]
            if not vectors:  # late for the deadline: found by its words, scored by them
                result.append(Candidate(memory, when=_latest(group), words_only=True))
                continue
            cosines = [float(v @ question) for v in vectors]
            best = max(range(len(vectors)), key=lambda j: cosines[j])
            result.append(Candidate(memory, cosine=cosines[best], stored=vectors[best],
                                    when=_latest(group)))
        return result

    async def _built(self, namespace: str, sessions: set[str], deadline: Deadline
                     ) -> set[tuple[str, str]]:
        """(session, msg_id) of the messages a memory of `sessions` holds, unless the read
        is late for the `deadline` (`Stage.pending`): a LanceDB query when the namespace's
        copy is not held, up to 0.2 s under an ingest. Without it what the searches found
        is still left out, so nothing is returned twice; a message whose memory they did
        not find can then come back as provisional, its content once."""
        reading = asyncio.create_task(self._repo.built_msg_ids(namespace, sessions))
        await deadline.settle(reading, need_one=False)
        return set() if deadline.late(reading, Stage.pending) else reading.result()

    def _own_vectors(self, messages: list[MessageRecord]
                     ) -> dict[tuple[str, str], np.ndarray]:
        """(session, msg_id) -> the message's own vector, where a `wait=true` store held one
        for its current content (app/storage/pending_vectors.py)."""
        holder = self._repo.pending_vectors
        if not holder.held_rows:
            return {}
        own = {}
        for m in messages:
            vector = holder.get(m.namespace, m.session_id, m.msg_id, m.content_hash)
            if vector is not None:
                own[_key(m)] = vector
        return own

    def _near(self, messages: list[MessageRecord], shares: list[float],
              own: dict[tuple[str, str], np.ndarray], terms: QueryTerms, *,
              query_vector: np.ndarray | None, min_score: float, chinese: bool
              ) -> dict[int, float]:
        """Index -> relevance of the messages holding no word of the question whose own
        vector alone passes `min_score`, scored as recall scores any memory (score.py's
        `relevance`: the model's cosine bands, the stricter one across scripts)."""
        if query_vector is None:
            return {}
        unmatched = [i for i, (m, share) in enumerate(zip(messages, shares, strict=True))
                     if share <= 0 and _key(m) in own]
        if not unmatched:
            return {}
        vectors = np.stack([own[_key(messages[i])] for i in unmatched])
        cosines = vectors @ query_vector.astype(np.float32)
        # Scored by its line alone, all that `relevance` reads of a memory: most of them
        # are not kept, and a whole provisional record each (~7 µs, ~2 with the line only)
        # was a fifth of the search's time over a namespace being written. The kept ones
        # get theirs in `candidates`.
        alone = [Candidate(_line_only(messages[i]), cosine=float(cosine))
                 for i, cosine in zip(unmatched, cosines, strict=True)]
        relevance(alone, self._settings, terms=terms, chinese=chinese)
        return {i: c.relevance for i, c in zip(unmatched, alone, strict=True)
                if c.relevance >= min_score}

    async def _embed(self, messages: list[MessageRecord], deadline: Deadline | None
                     ) -> dict[tuple[str, str], np.ndarray]:
        """(session, msg_id) -> the vector of the message's line (keyed as `_own_vectors`,
        which it adds to), held for the next recalls; those not encoded by the `deadline`
        are left out (skipped: `Stage.pending`; None: those not held now).
        Under an ingest a pass with a few long pending lines was the slowest step of the
        slowest recalls (0.2-0.6 s after both searches were done; bench/load.py). A late
        encoding is not dropped: it goes on and its vectors serve the next recall, and a
        line being encoded is not encoded again for a recall that comes meanwhile
        (dropped, the same lines were sent by every recall and finished by none: question
        passes grew to 2 s)."""
        if not messages:
            return {}
        wanted = {_held(m): m for m in messages}
        missing = {k: m for k, m in wanted.items()
                   if k not in self._vectors and k not in self._encoding}
        if missing:
            encoding = asyncio.create_task(self._encode(missing))
            for key in missing:
                self._encoding[key] = encoding
        waiting = {self._encoding[k] for k in wanted if k in self._encoding}
        if deadline is not None:
            await deadline.settle(*waiting, need_one=False)
            if not all(task.done() for task in waiting):
                deadline.skip(Stage.pending)
        held = {}
        for key, message in wanted.items():
            if key in self._vectors:
                self._vectors.move_to_end(key)
                held[_key(message)] = self._vectors[key]
        return held

    async def _encode(self, messages: dict[_Held, MessageRecord]) -> None:
        """Encode `messages`' lines into the held vectors (`_embed`); a failure leaves them
        out and is logged (nobody may be waiting to hear of it)."""
        try:
            vectors = await self._pool.embed_for_recall(
                [render_line(m) for m in messages.values()])
        except Exception as exc:
            log.warning("pending_vectors_failed", texts=len(messages), error=str(exc)[:200])
            return
        finally:
            for key in messages:
                self._encoding.pop(key, None)
        for key, vector in zip(messages, vectors, strict=True):
            self._vectors[key] = vector.astype(np.float32)
        while len(self._vectors) > PENDING_TEXTS:
            self._vectors.popitem(last=False)


_Held = tuple[str, str, str, str]  # (namespace, session, msg_id, content hash)


def _held(message: MessageRecord) -> _Held:
    return message.namespace, message.session_id, message.msg_id, message.content_hash


def _key(message: MessageRecord) -> tuple[str, str]:
    return message.session_id, message.msg_id


def _passes(message: MessageRecord, where: SearchFilter) -> bool:
    if where.branches is not None and message.branch not in where.branches:
        return False
    if where.session_id is not None and message.session_id != where.session_id:
        return False
    when = message.time
    if when is not None and where.time_from is not None and utc(when) < utc(where.time_from):
        return False
    return not (when is not None and where.time_to is not None
                and utc(when) > utc(where.time_to))


def _latest(group: list[MessageRecord]) -> float:
    times = [utc(t).timestamp() for m in group if (t := m.received_at or m.timestamp)]
    return max(times, default=0.0)


def _line_only(message: MessageRecord) -> MemoryRecord:
    """A stand-in holding only `message`'s line, as `_provisional([message])` holds it."""
    return MemoryRecord(id="", namespace=message.namespace, session_id=message.session_id,
                        text=render_line(message))


def _provisional(group: list[MessageRecord]) -> MemoryRecord:
    """A session's matching pending messages as a memory: one line a message ("role:
    content", as builds make them), its id `pending:<session>:<first msg_id>`."""
    first, last = group[0], group[-1]
    times = [utc(t) for m in group if (t := m.time) is not None]
    received = [utc(t) for m in group if (t := m.received_at) is not None]
    return MemoryRecord(
        id=f"{PENDING_PREFIX}{first.session_id}:{first.msg_id}",
        namespace=first.namespace, session_id=first.session_id,
        text="\n".join(render_line(m) for m in group),
        created_at=max(received, default=None) or None,
        time_start=min(times, default=None), time_end=max(times, default=None),
        source=first.source, branch=first.branch, tags=list(first.tags),
        start_msg=first.msg_id, end_msg=last.msg_id, start_seq=first.seq, end_seq=last.seq,
        msg_ids=[m.msg_id for m in group], msg_count=len(group),
        state="pending", language="zh" if any(has_han(m.content) for m in group) else "en",
    )


def without_built(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates of one recall's searches (its parts and hop), without a provisional
    one holding a message that a memory among them holds: a build that landed between two
    of the searches (each leaves out what was built when it ran) is returned once."""
    built = {(c.memory.session_id, i) for c in candidates
             if not c.provisional for i in c.memory.msg_ids}
    return [c for c in candidates if not c.provisional
            or built.isdisjoint((c.memory.session_id, i) for i in c.memory.msg_ids)]
