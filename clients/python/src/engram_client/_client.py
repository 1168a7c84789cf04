"""`Client` (sync) and `AsyncClient`: the routes of `_routes.py` bound as methods, and the
two streaming routes, export and import."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import httpx

from engram_client import _routes as routes
from engram_client._errors import EngramConnectionError, error_from_response
from engram_client._routes import Call
from engram_client.types import ExportHeader, ImportResult

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8420"
# A store with wait="built" builds before it answers, an import of a large namespace too.
DEFAULT_TIMEOUT = 120.0
NDJSON = "application/x-ndjson"


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _result(call: Call[T], response: httpx.Response) -> T:
    if response.is_error:
        raise error_from_response(response)
    return call.parse(response)


def _split_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """NDJSON lines, each with its newline (the last one as sent), from arbitrary chunks."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line + b"\n"
    if pending:
        yield pending


async def _split_lines_async(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    pending = b""
    async for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line + b"\n"
    if pending:
        yield pending


def _header(line: bytes) -> ExportHeader:
    try:
        header = json.loads(line)
    except ValueError as exc:
        raise EngramConnectionError("the export's first line is not JSON") from exc
    return cast(ExportHeader, header)


class ExportStream:
    """An export being received: its `header` (read already) and its `lines()`.

    `lines()` yields every line of the file as bytes, the header first, each with its
    newline: written one after the other they are the export file, ready for
    `import_namespace`.
    """

    def __init__(self, lines: Iterator[bytes]) -> None:
        self._lines = lines
        self._first = next(lines, b"")
        self.header: ExportHeader = _header(self._first)

    @property
    def records(self) -> int:
        """Records the header announces (every line but the header)."""
        return sum(self.header.get("counts", {}).values())

    def lines(self) -> Iterator[bytes]:
        yield self._first
        yield from self._lines


class AsyncExportStream:
    """`ExportStream` for `AsyncClient`: `async for line in export.lines()`."""

    def __init__(self, lines: AsyncIterator[bytes], first: bytes) -> None:
        self._lines = lines
        self._first = first
        self.header: ExportHeader = _header(first)

    @property
    def records(self) -> int:
        return sum(self.header.get("counts", {}).values())

    async def lines(self) -> AsyncIterator[bytes]:
        yield self._first
        async for line in self._lines:
            yield line


def _describe(method: Any, route: Callable[..., Any], owner: str) -> None:
    """The route's name, docstring and signature (with `self`) on the bound method, for
    `help()` and editors."""
    method.__name__ = route.__name__
    method.__qualname__ = f"{owner}.{route.__name__}"
    method.__doc__ = route.__doc__
    signature = inspect.signature(route)
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = signature.replace(
        parameters=[self_parameter, *signature.parameters.values()])


def _sync(route: Callable[P, Call[T]]) -> Callable[Concatenate[Client, P], T]:
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.send(route(*args, **kwargs))
    _describe(method, route, "Client")
    return method


def _async(route: Callable[P, Call[T]]) -> Callable[Concatenate[AsyncClient, P], Awaitable[T]]:
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(route(*args, **kwargs))
    _describe(method, route, "AsyncClient")
    return method


class Client:
    """A synchronous Engram client.

    Args:
        base_url: the server, e.g. `http://127.0.0.1:8420`.
        api_key: sent as `Authorization: Bearer <key>` (a server without keys needs none).
        timeout: seconds for each request.
        http_client: an `httpx.Client` to use instead of the client's own (its base URL
            and headers are then yours to set; it is not closed by `close()`).

    Raises (every method):
        ApiError: a subclass per status (`NotFound`, `Forbidden`, ...), with the API's
            error `code`, `message` and `details`.
        EngramConnectionError: the server could not be reached or did not answer.

    Example:
        >>> with Client("http://127.0.0.1:8420", api_key="...") as engram:
        ...     engram.store("alice", "chat-1", [{"role": "user", "content": "下周二我要去体检"}])
        ...     print(engram.recall("alice", "我什么时候体检？")["block"])
    """

    def __init__(self, base_url: str = DEFAULT_URL, api_key: str | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT, http_client: httpx.Client | None = None
                 ) -> None:
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(
            base_url=base_url.rstrip("/"), headers=_headers(api_key), timeout=timeout)

    def send(self, call: Call[T]) -> T:
        """Send one described call and read its answer (the methods below use it)."""
        try:
            response = self._http.request(call.method, call.path, params=call.params,
                                          json=call.json)
        except httpx.TransportError as exc:
            raise EngramConnectionError(f"{call.method} {call.path}: {exc}") from exc
        return _result(call, response)

    store = _sync(routes.store)
    get_job = _sync(routes.get_job)
    recall = _sync(routes.recall)
    why_not = _sync(routes.why_not)
    context = _sync(routes.context)
    classify = _sync(routes.classify)
    list_memories = _sync(routes.list_memories)
    get_memory = _sync(routes.get_memory)
    update_memory = _sync(routes.update_memory)
    delete_memory = _sync(routes.delete_memory)
    access_memory = _sync(routes.access_memory)
    forget_memory = _sync(routes.forget_memory)
    restore_memory = _sync(routes.restore_memory)
    memory_evolution = _sync(routes.memory_evolution)
    list_namespaces = _sync(routes.list_namespaces)
    forget_stale = _sync(routes.forget_stale)
    list_sessions = _sync(routes.list_sessions)
    get_session = _sync(routes.get_session)
    delete_namespace = _sync(routes.delete_namespace)
    delete_session = _sync(routes.delete_session)
    delete_message = _sync(routes.delete_message)
    import_progress = _sync(routes.import_progress)
    run_compression = _sync(routes.run_compression)
    compression_status = _sync(routes.compression_status)
    get_policy = _sync(routes.get_policy)
    set_policy = _sync(routes.set_policy)
    memory_dump = _sync(routes.memory_dump)
    health = _sync(routes.health)
    ready = _sync(routes.ready)
    metrics = _sync(routes.metrics)

    @contextmanager
    def export_namespace(self, namespace: str, *, vectors: bool = False
                         ) -> Iterator[ExportStream]:
        """Stream a namespace's export file (`GET /v1/namespaces/{ns}/export`).

        Example:
            >>> with engram.export_namespace("alice") as export, open("alice.ndjson", "wb") as f:
            ...     f.writelines(export.lines())
        """
        path = f"/v1/namespaces/{routes.segment(namespace)}/export"
        try:
            with self._http.stream("GET", path, params={"vectors": vectors}) as response:
                if response.is_error:
                    response.read()
                    raise error_from_response(response)
                yield ExportStream(_split_lines(response.iter_bytes()))
        except httpx.TransportError as exc:
            raise EngramConnectionError(f"GET {path}: {exc}") from exc

    def import_namespace(self, namespace: str, content: bytes | Iterable[bytes]
                         ) -> ImportResult:
        """Import an export file into `namespace` (`POST /v1/namespaces/{ns}/import`).

        Args:
            content: the file's bytes, or an iterable of chunks (an open binary file, an
                export's `lines()`): sent as a stream.
        """
        path = f"/v1/namespaces/{routes.segment(namespace)}/import"
        call: Call[ImportResult] = Call("POST", path, routes.json_of(ImportResult))
        try:
            response = self._http.post(path, content=content, headers={"content-type": NDJSON})
        except httpx.TransportError as exc:
            raise EngramConnectionError(f"POST {path}: {exc}") from exc
        return _result(call, response)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class AsyncClient:
    """An asyncio Engram client: the methods of `Client`, awaited.

    Example:
        >>> async with AsyncClient("http://127.0.0.1:8420", api_key="...") as engram:
        ...     result = await engram.recall("alice", "which database did we pick?")
    """

    def __init__(self, base_url: str = DEFAULT_URL, api_key: str | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT,
                 http_client: httpx.AsyncClient | None = None) -> None:
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=_headers(api_key), timeout=timeout)

    async def send(self, call: Call[T]) -> T:
        """Send one described call and read its answer (the methods below use it)."""
        try:
            response = await self._http.request(call.method, call.path, params=call.params,
                                                json=call.json)
        except httpx.TransportError as exc:
            raise EngramConnectionError(f"{call.method} {call.path}: {exc}") from exc
        return _result(call, response)

    store = _async(routes.store)
    get_job = _async(routes.get_job)
    recall = _async(routes.recall)
    why_not = _async(routes.why_not)
    context = _async(routes.context)
    classify = _async(routes.classify)
    list_memories = _async(routes.list_memories)
    get_memory = _async(routes.get_memory)
    update_memory = _async(routes.update_memory)
    delete_memory = _async(routes.delete_memory)
    access_memory = _async(routes.access_memory)
    forget_memory = _async(routes.forget_memory)
    restore_memory = _async(routes.restore_memory)
    memory_evolution = _async(routes.memory_evolution)
    list_namespaces = _async(routes.list_namespaces)
    forget_stale = _async(routes.forget_stale)
    list_sessions = _async(routes.list_sessions)
    get_session = _async(routes.get_session)
    delete_namespace = _async(routes.delete_namespace)
    delete_session = _async(routes.delete_session)
    delete_message = _async(routes.delete_message)
    import_progress = _async(routes.import_progress)
    run_compression = _async(routes.run_compression)
    compression_status = _async(routes.compression_status)
    get_policy = _async(routes.get_policy)
    set_policy = _async(routes.set_policy)
    memory_dump = _async(routes.memory_dump)
    health = _async(routes.health)
    ready = _async(routes.ready)
    metrics = _async(routes.metrics)

    @asynccontextmanager
    async def export_namespace(self, namespace: str, *, vectors: bool = False
                               ) -> AsyncIterator[AsyncExportStream]:
        """Stream a namespace's export file; `async for line in export.lines()`."""
        path = f"/v1/namespaces/{routes.segment(namespace)}/export"
        try:
            async with self._http.stream("GET", path, params={"vectors": vectors}) as response:
                if response.is_error:
                    await response.aread()
                    raise error_from_response(response)
                lines = _split_lines_async(response.aiter_bytes())
                first = await anext(lines, b"")
                yield AsyncExportStream(lines, first)
        except httpx.TransportError as exc:
            raise EngramConnectionError(f"GET {path}: {exc}") from exc

    async def import_namespace(self, namespace: str,
                               content: bytes | Iterable[bytes] | AsyncIterable[bytes]
                               ) -> ImportResult:
        """Import an export file into `namespace`; `content` as for `Client`, or an async
        iterable of chunks (an `AsyncExportStream.lines()`)."""
        path = f"/v1/namespaces/{routes.segment(namespace)}/import"
        call: Call[ImportResult] = Call("POST", path, routes.json_of(ImportResult))
        body: bytes | AsyncIterable[bytes]
        body = content if isinstance(content, bytes | AsyncIterable) else _aiter(content)
        try:
            response = await self._http.post(path, content=body,
                                             headers={"content-type": NDJSON})
        except httpx.TransportError as exc:
            raise EngramConnectionError(f"POST {path}: {exc}") from exc
        return _result(call, response)

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


async def _aiter(chunks: Iterable[bytes]) -> AsyncIterator[bytes]:
    # httpx's AsyncClient streams async iterables only.
    for chunk in chunks:
        yield chunk

