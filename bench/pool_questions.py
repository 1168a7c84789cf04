"""A question's time in the embedding pool alone, idle: 100 sequential `embed_query` calls
(1 client) and 2 × 100 concurrent ones (2 clients), p50 / p90.

Isolates the pool from HTTP and search when comparing two versions of it (run each version's
checkout alternately, under the same load).

`--busy` runs what a build does meanwhile: stored text encoded without pause (the pool's
stored-text thread) and the classifier's Python in a thread, both at `build_niceness` 10,
as in the server; `--switch-ms` sets the interpreter's GIL switch interval first.

Usage (from the repository root):

    PYTHONPATH=. .venv/bin/python bench/pool_questions.py [--busy] [--switch-ms 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.classify.analyzer import analyze
from app.embedding.backends import load_model
from app.embedding.pool import EmbeddingPool
from app.ops.priority import lower_thread_priority

QUESTIONS = ("Where is the meeting with Alice?", "我的预算是多少？",
             "What do I prefer to drink?", "下周二要做什么？")


async def _ask(pool: EmbeddingPool, index: int) -> list[float]:
    latencies = []
    for turn in range(100):
        started = time.perf_counter()
        await pool.embed_query(f"{QUESTIONS[(index + turn) % 4]} {turn}")
        latencies.append(time.perf_counter() - started)
    return latencies


_STORED = ["user: 我下周二上午去看牙医，顺便把上个月的体检报告带上。 assistant: 好的，"
           "I will remind you on Monday evening about the dentist and the report."] * 16


def _classify(stop: threading.Event) -> None:
    lower_thread_priority(10)
    while not stop.is_set():
        for text in _STORED[:4]:
            analyze(f"{text} {time.perf_counter()}")


async def _store(pool: EmbeddingPool, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await pool.embed_many(_STORED)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--switch-ms", type=float, default=None)
    args = parser.parse_args()
    if args.switch_ms is not None:
        sys.setswitchinterval(args.switch_ms / 1000)
    pool = EmbeddingPool(load_model("", threads=1), name="bench", batch_size=32,
                         batch_wait_ms=2, stored_niceness=10)
    stop_thread, stop_store = threading.Event(), asyncio.Event()
    busy: list[asyncio.Task[None]] = []
    try:
        if args.busy:
            busy.append(asyncio.create_task(asyncio.to_thread(_classify, stop_thread)))
            busy.append(asyncio.create_task(_store(pool, stop_store)))
        await pool.embed_many(["user: 我下周二上午去看牙医 dentist on Tuesday"] * 8)
        for _ in range(20):  # warm: the shapes a question pads to
            await pool.embed_query(QUESTIONS[0])
        for clients in (1, 2):
            runs = await asyncio.gather(*(_ask(pool, i) for i in range(clients)))
            latencies = sorted(x for run in runs for x in run)
            print(f"{clients} client(s): p50 {1000 * statistics.median(latencies):.1f} ms, "
                  f"p90 {1000 * latencies[int(len(latencies) * 0.9)]:.1f} ms")
    finally:
        stop_thread.set()
        stop_store.set()
        await asyncio.gather(*busy)
        await pool.close()


if __name__ == "__main__":
    asyncio.run(main())
