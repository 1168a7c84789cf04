"""Where a small append's time goes (issue 14): one process, the real app, model and LanceDB.

Stores a 20-message session, then `--appends` 2-message appends in each store mode:
`wait="built"`, `wait=true` and `wait=false` (the last two each followed by its
background build; with `--back-to-back` `wait=false` as many again, each sent as soon as
the last is acknowledged, as bench/load.py does). Each append goes into a session of its
own, stored first (untimed, built) with 4 turns of ~650 characters, so every append grows
an open chunk to ~900 characters (`chunk_max_chars`): what `wait="built"` re-embeds before
it answers, and `wait=true` does not (only the two new turns, `hold_turn_vectors`). Prints, per
append, the wall time of the request and of every awaited step: repository calls (each a
LanceDB query or a group commit; `TableWriter.write`
is its wait in the writer's queue and its commit), the embedding pool, the builder's stages.
Steps overlap (reads run at once, commits are awaited by several callers), so the rows do
not add up to the request; they say which steps there are, how many, and what each costs.

With `--locomo FILE`, the same step timing for a LoCoMo-style import instead (one `"built"`
call per session, as bench/import_vs_mem0.py), per store call, with this process's CPU
seconds (all threads: model, LanceDB, Python) per call; `--profile OUT` writes a cProfile
of the timed part (the event-loop thread only).

With `--busy TENANTS,SESSIONS`, first the state bench/load.py's ingest leaves (TENANTS
namespaces storing SESSIONS sessions of 20 messages at once, all built, no idle pause after),
then the appends (into one of those namespaces) or the import.

Usage (from the repository root; `ENGRAM_EMBEDDING_MODEL=multilingual-e5-small` for e5):

    PYTHONPATH=. .venv/bin/python bench/append_steps.py --appends 20
    PYTHONPATH=. .venv/bin/python bench/append_steps.py --locomo ../shared/data/locomo-dev.json
    PYTHONPATH=. .venv/bin/python bench/append_steps.py --busy 16,20 --appends 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import functools
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from app.embedding.backends import load_model  # noqa: E402
from app.embedding.pool import EmbeddingPool  # noqa: E402
from app.main import create_app  # noqa: E402
from app.storage.repository import Repository  # noqa: E402
from app.storage.writer import TableWriter  # noqa: E402
from app.store.builder import MemoryBuilder  # noqa: E402
from app.store.service import StoreService  # noqa: E402
from tests.conftest import make_settings  # noqa: E402
from tests.procs import chat_messages  # noqa: E402

spans: dict[str, list[float]] = defaultdict(list)
# What a step belongs to: an acknowledgement before the build ("ack: "), a background
# build (the worker task's own context: "build: "), or "" for a wait="built" request, whose
# build is the request. A context variable: the worker runs while the client waits.
phase: contextvars.ContextVar[str] = contextvars.ContextVar("phase", default="build: ")


def timed(owner: type, name: str) -> None:
    """Replace `owner.name` (a coroutine function) by one that records its wall time."""
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            spans[f"{phase.get()}{owner.__name__}.{name}"].append(
                1000 * (time.perf_counter() - started))

    setattr(owner, name, wrapper)


def instrument() -> None:
    for name in vars(Repository):
        if not name.startswith("__") and asyncio.iscoroutinefunction(getattr(Repository, name)):
            timed(Repository, name)
    for name in ("embed_many", "embed_query", "embed_now"):
        timed(EmbeddingPool, name)
    for name in ("build_session", "_echoes", "_records", "hold_turn_vectors"):
        timed(MemoryBuilder, name)
    timed(TableWriter, "_commit")
    timed(TableWriter, "write")  # queued + committed, in the caller's phase
    for name in ("store", "_write_raw_log"):  # REQUEST minus store: HTTP, validation, auth
        timed(StoreService, name)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")


def report(mode: str, appends: int, *, what: str = "2-message appends") -> None:
    print(f"=== {what}, {mode} ({appends})")
    request = spans.get("REQUEST") or spans.get("ack: REQUEST") or []
    model = spans.get("ack: EmbeddingPool.embed_now") or spans.get(
        "ack: EmbeddingPool.embed_many") or spans.get("EmbeddingPool.embed_many") or []
    print(f"SUMMARY {mode}: request p50 {median(request):.1f} ms; model p50 "
          f"{median(model):.1f} ms in the request; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, values in sorted(spans.items(), key=lambda kv: -sum(kv[1])):
        ordered = sorted(values)
        print(f"{name:49s} calls/append {len(values) / appends:4.1f}  "
              f"ms/append {sum(values) / appends:7.1f}  p50 {ordered[len(ordered) // 2]:7.1f}  "
              f"max {ordered[-1]:7.1f}")
    spans.clear()


async def run(appends: int, data_dir: Path, *, threads: int, locomo: str = "",
              conversations: int = 1, profile: str = "", busy: tuple[int, int] = (0, 0),
              back_to_back: bool = False) -> None:
    settings = make_settings(data_dir, compression_enabled=False, embedding_threads=threads,
                             log_level="WARNING")
    # The configured model (ENGRAM_EMBEDDING_MODEL; empty: the default), as the server loads it.
    model = await asyncio.to_thread(load_model, settings.embedding_model, threads=threads)
    print(f"model {settings.embedding_model or 'default'}, {threads} thread(s)")
    pool = EmbeddingPool.from_model(model, settings)
    app = create_app(settings, pool=pool)
    rng = random.Random(14)
    async with app.router.lifespan_context(app):
        store = app.state.engram.store
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench",
                                     timeout=300) as client:
            async def post(session_id: str, messages: list[dict[str, Any]], wait: bool | str,
                           *, namespace: str = "bench") -> None:
                response = await client.post("/v1/store", json={
                    "namespace": namespace, "session_id": session_id, "messages": messages,
                    "wait": wait})
                response.raise_for_status()

            if locomo:
                if busy[0]:
                    await ingest(post, store, *busy)
                await import_locomo(post, locomo, conversations, profile)
                await pool.close()
                return
            namespace = "bench"
            if busy[0]:
                namespace = await ingest(post, store, *busy)
            await post("seed", chat_messages(rng, 20, id_prefix="seed-"), "built",
                       namespace=namespace)
            modes: list[tuple[str, bool | str]] = [
                ('wait="built"', "built"), ("wait=true", True), ("wait=false", False)]
            if back_to_back:
                modes.append(("wait=false back to back", False))
            session_chars: list[float] = []
            for mode, wait in modes:
                back = "back" in mode
                for i in range(appends + 3):  # the first 3 warm up
                    session_id = f"append-{wait}" if back else f"append-{wait}-{i}"
                    appended = chat_messages(rng, 2, id_prefix=f"{mode}{i}-")
                    if not back:  # a session of its own, ~650 characters, built (untimed)
                        phase.set("seed: ")
                        seed = seed_turns(rng, f"{mode}{i}s-")
                        await post(session_id, seed, "built", namespace=namespace)
                        session_chars.append(sum(len(f"{m['role']}: {m['content']}") + 1
                                                 for m in seed + appended))
                        for name in [n for n in spans if n.startswith("seed: ")]:
                            del spans[name]
                    if i == 3:
                        spans.clear()
                    phase.set("" if wait == "built" else "ack: ")
                    started = time.perf_counter()
                    await post(session_id, appended, wait, namespace=namespace)
                    spans[f"{phase.get()}REQUEST"].append(1000 * (time.perf_counter() - started))
                    if wait != "built" and not back:
                        started = time.perf_counter()
                        await store.idle()
                        spans["build: background build (until idle)"].append(
                            1000 * (time.perf_counter() - started))
                if wait != "built":
                    await store.idle()
                if session_chars:
                    print(f"grown session: {median(session_chars):.0f} characters (median)")
                    session_chars.clear()
                report(mode, appends)
    await pool.close()


def seed_turns(rng: random.Random, id_prefix: str, *, chars: int = 650
               ) -> list[dict[str, Any]]:
    """4 chat turns of about `chars` characters in all (each cut to a quarter): with the
    two appended ones (~250 characters), an open chunk of ~900 characters."""
    turns = chat_messages(rng, 4, id_prefix=id_prefix)
    for turn in turns:
        turn["content"] = turn["content"][:chars // 4]
    return turns


async def ingest(post: Callable[..., Any], store: StoreService, tenants: int,
                 sessions: int) -> str:
    """A busy store first, as bench/load.py's ingest leaves it: `tenants` namespaces each
    storing `sessions` sessions of 20 messages at once, alternately `wait=true` and
    `wait=false`, all built; the appends then go into one of those namespaces."""
    phase.set("ingest: ")
    started = time.perf_counter()

    async def tenant(index: int) -> None:
        trng = random.Random(1000 + index)
        for s in range(sessions):
            await post(f"s{s}", chat_messages(trng, 20, id_prefix=f"t{index}s{s}-"),
                       (s + index) % 2 == 0, namespace=f"tenant-{index}")

    await asyncio.gather(*(tenant(i) for i in range(tenants)))
    await store.idle()
    spans.clear()
    print(f"busy store: {tenants} tenants x {sessions} sessions x 20 messages built in "
          f"{time.perf_counter() - started:.1f} s")
    return f"tenant-{min(2, tenants - 1)}"


async def import_locomo(post: Callable[..., Any], path: str, conversations: int,
                        profile: str) -> None:
    """One `wait="built"` store per LoCoMo session (bench/locomo.py's messages), after one
    untimed warm-up session in another namespace; steps and CPU seconds per call."""
    import cProfile

    from bench.locomo import load

    sessions = [(s.namespace, sid, msgs) for s in load(Path(path), limit=conversations)
                for sid, msgs in s.sessions]
    namespace, session_id, messages = sessions[0]
    await post_to(post, "warm-up", session_id, messages)
    spans.clear()
    profiler = cProfile.Profile() if profile else None
    # The event loop's own CPU (this thread: HTTP, validation, the store's Python) apart from
    # the process's (the model's thread and LanceDB's too): the first is what the store code
    # costs, and the least disturbed by other processes' load.
    cpu, wall, loop_cpu = time.process_time(), time.perf_counter(), time.thread_time()
    if profiler is not None:
        profiler.enable()
    for namespace, session_id, messages in sessions:
        phase.set("")
        started = time.perf_counter()
        await post_to(post, namespace, session_id, messages)
        spans["REQUEST"].append(1000 * (time.perf_counter() - started))
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    loop_cpu = time.thread_time() - loop_cpu
    turns = sum(len(m) for _, _, m in sessions)
    report('wait="built"', len(sessions), what="LoCoMo sessions, one store call each")
    print(f"{len(sessions)} calls, {turns} turns: {wall:.1f} s wall ({turns / wall:.1f} turns/s), "
          f"{cpu:.2f} CPU s ({cpu / len(sessions):.3f} per call, all threads; "
          f"{loop_cpu / len(sessions):.3f} on the event loop)")


async def post_to(post: Callable[..., Any], namespace: str, session_id: str,
                  messages: list[dict[str, Any]]) -> None:
    await post(session_id, messages, "built", namespace=namespace)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--appends", type=int, default=20, help="per mode")
    parser.add_argument("--threads", type=int, default=1, help="the model's torch threads")
    parser.add_argument("--locomo", default="", help="LoCoMo JSON: time an import instead")
    parser.add_argument("--conversations", type=int, default=1, help="with --locomo")
    parser.add_argument("--profile", default="", help="with --locomo: cProfile output file")
    parser.add_argument("--busy", default="0,0", metavar="TENANTS,SESSIONS",
                        help="first store TENANTS x SESSIONS sessions of 20 messages at once "
                             "(as bench/load.py's ingest), then append into one of them")
    parser.add_argument("--back-to-back", action="store_true",
                        help="then as many wait=false appends again, each sent as soon as the "
                        "last is acknowledged (as bench/load.py's append phase: each ack "
                        "competes with the builds of the previous ones)")
    parser.add_argument("--data-dir", default="", help="keep the store here (default: a "
                        "temporary directory, removed after)")
    args = parser.parse_args()
    tenants, sessions = (int(x) for x in args.busy.split(","))
    instrument()
    with tempfile.TemporaryDirectory(prefix="engram-append-") as tmp:
        asyncio.run(run(args.appends, Path(args.data_dir or tmp), threads=args.threads,
                        locomo=args.locomo,
                        conversations=args.conversations, profile=args.profile,
                        busy=(tenants, sessions), back_to_back=args.back_to_back))


if __name__ == "__main__":
    main()
