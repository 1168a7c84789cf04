"""What the pending search (read-your-writes, app/recall/pending.py) adds to a recall.

A store on a temporary directory (real model, real lifespan): the queried namespace holds
`--sessions` sessions stored with wait=true; the raw log holds `--log-rows` more messages of
other namespaces (written through the repository, most built, some pending). Then recalls
are timed one after another, `--requests` per case:

- `none`: nothing pending in the namespace (the common case: one version check);
- `unrelated`: three pending messages that share no word with the questions;
- `matching`: a pending message that answers the question (a provisional memory returned);
- `built`: the same once its build landed (a real memory returned: `matching`'s baseline);
- each again with `pending_cache_max_rows=0` (`--uncached`: the raw log read every recall).

Besides each case's wall time (median, p95), the pending search's own time is measured by
wrapping its two steps: the read of the namespace's pending messages (it runs while the
question is embedded) and the candidates (keyword match, built check, vectors).

Usage::

    PYTHONPATH=. .venv/bin/python bench/pending_recall.py
    PYTHONPATH=. .venv/bin/python bench/pending_recall.py --log-rows 100000 --uncached

Copied into a checkout of the code before read-your-writes, it times the same cases
without the pending search (its columns then read 0): the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from app.config import Settings  # noqa: E402
from app.main import create_app  # noqa: E402
from app.storage.records import MessageRecord  # noqa: E402

try:  # absent before read-your-writes: the same cases then time the code without it
    from app.recall.pending import PendingSearch
except ImportError:  # pragma: no cover
    PendingSearch = None  # type: ignore[assignment,misc]

NAMESPACE = "alice"
QUESTIONS = ["When does my passport expire?", "我的护照什么时候到期？"]
ANSWER = "My new passport expires in March 2031; 我的新护照二〇三一年三月到期。"
UNRELATED = ["We should repaint the fence next spring.", "晚饭想吃饺子。", "The cat slept all day."]
TOPICS = ["gym schedule", "dentist visit", "garden plans", "book club", "car insurance",
          "weekend hike", "piano lessons", "team offsite", "tax forms", "birthday gift"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


class Timer:
    """Wraps the pending search's steps and collects their times (ms)."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = defaultdict(list)

    def wrap(self, name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                self.times[name].append((time.perf_counter() - started) * 1000)
        return timed


async def populate(app: Any, client: httpx.AsyncClient, args: argparse.Namespace) -> None:
    for s in range(args.sessions):
        topic = TOPICS[s % len(TOPICS)]
        response = await client.post("/v1/store", json={
            "namespace": NAMESPACE, "session_id": f"s{s}", "messages": [
                {"msg_id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
                 "content": f"Session {s}, about the {topic}: note {i} on the {topic}."}
                for i in range(4)], "wait": "built"})
        assert response.status_code == 200, response.text
    repo = app.state.engram.repo
    now = datetime.now(UTC)
    batch: list[MessageRecord] = []
    for i in range(args.log_rows):
        batch.append(MessageRecord(
            namespace=f"tenant-{i % 200}", session_id=f"s{i // 1000}", msg_id=f"m{i}",
            seq=i, content=f"Message {i} of another tenant about the {TOPICS[i % 10]}.",
            content_hash=f"h{i}", received_at=now,
            state="pending" if i % 50 == 0 else "done"))
        if len(batch) == 5_000:
            await repo.upsert_messages(batch)
            batch = []
    await repo.upsert_messages(batch)
    await repo.compact("messages")


async def timed_recalls(client: httpx.AsyncClient, requests: int) -> list[float]:
    wall = []
    for i in range(requests + 2):  # two warm-up recalls
        started = time.perf_counter()
        response = await client.post("/v1/recall", json={
            "namespace": NAMESPACE, "query": QUESTIONS[i % len(QUESTIONS)]})
        assert response.status_code == 200, response.text
        if i >= 2:
            wall.append((time.perf_counter() - started) * 1000)
    return wall


async def run(args: argparse.Namespace, *, cached: bool) -> list[str]:
    data_dir = Path(tempfile.mkdtemp(prefix="engram-pending-"))
    overrides: dict[str, Any] = {} if cached else {"pending_cache_max_rows": 0}
    settings = Settings(data_dir=data_dir, environment="testing", log_level="ERROR",  # type: ignore[call-arg]
                        compression_enabled=False, _env_file=None, **overrides)
    app = create_app(settings)
    rows = []
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://engram.bench",
                                         timeout=120) as client:
                await populate(app, client, args)
                await app.state.engram.store.idle()
                timer = Timer()
                if PendingSearch is not None:
                    PendingSearch.read = timer.wrap(  # type: ignore[method-assign]
                        "read", PendingSearch.read)
                    PendingSearch.candidates = timer.wrap(  # type: ignore[method-assign]
                        "candidates", PendingSearch.candidates)
                engram = app.state.engram
                # `built`: the same answer once its build landed (a real memory), the
                # baseline of `matching`: a recall that finds its answer does more (hop).
                cases: list[tuple[str, list[str]]] = [
                    ("none", []), ("unrelated", UNRELATED), ("matching", [ANSWER]),
                    ("built", [])]
                for case, contents in cases:
                    timer.times.clear()
                    async with engram.locks.hold(NAMESPACE):  # the builds wait: still pending
                        for i, content in enumerate(contents):
                            response = await client.post("/v1/store", json={
                                "namespace": NAMESPACE, "session_id": f"new-{case}",
                                "wait": False, "messages": [
                                    {"msg_id": f"n{i}", "role": "user", "content": content}]})
                            assert response.status_code == 202, response.text
                        wall = await timed_recalls(client, args.requests)
                    await engram.store.idle()
                    read = timer.times["read"] or [0.0]  # warm-up recalls included
                    found = timer.times["candidates"] or [0.0]
                    rows.append(
                        f"| {case} | {'yes' if cached else 'no'} | {len(wall)} | "
                        f"{statistics.median(wall):.1f} | {pct(wall, 95):.1f} | "
                        f"{statistics.median(read):.2f} | {statistics.median(found):.2f} | "
                        f"{pct(found, 95):.2f} |")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--log-rows", type=int, default=20_000)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--uncached", action="store_true",
                        help="also measure with pending_cache_max_rows=0")
    args = parser.parse_args()
    original = None if PendingSearch is None else (PendingSearch.read,
                                                   PendingSearch.candidates)
    rows = await run(args, cached=True)
    if args.uncached and original is not None:
        PendingSearch.read, PendingSearch.candidates = original  # type: ignore[method-assign]
        rows += await run(args, cached=False)
    print(f"{args.sessions} sessions in {NAMESPACE!r}, {args.log_rows:,} other raw-log rows; "
          "times in ms (read and candidates: per search, a recall may search 1-3 times)")
    print("| pending | cached | recalls | p50 | p95 | read p50 | candidates p50 | "
          "candidates p95 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
