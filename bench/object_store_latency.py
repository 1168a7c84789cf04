"""Recall and store latency on an object store against the local disk, in the same run.

The same synthetic store (bench/recall_latency.py's `populate`: bilingual memories, random
unit vectors, the queried namespace holding `--share` of them) is written once to a local
data directory and once to a bucket of an S3 API on loopback (moto's server mode,
tests/s3/moto_server.py), then the app starts on each (real model, real lifespan) and
answers the same recalls one after another, then the same small stores (`wait="built"`, four
messages: lease, raw log, build). On the bucket it runs twice: with
`read_consistency_seconds=0` (every read asks the store for the latest version) and with
`--consistency` seconds (reads trust the version they know for that long).

moto keeps objects in memory in this process, so the bucket's figures are the cost of the
object-store protocol (requests, no local page cache) without a network's round trips: add
the round trip of the real store times the requests per operation (printed) for a deployment
(docs/scaling.md).

Usage::

    PYTHONPATH=. .venv/bin/python bench/object_store_latency.py --size 10000 --requests 100
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from app.config import Settings  # noqa: E402
from app.embedding.pool import EmbeddingPool, load_model  # noqa: E402
from app.main import create_app  # noqa: E402
from bench.recall_latency import QUERIES, pct, populate, timed_recall  # noqa: E402
from tests.s3.moto_server import MotoS3  # noqa: E402


class RequestCounter:
    """Counts the requests moto serves (all of them go through its WSGI app)."""

    def __init__(self, server: MotoS3) -> None:
        self.count = 0
        app = server._server.app  # the _OneWriteAtATime wrapper
        inner = app._app

        def counted(environ: dict[str, Any], start_response: Any) -> Any:
            self.count += 1
            return inner(environ, start_response)

        app._app = counted


async def run_one(label: str, settings: Settings, model: Any, args: argparse.Namespace,
                  counter: RequestCounter | None) -> str:
    pool = EmbeddingPool.from_model(model, settings)
    namespace = await populate(settings, total=args.size, share=args.share, dim=pool.dim)
    app = create_app(settings, pool=pool)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.bench",
                                     timeout=120) as client:
            recalls: list[float] = []
            before = counter.count if counter else 0
            for i in range(args.warmup + args.requests):
                elapsed, _ = await timed_recall(client, namespace, QUERIES[i % len(QUERIES)])
                if i == args.warmup - 1 and counter:
                    before = counter.count
                if i >= args.warmup:
                    recalls.append(elapsed)
            recall_requests = ((counter.count - before) / args.requests) if counter else 0.0
            # The recalls' hit counts are written by a background flush that holds the
            # namespace's write lock (app/recall/hits.py): flushed here, timed on its own, so
            # the stores below measure stores, not a wait behind the flush (it took 10 s of a
            # local store's 10.9 s once, and made the bucket rows' store p95 37-44 s).
            t0 = time.perf_counter()
            await app.state.engram.hits.flush()
            flush_ms = (time.perf_counter() - t0) * 1000
            stores: list[float] = []
            before = counter.count if counter else 0
            for i in range(args.stores):
                messages = [{"msg_id": f"b{i}-{j}", "role": "user" if j % 2 == 0 else
                             "assistant", "content": f"bench note {i}.{j}: 周三 review of "
                             f"the budget report number {i * 10 + j}"} for j in range(4)]
                t0 = time.perf_counter()
                response = await client.post("/v1/store", json={
                    "namespace": namespace, "session_id": f"bench-{i}", "messages": messages,
                    "wait": "built"})
                stores.append((time.perf_counter() - t0) * 1000)
                response.raise_for_status()
            print(f"  stores, ms: {' '.join(f'{t:.0f}' for t in stores)}", file=sys.stderr)
            store_requests = ((counter.count - before) / args.stores) if counter else 0.0
    await pool.close()
    requests = (f"{recall_requests:.0f} / {store_requests:.0f}" if counter else "-")
    return (f"| {label} | {args.size:,} | {int(args.size * args.share):,} | "
            f"{pct(recalls, 50):.1f} | {pct(recalls, 95):.1f} | {pct(recalls, 99):.1f} "
            f"| {pct(stores, 50):.0f} | {pct(stores, 95):.0f} | {flush_ms:.0f} | {requests} |")


def base_settings(data_dir: Path, args: argparse.Namespace, **overrides: Any) -> Settings:
    return Settings(data_dir=data_dir, environment="testing", log_level=args.log_level,  # type: ignore[call-arg]
                    compression_enabled=False, embedding_threads=args.embedding_threads,
                    _env_file=None, **overrides)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--share", type=float, default=0.02)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--stores", type=int, default=20)
    parser.add_argument("--consistency", type=float, default=5.0,
                        help="read_consistency_seconds of the second bucket run")
    parser.add_argument("--embedding-threads", type=int, default=1)
    parser.add_argument("--log-level", default="WARNING",
                        help="the app's log level (INFO shows lock waits and holds)")
    args = parser.parse_args()
    model = load_model("", threads=args.embedding_threads)
    moto = MotoS3().start()
    counter = RequestCounter(moto)
    root = Path(tempfile.mkdtemp(prefix="engram-object-store-bench-"))
    rows = []
    try:
        runs: list[tuple[str, Settings, RequestCounter | None]] = [
            ("local disk", base_settings(root / "local", args), None)]
        for consistency in (0.0, args.consistency):
            bucket = moto.create_bucket()
            runs.append((f"bucket (moto), read consistency {consistency:g} s",
                         base_settings(root / bucket, args, read_consistency_seconds=consistency,
                                       **moto.settings(bucket)), counter))
        print("| tables on | memories | in the namespace | recall p50 ms | recall p95 ms | "
              "recall p99 ms | store p50 ms | store p95 ms | hit flush ms | "
              "S3 requests per recall / store |")
        print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
        for label, settings, count in runs:
            print(f"{label}:", file=sys.stderr)
            rows.append(await run_one(label, settings, model, args, count))
            print(rows[-1], flush=True)  # each row as soon as it is measured
    finally:
        moto.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
