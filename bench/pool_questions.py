"""A question's time in the embedding pool alone, idle: 100 sequential `embed_query` calls
(1 client) and 2 × 100 concurrent ones (2 clients), p50 / p90.

Isolates the pool from HTTP and search when comparing two versions of it (run each version's
checkout alternately, under the same load).

Usage (from the repository root):

    PYTHONPATH=. .venv/bin/python bench/pool_questions.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.embedding.backends import load_model
from app.embedding.pool import EmbeddingPool

QUESTIONS = ("Where is the meeting with Alice?", "我的预算是多少？",
             "What do I prefer to drink?", "下周二要做什么？")


async def _ask(pool: EmbeddingPool, index: int) -> list[float]:
    latencies = []
    for turn in range(100):
        started = time.perf_counter()
        await pool.embed_query(f"{QUESTIONS[(index + turn) % 4]} {turn}")
        latencies.append(time.perf_counter() - started)
    return latencies


async def main() -> None:
    pool = EmbeddingPool(load_model("", threads=1), name="bench", batch_size=32,
                         batch_wait_ms=2)
    try:
        await pool.embed_many(["user: 我下周二上午去看牙医 dentist on Tuesday"] * 8)
        for _ in range(20):  # warm: the shapes a question pads to
            await pool.embed_query(QUESTIONS[0])
        for clients in (1, 2):
            runs = await asyncio.gather(*(_ask(pool, i) for i in range(clients)))
            latencies = sorted(x for run in runs for x in run)
            print(f"{clients} client(s): p50 {1000 * statistics.median(latencies):.1f} ms, "
                  f"p90 {1000 * latencies[int(len(latencies) * 0.9)]:.1f} ms")
    finally:
        await pool.close()


if __name__ == "__main__":
    asyncio.run(main())
