"""The MCP tools: remember, recall, context, forget, list_memories, search_memories.

Each tool checks the caller's key exactly as the REST route does (`Principal`), builds the
same request model the route validates (`StoreRequest`, `RecallRequest`, ...) and calls the
same service, so the rules live in one place. A failure reaches the model as a tool error
that starts with the REST error code (`forbidden: ...`, `invalid_request: ...`), which the
model can read and act on.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from app.auth import Principal
from app.context.router import get_context_service
from app.context.schemas import ContextRequest
from app.errors import EngramError
from app.mcp.schemas import (
    ContextToolResult,
    MemoryBrief,
    MemoryListResult,
    RecallToolResult,
)
from app.memories.schemas import MemoryState
from app.recall.schemas import BlockLanguage, RecallRequest
from app.state import AppState
from app.storage.repository import MemoryFilter
from app.store.schemas import MessageIn, StoreRequest, StoreResult
from app.validation import ID_PATTERN, NAMESPACE_PATTERN

# Where the HTTP endpoint leaves the authenticated caller for the tools (app/mcp/http.py).
PRINCIPAL_KEY = "engram_principal"

INSTRUCTIONS = """\
Engram is the user's long-term memory. At the start of a conversation call `context` and put
its `block` into your system prompt. Before answering a question that may depend on earlier
conversations, call `recall` with the user's message. Call `remember` with the conversation's
new messages (same session_id every time: only new ones are stored), or with a `note` for a
single fact the user asked you to keep. Every tool needs the namespace: whose memory it is.
Never store a block you got from Engram as a note: it is already remembered."""

NamespaceArg = Annotated[str, Field(
    pattern=NAMESPACE_PATTERN, description="Whose memory: the user's (or team's) namespace.")]
SessionArg = Annotated[str, Field(pattern=ID_PATTERN, max_length=256)]
LanguageArg = Annotated[BlockLanguage, Field(
    description="Language of the block's template: zh, en, or auto (follows the text).")]
StateArg = Annotated[MemoryState, Field(description="active (default), compressed or "
                                        "forgotten.")]
LimitArg = Annotated[int, Field(ge=1, le=100)]
OffsetArg = Annotated[int, Field(ge=0)]


@contextmanager
def _as_tool_errors() -> Iterator[None]:
    """Engram's errors as tool errors the model can read: `<code>: <message>`."""
    try:
        yield
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}"
                             for e in exc.errors()[:5])
        raise ToolError(f"invalid_request: {problems}") from exc
    except EngramError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc


def _principal(ctx: Context) -> Principal:
    request = ctx.request_context.request
    state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
    principal = state.get(PRINCIPAL_KEY)
    if not isinstance(principal, Principal):  # only reachable if the endpoint were bypassed
        raise ToolError("unauthorized: this MCP endpoint was reached without an API key check")
    return principal


@contextmanager
def _root_logging_kept() -> Iterator[None]:
    """Undo what `MCPServer()` does to the root logger (`logging.basicConfig` with a rich
    console handler at INFO): Engram's logs are structlog's, JSON in production, and every
    library's INFO lines must not start appearing in them."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def note_session_id(note: str) -> str:
    """A note's own session, derived from its text: remembering it again changes nothing."""
    return "note-" + hashlib.sha256(note.strip().encode()).hexdigest()[:16]


