"""Embedding speed through the pool: single-query latency and batch throughput, per model.

    PYTHONPATH=$PWD .venv/bin/python bench/embed_speed.py \
        --models multilingual-e5-small all-MiniLM-L6-v2

Sentences are generated here (memory-like statements, English and Chinese), not taken from
evaluation data. Throughput goes through `embed_many` (slices of `embedding_batch_size`);
latency through `embed_query`, one at a time (no micro-batching).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from app.config import Settings
from app.embedding.pool import EmbeddingPool, load_model

EN = ("On {d} I told my sister that the dentist appointment moved to {h} o'clock and that we "
      "picked LanceDB for the memory service.")
ZH = "{d}号我跟妹妹说牙医预约改到了{h}点，我们的记忆服务决定用 LanceDB 来存向量。"


def sentences(template: str, n: int) -> list[str]:
    return [template.format(d=i % 28 + 1, h=i % 12 + 1) for i in range(n)]


async def measure(name: str, *, threads: int, n: int, queries: int) -> dict[str, float]:
    settings = Settings(data_dir=Path("/tmp/engram-embed-speed"), embedding_model=name,
                        embedding_threads=threads, _env_file=None)  # type: ignore[call-arg]
    pool = EmbeddingPool.from_model(load_model(name, threads=threads), settings)
    try:
        await pool.embed_many(sentences(EN, 16))  # warm-up
        result: dict[str, float] = {}
        for label, template in (("en", EN), ("zh", ZH)):
            texts = sentences(template, n)
            started = time.perf_counter()
            await pool.embed_many(texts)
            result[f"throughput_{label}"] = n / (time.perf_counter() - started)
        latencies = []
        for i in range(queries):
            started = time.perf_counter()
            await pool.embed_query(f"when is the dentist appointment {i}" if i % 2 else
                                   f"牙医预约是哪天 {i}")
            latencies.append((time.perf_counter() - started) * 1000)
        result["query_p50_ms"] = statistics.median(latencies)
        return result
    finally:
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["multilingual-e5-small"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    for name in args.models:
        figures = asyncio.run(measure(name, threads=args.threads, n=args.texts,
                                      queries=args.queries))
        print(name, {k: round(v, 1) for k, v in figures.items()})


if __name__ == "__main__":
    main()
