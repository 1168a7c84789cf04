"""Every JSON route of the API, once: what to send and how to read the answer.

Each function here describes one call (`Call`); `Client` and `AsyncClient` bind them as
methods, so both clients have the same signatures and docstrings and no route is written
twice. Arguments left as None are not sent: the server's default applies. The streaming
routes (export, import) are methods of the clients themselves (`_client.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar, cast
from urllib.parse import quote

import httpx

from engram_client.types import (
    ContextResult,
    Deleted,
    Evolution,
    ForgetResult,
    ImportProgress,
    Job,
    JSONObject,
    Language,
    Memory,
    MemoryList,
    Message,
    NamespaceList,
    RecallResult,
    Session,
    SessionList,
    StoreResult,
    WhyNotResult,
)

T = TypeVar("T")
Time = datetime | str
MemoryState = Literal["active", "compressed", "forgotten", "any"]


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request, and how its (successful) response becomes the return value."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, Any] = field(default_factory=dict)
    json: Any = None


def segment(value: str) -> str:
    """A path segment: session and message ids may hold `/`, `?`, `#` and spaces."""
    return quote(value, safe="")


def _time(value: Time | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else value


def _given(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def json_of(_: type[T]) -> Callable[[httpx.Response], T]:
    def parse(response: httpx.Response) -> T:
        return cast(T, response.json())
    return parse


def _text(response: httpx.Response) -> str:
    return response.text


# --- store -------------------------------------------------------------------------------

def store(namespace: str, session_id: str, messages: Sequence[Message], *,
          source: str | None = None, branch: str | None = None,
          tags: Sequence[str] | None = None, incremental: bool | None = None,
          wait: bool | Literal["built", "findable"] | None = None,
          pinned: bool | None = None) -> Call[StoreResult]:
    """Store a session's messages incrementally (`POST /v1/store`).

    Only new and changed messages are processed: send the whole conversation every time, or
    just its new turns. `wait=True` (the server's default) returns once the messages are
    safe and the next recall finds them by keyword and by each new turn's own vector, with
    the background build's `job_id` (status `stored`). `wait="built"` returns once the
    memories are built, with their ids. `wait=False` returns once the messages are safe
    (found by keyword), status `queued`. Poll `get_job` for a build's memory ids.
    `pinned=True` pins every memory holding these messages.
    """
    return Call("POST", "/v1/store", json_of(StoreResult), json=_given(
        namespace=namespace, session_id=session_id, messages=list(messages), source=source,
        branch=branch, tags=None if tags is None else list(tags), incremental=incremental,
        wait=wait, pinned=pinned))


def get_job(job_id: str) -> Call[Job]:
    """The background build of a store made with `wait=True` or `False` (`GET /v1/jobs/{id}`)."""
    return Call("GET", f"/v1/jobs/{segment(job_id)}", json_of(Job))


# --- recall and context ------------------------------------------------------------------

def recall(namespace: str, query: str, *, top_k: int | None = None,
           max_tokens: int | None = None, min_score: float | None = None,
           branch: str | None = None, other_branches: bool | None = None,
           categories: Sequence[str] | None = None, tiers: Sequence[str] | None = None,
           session_id: str | None = None, time_from: Time | None = None,
           time_to: Time | None = None, as_of: Time | None = None,
           language: Language | None = None,
           deadline_ms: int | None = None) -> Call[RecallResult]:
    """The memories that matter for `query`, within a token budget, and a ready-to-inject
    `block` (`POST /v1/recall`); `deadline_ms` (0: none; default: the server's) answers from
    what is ready by then, `degraded` with the stages `skipped`."""
    return Call("POST", "/v1/recall", json_of(RecallResult), json=_given(
        namespace=namespace, query=query, top_k=top_k, max_tokens=max_tokens,
        min_score=min_score, branch=branch, other_branches=other_branches,
        categories=None if categories is None else list(categories),
        tiers=None if tiers is None else list(tiers), session_id=session_id,
        time_from=_time(time_from), time_to=_time(time_to), as_of=_time(as_of),
        language=language, deadline_ms=deadline_ms))


def why_not(namespace: str, query: str, memory_ids: Sequence[str], *,
            top_k: int | None = None, max_tokens: int | None = None,
            min_score: float | None = None, branch: str | None = None,
            other_branches: bool | None = None, categories: Sequence[str] | None = None,
            tiers: Sequence[str] | None = None, session_id: str | None = None,
            time_from: Time | None = None, time_to: Time | None = None,
            as_of: Time | None = None) -> Call[WhyNotResult]:
    """Run the same recall and say, for each of `memory_ids`, what kept it out (the filter,
    its state, its relevance against the threshold, the budget) or that it was recalled
    (`POST /v1/recall/why_not`)."""
    return Call("POST", "/v1/recall/why_not", json_of(WhyNotResult), json=_given(
        namespace=namespace, query=query, memory_ids=list(memory_ids), top_k=top_k,
        max_tokens=max_tokens, min_score=min_score, branch=branch,
        other_branches=other_branches,
        categories=None if categories is None else list(categories),
        tiers=None if tiers is None else list(tiers), session_id=session_id,
        time_from=_time(time_from), time_to=_time(time_to), as_of=_time(as_of)))


def context(namespace: str, *, max_tokens: int | None = None,
            language: Language | None = None, session_id: str | None = None
            ) -> Call[ContextResult]:
    """What an assistant should know at the start of a session, without a query
    (`POST /v1/context`): pinned memories, durable facts, the latest session's gist."""
    return Call("POST", "/v1/context", json_of(ContextResult), json=_given(
        namespace=namespace, max_tokens=max_tokens, language=language,
        session_id=session_id))


def classify(text: str) -> Call[JSONObject]:
    """Category, confidence, entities and importance of any text (`POST /v1/classify`)."""
    return Call("POST", "/v1/classify", json_of(JSONObject), json={"text": text})


# --- memories ----------------------------------------------------------------------------

def list_memories(namespace: str, *, query: str | None = None, session_id: str | None = None,
                  category: str | None = None, tier: str | None = None,
                  branch: str | None = None, state: MemoryState | None = None,
                  tag: str | None = None, min_importance: int | None = None,
                  pinned: bool | None = None, offset: int | None = None,
                  limit: int | None = None, min_score: float | None = None,
                  as_of: Time | None = None) -> Call[MemoryList]:
    """A namespace's memories, filtered and paged (`GET /v1/memories`): newest first, or by
    relevance with a text search `query` (keyword + vector; matches below `min_score` on
    recall's 0-1 scale are left out); with `as_of`, only those that existed then."""
    return Call("GET", "/v1/memories", json_of(MemoryList), params=_given(
        namespace=namespace, q=query, session_id=session_id, category=category, tier=tier,
        branch=branch, state=state, tag=tag, min_importance=min_importance, pinned=pinned,
        offset=offset, limit=limit, min_score=min_score, as_of=_time(as_of)))


def get_memory(memory_id: str) -> Call[Memory]:
    """One memory with all its metadata (`GET /v1/memories/{id}`)."""
    return Call("GET", f"/v1/memories/{segment(memory_id)}", json_of(Memory))


def update_memory(memory_id: str, *, text: str | None = None,
                  tags: Sequence[str] | None = None, category: str | None = None,
                  importance: int | None = None, protected: bool | None = None,
                  pinned: bool | None = None) -> Call[Memory]:
    """Edit a memory (`PATCH /v1/memories/{id}`); a new text is embedded again."""
    return Call("PATCH", f"/v1/memories/{segment(memory_id)}", json_of(Memory), json=_given(
        text=text, tags=None if tags is None else list(tags), category=category,
        importance=importance, protected=protected, pinned=pinned))


def delete_memory(memory_id: str) -> Call[Deleted]:
    """Delete one memory; its messages stay in the raw log (`DELETE /v1/memories/{id}`)."""
    return Call("DELETE", f"/v1/memories/{segment(memory_id)}", json_of(Deleted))


def access_memory(memory_id: str, note: str = "") -> Call[Memory]:
    """Record an explicit access with a note (`POST /v1/memories/{id}/access`)."""
    return Call("POST", f"/v1/memories/{segment(memory_id)}/access", json_of(Memory),
                json={"note": note})


def forget_memory(memory_id: str) -> Call[Memory]:
    """Forget a memory softly: it leaves recall, `restore_memory` brings it back."""
    return Call("POST", f"/v1/memories/{segment(memory_id)}/forget", json_of(Memory))


def restore_memory(memory_id: str) -> Call[Memory]:
    """Bring back a forgotten memory, or a compressed one whole from the archive."""
    return Call("POST", f"/v1/memories/{segment(memory_id)}/restore", json_of(Memory))


def memory_evolution(memory_id: str) -> Call[Evolution]:
    """The memory's history, oldest first, with a readable summary."""
    return Call("GET", f"/v1/memories/{segment(memory_id)}/evolution", json_of(Evolution))


# --- namespaces and sessions -------------------------------------------------------------

def list_namespaces() -> Call[NamespaceList]:
    """The namespaces this key may use, with their counts (`GET /v1/namespaces`)."""
    return Call("GET", "/v1/namespaces", json_of(NamespaceList))


def forget_stale(namespace: str) -> Call[ForgetResult]:
    """Forget the namespace's long-untouched, low-importance memories (soft)."""
    return Call("POST", f"/v1/namespaces/{segment(namespace)}/forget", json_of(ForgetResult))


def list_sessions(namespace: str) -> Call[SessionList]:
    """The sessions ledger of a namespace."""
    return Call("GET", f"/v1/namespaces/{segment(namespace)}/sessions", json_of(SessionList))


def get_session(namespace: str, session_id: str) -> Call[Session]:
    """One session's ledger entry."""
    return Call("GET", f"/v1/namespaces/{segment(namespace)}/sessions/"
                f"{segment(session_id)}", json_of(Session))


def delete_namespace(namespace: str) -> Call[Deleted]:
    """Delete everything stored for a namespace."""
    return Call("DELETE", f"/v1/namespaces/{segment(namespace)}", json_of(Deleted))


def delete_session(namespace: str, session_id: str) -> Call[Deleted]:
    """Delete a session: its messages, memories, events and ledger entry."""
    return Call("DELETE", f"/v1/namespaces/{segment(namespace)}/sessions/"
                f"{segment(session_id)}", json_of(Deleted))


def delete_message(namespace: str, session_id: str, msg_id: str) -> Call[Deleted]:
    """Delete one message; the memories that held it are rebuilt without it."""
    return Call("DELETE", f"/v1/namespaces/{segment(namespace)}/sessions/"
                f"{segment(session_id)}/messages/{segment(msg_id)}", json_of(Deleted))


def import_progress(namespace: str) -> Call[ImportProgress]:
    """Where the running (or latest) import into `namespace` is: its phase, and while it
    embeds again, memories done of total (poll it beside `import_namespace`)."""
    return Call("GET", f"/v1/namespaces/{segment(namespace)}/import/progress",
                json_of(ImportProgress))


# --- compression, debug, operations ------------------------------------------------------

def run_compression(*, namespace: str | None = None, dry_run: bool | None = None,
                    force: bool | None = None) -> Call[JSONObject]:
    """Run a compression pass now, or a dry run (`POST /v1/compression/run`)."""
    return Call("POST", "/v1/compression/run", json_of(JSONObject),
                json=_given(namespace=namespace, dry_run=dry_run, force=force))


def compression_status() -> Call[JSONObject]:
    """The compression scheduler's state and each namespace's last result."""
    return Call("GET", "/v1/compression/status", json_of(JSONObject))


def get_policy(namespace: str) -> Call[JSONObject]:
    """A namespace's compression policy."""
    return Call("GET", f"/v1/compression/policies/{segment(namespace)}", json_of(JSONObject))


def set_policy(namespace: str, *, preset: str | None = None,
               overrides: Mapping[str, Any] | None = None,
               shadow: Mapping[str, Any] | None = None) -> Call[JSONObject]:
    """Choose a namespace's compression preset, overrides and shadow policy."""
    return Call("PUT", f"/v1/compression/policies/{segment(namespace)}", json_of(JSONObject),
                json=_given(preset=preset, overrides=None if overrides is None
                            else dict(overrides), shadow=None if shadow is None
                            else dict(shadow)))


def memory_dump(namespace: str, *, compress_level: int | None = None,
                state: MemoryState | None = None, session_id: str | None = None,
                offset: int | None = None, limit: int | None = None) -> Call[JSONObject]:
    """Admin: originals, compressed forms, scores and decisions (`POST /debug/memory_dump`)."""
    return Call("POST", "/debug/memory_dump", json_of(JSONObject), json=_given(
        namespace=namespace, compress_level=compress_level, state=state,
        session_id=session_id, offset=offset, limit=limit))


def health() -> Call[JSONObject]:
    """Liveness (`GET /healthz`)."""
    return Call("GET", "/healthz", json_of(JSONObject))


def ready() -> Call[JSONObject]:
    """Readiness: model, tables, background workers (`GET /readyz`; 503 while not ready)."""
    return Call("GET", "/readyz", json_of(JSONObject))


def metrics() -> Call[str]:
    """Prometheus metrics, as text (`GET /metrics`)."""
    return Call("GET", "/metrics", _text)