def build_mcp_server(state: Callable[[], AppState]) -> MCPServer:
    """The MCP server with Engram's tools.

    Args:
        state: the app's long-lived objects, read at call time (the lifespan sets them).
    """
    with _root_logging_kept():
        server: MCPServer = MCPServer(name="engram", title="Engram memory",
                                      instructions=INSTRUCTIONS, version="0.1.0")

    def services(ctx: Context, namespace: str | None = None) -> tuple[AppState, Principal]:
        principal = _principal(ctx)
        with _as_tool_errors():
            if namespace is not None:
                principal.require_namespace(namespace)
            return state(), principal

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                             idempotent_hint=True))
    async def remember(
        ctx: Context,
        namespace: NamespaceArg,
        messages: Annotated[list[MessageIn] | None, Field(
            description="The conversation's messages (role user/assistant/system/tool, "
            "content, optional stable msg_id). Send the whole conversation or only its new "
            "turns: messages already stored are recognised and skipped.")] = None,
        session_id: Annotated[SessionArg | None, Field(
            description="The conversation's id; required with `messages`. Use the same id "
            "for the whole conversation.")] = None,
        note: Annotated[str | None, Field(
            min_length=1, max_length=20_000,
            description="Instead of messages: one fact or instruction to keep, in the "
            "user's words (\"I am allergic to peanuts\", \"我下周二去体检\").")] = None,
        tags: Annotated[list[str] | None, Field(max_length=32)] = None,
        pinned: Annotated[bool, Field(description=(
            "Pin what is stored: it is then part of every `context` and never forgotten. "
            "Only for what the user wants you to always know (a standing instruction, an "
            "allergy)."))] = False,
    ) -> StoreResult:
        """Store the current conversation, or a single note, in long-term memory.

        Give either `messages` with their `session_id`, or one `note`. Returns which
        memories were created or updated (built before the answer).
        """
        current, _ = services(ctx, namespace)
        if (messages is None) == (note is None):
            raise ToolError("invalid_request: give either messages (with session_id) or a note")
        with _as_tool_errors():
            if note is not None:
                body = StoreRequest.model_validate({
                    "namespace": namespace, "session_id": session_id or note_session_id(note),
                    "messages": [{"role": "user", "content": note}], "source": "mcp",
                    "tags": tags or [], "pinned": pinned, "wait": "built"})
            else:
                if session_id is None:
                    raise ToolError("invalid_request: session_id is required with messages: "
                                    "the conversation's id, the same at every call")
                body = StoreRequest.model_validate({
                    "namespace": namespace, "session_id": session_id, "source": "mcp",
                    "messages": [m.model_dump(exclude_none=True) for m in messages or []],
                    "tags": tags or [], "pinned": pinned, "wait": "built"})
            return await current.store.store(body)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def recall(
        ctx: Context,
        namespace: NamespaceArg,
        query: Annotated[str, Field(min_length=1, max_length=4000, description=(
            "The user's new message or a question, in any language."))],
        max_tokens: Annotated[int | None, Field(ge=1, le=32_000, description=(
            "Token budget of the memories (default 1500)."))] = None,
        top_k: Annotated[int, Field(ge=1, le=100)] = 10,
        language: LanguageArg = BlockLanguage.auto,
    ) -> RecallToolResult:
        """Find what the user said before that matters for `query`.

        Returns `block`, ready to add to the system prompt (empty when nothing relevant is
        stored: then say you do not know rather than guess), and the memories it holds, best
        first, with their ids and dates.
        """
        current, _ = services(ctx, namespace)
        with _as_tool_errors():
            body = RecallRequest.model_validate({
                "namespace": namespace, "query": query, "top_k": top_k,
                "language": language, **({"max_tokens": max_tokens} if max_tokens else {})})
            return RecallToolResult.from_response(await current.recall.recall(body))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def context(
        ctx: Context,
        namespace: NamespaceArg,
        max_tokens: Annotated[int | None, Field(ge=1, le=32_000, description=(
            "Token budget of the memories (default 1500)."))] = None,
        language: LanguageArg = BlockLanguage.auto,
        session_id: Annotated[SessionArg | None, Field(description=(
            "The conversation whose gist comes last (default: the latest one)."))] = None,
    ) -> ContextToolResult:
        """What to know about the user at the start of a conversation, before any question:
        pinned memories, durable facts (decisions, preferences, long-term facts), then the
        gist of the latest conversation, within the token budget.

        Put `block` into your system prompt. Call it once per conversation; use `recall`
        for questions after that.
        """
        current, _ = services(ctx, namespace)
        with _as_tool_errors():
            body = ContextRequest.model_validate({
                "namespace": namespace, "language": language, "session_id": session_id,
                **({"max_tokens": max_tokens} if max_tokens else {})})
            service = get_context_service(current)
            return ContextToolResult.from_response(await service.context(body))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                             idempotent_hint=True))
    async def forget(
        ctx: Context,
        memory_id: Annotated[str, Field(pattern=ID_PATTERN, description=(
            "The id of a memory, from recall, context or list_memories."))],
    ) -> MemoryBrief:
        """Forget one memory when the user asks you to, or when it is wrong or outdated.

        Soft: it leaves recall and context at once and can be restored by the user. A
        pinned memory is refused (`conflict`): ask the user to unpin it first.
        """
        current, principal = services(ctx)
        with _as_tool_errors():
            return MemoryBrief.from_public(await current.memories.forget(memory_id, principal))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def list_memories(
        ctx: Context,
        namespace: NamespaceArg,
        session_id: Annotated[SessionArg | None, Field(
            description="Only this conversation's memories.")] = None,
        category: Annotated[str | None, Field(description=(
            "Only this category: decision, preference, learning, task, progress, question, "
            "note or general."))] = None,
        pinned: Annotated[bool | None, Field(description=(
            "true: only pinned memories; false: only unpinned ones."))] = None,
        state: StateArg = MemoryState.active,
        limit: LimitArg = 20,
        offset: OffsetArg = 0,
    ) -> MemoryListResult:
        """List stored memories, newest first, to show the user what is remembered about
        them or to find the id of one to forget. To find memories about something, use
        `search_memories`."""
        current, _ = services(ctx, namespace)
        where = MemoryFilter(namespace=namespace, session_id=session_id, category=category,
                             state=state.value, pinned=pinned)
        with _as_tool_errors():
            found = await current.memories.list_memories(where, offset=offset, limit=limit)
        return MemoryListResult(count=found.count, offset=offset,
                                items=[MemoryBrief.from_public(m) for m in found.items])

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def search_memories(
        ctx: Context,
        namespace: NamespaceArg,
        query: Annotated[str, Field(min_length=1, max_length=4000, pattern=r"\S",
                                    description="Words to look for, in any language.")],
        session_id: Annotated[SessionArg | None, Field(
            description="Only this conversation's memories.")] = None,
        state: StateArg = MemoryState.active,
        limit: LimitArg = 20,
        offset: OffsetArg = 0,
    ) -> MemoryListResult:
        """Search the stored memories by text (keywords and meaning), best match first, with
        their ids: to show the user what is stored about something, or to find the memory to
        forget. To answer a question, `recall` is better (it returns a ready block)."""
        current, _ = services(ctx, namespace)
        where = MemoryFilter(namespace=namespace, session_id=session_id, state=state.value)
        with _as_tool_errors():
            found = await current.memories.list_memories(where, offset=offset, limit=limit,
                                                         q=query)
        return MemoryListResult(count=found.count, offset=offset,
                                items=[MemoryBrief.from_public(m) for m in found.items])

    return server

