"""Request and response models of `POST /v1/recall`."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.classify.categories import Category
from app.memories.schemas import AS_OF, Tier
from app.time_range import AcceptedTime, as_utc
from app.validation import Namespace, SessionId

Label = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:/-]{1,64}$")]

SCORE_SCALE = (
    "Scores are on one 0–1 scale. `relevance` is how well the memory matches the query: "
    "(1 − w) × the vector part + w × the keyword part, w = 0.5 for English and 0.6 for "
    "Chinese queries by default (see `ScoreParts`). 0.35 keeps about 90 % of the memories "
    "that hold an answer on LoCoMo and most memories of unrelated conversations out "
    "(docs/benchmarks.md). `min_score` applies to relevance, before decay and boosts, so "
    "age alone never hides a memory that matches well; `score` (relevance × decay × boosts) "
    "only orders the results."
)


TRIMMED = (
    "True when some of the memory's lines (messages) were left out of `text`. Memories are "
    "packed best first, and a line is returned once: (1) lines a better memory already "
    "returned are left out (overlapping chunks); (2) a memory that does not fit whole in the "
    "tokens left gives only its lines that match the query's words (at least half as well "
    "as its best line); (3) a memory whose lines all come from one speaker (notes, a list "
    "of facts) gives its matching lines first, and (4) a dialogue that is not the first "
    "memory, when the query names exactly one of its speakers (by the name its lines start "
    "with, or the given name), gives that speaker's lines first. Once the memories of their "
    "tier are packed (those passing the configured `min_score`, then any weaker ones a "
    "lower per-call `min_score` lets in), those of (3) and (4) get their other lines back, "
    "best memory first, while the budget allows, taking them from weaker memories that had "
    "returned them (such a memory is then trimmed, or dropped when no line is left). So a "
    "memory stays trimmed when the budget ran out first or a better memory holds the lines."
)


class BlockLanguage(StrEnum):
    auto = "auto"
    zh = "zh"
    en = "en"


class Superseded(StrEnum):
    mark = "mark"
    omit = "omit"


class Stage(StrEnum):
    """A stage of recall that a deadline can skip (app/recall/deadline.py)."""

    vector = "vector"  # the vector search (and the date or session searches)
    keyword = "keyword"  # the full-text search
    second_hop = "second_hop"  # the searches from the line the first search found
    # the vectors of pending messages' lines (read-your-writes): matched by their words
    # alone; or the read of which of them a memory holds already
    pending = "pending"


class Layer(StrEnum):
    longterm = "longterm"  # summaries and long-term facts: first in the block
    detail = "detail"  # everything else


class RecallRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"namespace": "alice", "query": "我的体检安排是哪天", "max_tokens": 800},
                {"namespace": "alice", "query": "which database did we pick?", "top_k": 5,
                 "categories": ["decision"], "language": "en"},
            ]
        },
    )

    namespace: Namespace = Field(description="Whose memories to search; no other namespace "
                                 "is ever searched.")
    query: str = Field(min_length=1, max_length=4000,
                       description="The question or the user's new message, in any language.")
    top_k: int = Field(default=10, ge=1, le=100, strict=True,
                       description="At most this many memories are returned. The search "
                       "does not depend on it (50 candidates per search), so the "
                       "best memory is the same whatever top_k is.")
    max_tokens: int | None = Field(
        default=None, ge=1, le=32_000, strict=True,
        description="Token budget of the returned memory texts (default 1,500), counted with "
        "the embedding model's tokenizer (WordPiece for all-MiniLM-L6-v2) exactly as "
        "`tokens` reports them. Memories are taken best first until the budget is full. The "
        "injection block adds a preface and a date per memory on top (`block_tokens`).")
    min_score: float | None = Field(
        default=None, ge=0, le=1,
        description="Drop memories whose relevance is below this (default 0.35), times 0.7 "
        "when the query points at something said before (\"as I said before\") or counts "
        "(\"how many\", \"有几个\"): the threshold applied is returned as `min_score`. "
        "A value below the default only adds: what the default returns is packed first, "
        "weaker memories fill what budget it leaves. "
        + SCORE_SCALE)
    branch: Label | None = Field(
        default=None, description="Only this branch's memories (default: every branch).")
    other_branches: bool = Field(
        default=False, strict=True,
        description="With `branch`: also search other branches, their memories down-weighted.")
    categories: list[Category] | None = Field(
        default=None, max_length=8, description="Only memories of these categories.")
    tiers: list[Tier] | None = Field(
        default=None, max_length=3, description="Only memories of these tiers.")
    session_id: SessionId | None = Field(default=None, description="Only this session.")
    time_from: AcceptedTime | None = Field(
        default=None, description="Only memories whose messages reach this time or later.")
    time_to: AcceptedTime | None = Field(
        default=None, description="Only memories whose messages start at this time or before.")
    as_of: AcceptedTime | None = Field(
        default=None, description="Recall as of this time. " + AS_OF + " It is also the "
        "'now' that memory ages are measured from (see `decay` in `ScoreParts`) and that "
        "relative dates (\"last week\", \"上周\") count from. Default: no snapshot; ages "
        "from the newest matching memory's time, so a store that was quiet for months is not "
        "discounted as a whole, and relative dates from the clock.")
    language: BlockLanguage = Field(
        default=BlockLanguage.auto,
        description="Language of the injection block's template; auto follows the query.")
    superseded: Superseded = Field(
        default=Superseded.mark,
        description="What to do with a memory that a later memory found by the same recall "
        "restates or changes (\"I live in Berlin\" after \"we moved to Munich\" was said): "
        "`mark` (default) returns it after the newer one, with `superseded_by`, and the block "
        "dates it as changed, so an assistant can still answer \"where did I live before?\" "
        "and reads it as history; `omit` leaves it out when the newer one is returned.")
    deadline_ms: int | None = Field(
        default=None, ge=0, le=60_000, strict=True,
        description="Answer within about this many milliseconds of the recall's start "
        "(default: the server's ENGRAM_RECALL_DEADLINE_MS; 0: no deadline). A stage not done "
        "by then is skipped, never an error: without the question's vector by the deadline "
        "the answer comes from the full-text search alone (scored on its keyword part), "
        "without the full-text search from the vector search alone (each memory's share of "
        "the query's words standing for its BM25 rank); when neither is done, the first to "
        "finish answers. A second hop starts only while time is left, and counts only if one of "
        "its searches is done by then. Messages stored and not built yet (`provisional` "
        "memories) whose vector is not ready are matched and scored by their words alone. "
        "The response then "
        "says `degraded` and names the `skipped` stages. `/v1/recall/why_not` ignores it: "
        "its explanation needs the complete recall.")

    @model_validator(mode="after")
    def _sensible(self) -> RecallRequest:
        if not self.query.strip():
            raise ValueError("query is blank")
        if self.time_from and self.time_to and as_utc(self.time_from) > as_utc(self.time_to):
            raise ValueError("time_from is after time_to")
        if self.other_branches and self.branch is None:
            raise ValueError("other_branches needs a branch to prefer")
        return self


class ScoreParts(BaseModel):
    """Why a memory scored as it did. `score = ranking × decay × boost`."""

    cosine: float = Field(description="Cosine similarity of query and memory embeddings.")
    vector: float = Field(
        description="The cosine on the 0–1 scale: 0 at or below 0.05 (unrelated text for the "
        "bundled model), 1 at or above 0.55; both ends are settings, for other models.")
    keyword: float = Field(
        description="Full-text match, 0–1: half the IDF-weighted share of the query's words "
        "the memory contains, half its BM25 score relative to the best keyword match, scaled "
        "by that match's share. 0 when no query word matched.")
    relevance: float = Field(description="Fused match score on which `min_score` applies.")
    ranking: float = Field(
        description="The match score the ranking uses: `relevance` with the vector's weight "
        "scaled by the share of the query the embedding model can read (its tokens that are "
        "not unknown to the model); equal to `relevance` for a query it reads whole.")
    decay: float = Field(
        description="Age discount, 0–1: 1 for memories up to 30 days older than the "
        "reference time (`as_of`), then halving every half-life toward a floor.")
    boost: float = Field(description="Product of the boosts below.")
    importance: float = Field(description="From the memory's importance (1–10).")
    tier: float = Field(description="Long-term facts and daily summaries weigh more.")
    branch: float = Field(description="Below 1 for another branch (`other_branches`).")
    time: float = Field(description="Above 1 when the memory falls in a date the query names "
                        "(\"on 3 June, 2023\", \"上周\").")
    reference: float = Field(description="Above 1 for what a reference phrase points to.")


class SupersededBy(BaseModel):
    id: str = Field(description="The later memory that restates or changes this one.")
    time: datetime | None = Field(description="When it was said (its first message).")


class RecalledMemory(BaseModel):
    id: str
    text: str = Field(description="The memory text as packed: the whole memory, or the "
                      "lines of it that were returned (see `trimmed`), in order.")
    msg_ids: list[str] = Field(description="The messages this text covers, in order.")
    session_id: str
    time_start: datetime | None
    time_end: datetime | None
    category: str
    tier: Tier
    importance: int
    branch: str
    layer: Layer
    tokens: int = Field(description="Tokens of `text` under the documented tokenizer.")
    score: float = Field(description="Final score: relevance × decay × boost.")
    explain: ScoreParts
    trimmed: bool = Field(description=TRIMMED)
    superseded_by: SupersededBy | None = Field(
        default=None, description="Set when a later memory returned by this recall restates "
        "or changes this one (it is ranked first): this one is the earlier statement. Caught "
        "without a language model: a later statement close to this one that repeats its "
        "subject, or that answers the same question and says that something changed "
        "(moved, switched, stopped, replaced, rescheduled, \"now\", 改成, 不…了), in Chinese, "
        "English or across them.")
    provisional: bool = Field(
        default=False, description="Stored with `wait=false` and not built into a memory "
        "yet: the session's pending messages that match the query, as they were sent "
        "(read-your-writes). `id` is `pending:<session_id>:<first msg_id>`; once the build "
        "lands, the same recall returns the real memory instead.")


class ReferenceInfo(BaseModel):
    phrase: str
    scope: str = Field(description="recent: the latest session is favoured; earlier: a past "
                       "one.")


class TimeWindow(BaseModel):
    phrase: str = Field(description="The words of the query that name the time.")
    start: datetime
    end: datetime = Field(description="Exclusive.")
    empty: bool = Field(default=False, description="No memory of the namespace (under the "
                        "request's filters) lies in the window: the period holds nothing.")


class RecallResponse(BaseModel):
    namespace: str
    query: str
    search_text: str = Field(description="What was searched: the query without reference "
                             "phrases and chit-chat wrappers.")
    memories: list[RecalledMemory] = Field(
        description="Long-term facts first, then details; best first within each layer.")
    count: int
    tokens: int = Field(description="Sum of the memories' tokens; never above max_tokens.")
    max_tokens: int
    min_score: float = Field(description="The threshold applied (the request's, or the "
                             "default, lowered for a reference phrase or a counting question).")
    context_min_score: float = Field(
        description="The context floor: once a memory passes `min_score` (the question has "
        "an answer here), weaker memories that hold a word of the question, down to this "
        "relevance, fill the budget after every passing one, as the answer's context; none "
        "below it is ever returned. Only passing memories count as hits.")
    language: str = Field(description="Language of the block: zh or en.")
    block: str = Field(description="Ready to append to the system prompt. Empty when nothing "
                       "was recalled.")
    block_tokens: int = Field(description="Tokens of `block` under the same tokenizer.")
    reference: ReferenceInfo | None = Field(
        default=None, description="The reference phrase found in the query, if any.")
    time_window: TimeWindow | None = Field(
        default=None, description="The date or period named in the query, if any: memories "
        "in it are searched as well and boosted.")
    candidates: int = Field(description="Memories scored before the threshold and budget.")
    degraded: bool = Field(
        default=False, description="True when the deadline (`deadline_ms`) skipped a stage: "
        "the answer comes from what was ready (see `skipped`).")
    skipped: list[Stage] = Field(
        default_factory=list, description="The stages the deadline skipped: `vector` (the "
        "question's vector was not ready: full-text matches only, their `cosine` 0), "
        "`keyword` (the full-text search was not done: vector matches only), `second_hop` "
        "(the search from the line the first search found), `pending` (the vectors of "
        "messages not built yet: those are matched by their words alone; or the read of "
        "which of them a memory holds already).")
    took_ms: float
