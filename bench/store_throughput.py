"""Store throughput through the HTTP API, against the embedding model's raw throughput.

What it runs (issue 2, "Measure"), all in one run on this machine:

1. A real `engram serve` process (uvicorn, loopback, fresh data directory; tests/procs.py)
   imports N messages: `--sessions` × `--messages` realistic chat turns (mixed English and
   Chinese, 60–200 characters, generated from templates with a fixed seed), spread over
   `--namespaces` users, sent as one request per session with `wait="built"` by `--clients`
   concurrent clients. Store throughput = N / wall time.
2. The same N messages are sent again: the cost of a re-store, as % of the first store.
3. The server's resident memory with the model loaded (VmRSS / VmHWM from /proc).
4. The texts of the stored memories are read back from the API, the server is stopped, and
   this process times `model.encode` on exactly those texts, with the same model, thread
   count and batch size as the server. Raw throughput = N / encode time, so
   ratio = store throughput / raw throughput = encode time / store time (target ≥ 0.8).
   The raw figure encodes all the texts in slices of the server's batch size;
   `--per-session-encode` also times one pass per session's chunks, as a store does.
5. The same ratio in CPU seconds (raw encode CPU / server CPU during the import): the
   machine is shared, and CPU time is much less sensitive to other processes' load than
   wall time, so it tells whether a poor wall ratio is overhead or noise.

Usage (from the repository root):

    PYTHONPATH=. .venv/bin/python bench/store_throughput.py
    PYTHONPATH=. .venv/bin/python bench/store_throughput.py --sessions 20 --messages 50  # quick

Prints a table and writes JSON to bench/results/ (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from app.config import Settings  # noqa: E402
from tests.procs import ServerProcess, chat_messages  # noqa: E402

RESULTS_DIR = REPO_ROOT / "bench" / "results"
TARGET_RATIO = 0.8
TARGET_RESTORE_PERCENT = 5.0
TARGET_RSS_GB = 1.5

Json = dict[str, Any]


def build_workload(args: argparse.Namespace) -> list[Json]:
    """One store request per session, sessions dealt round-robin to the namespaces."""
    rng = random.Random(args.seed)
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    requests = []
    for index in range(args.sessions):
        msgs = chat_messages(rng, args.messages)
        began = start + timedelta(hours=7 * index)
        for turn, message in enumerate(msgs):
            message["timestamp"] = (began + timedelta(seconds=40 * turn)).isoformat()
        requests.append({
            "namespace": f"bench-user-{index % args.namespaces}",
            "session_id": f"chat-{index:04d}",
            "messages": msgs,
            "source": "telegram",
            "wait": "built",
        })
    return requests


async def send_all(base_url: str, requests: list[Json], clients: int
                   ) -> tuple[float, list[float], list[Json]]:
    """Send every request with `clients` concurrent clients; wall seconds, latencies, bodies."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(len(requests)):
        queue.put_nowait(index)
    latencies: list[float] = []
    bodies: list[Json] = [{} for _ in requests]
    limits = httpx.Limits(max_connections=clients, keepalive_expiry=2.0)

    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits) as http:
        async def client() -> None:
            while not queue.empty():
                index = queue.get_nowait()
                began = time.perf_counter()
                response = await http.post("/v1/store", json=requests[index])
                latencies.append(time.perf_counter() - began)
                if response.status_code != 200:
                    raise RuntimeError(f"store failed: {response.status_code} {response.text}")
                bodies[index] = response.json()

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        wall = time.perf_counter() - started
    return wall, latencies, bodies


async def memory_texts(base_url: str, requests: list[Json]) -> dict[str, list[str]]:
    """Session -> texts of its stored memories, read back through the API."""
    texts: dict[str, list[str]] = {}
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as http:
        for request in requests:
            response = await http.get("/v1/memories", params={
                "namespace": request["namespace"], "session_id": request["session_id"],
                "limit": 500})
            response.raise_for_status()
            page = response.json()
            assert page["count"] == len(page["items"]), "more than 500 memories in a session"
            texts[request["session_id"]] = [m["text"] for m in page["items"]]
    return texts


def encode_seconds(texts_by_session: dict[str, list[str]], threads: int, batch_size: int,
                   *, per_session: bool, model_name: str = "") -> dict[str, float]:
    """Time the bare model (`model_name`, default the default) on all the texts in slices of
    `batch_size`, as the server encodes a store (wall and CPU), optionally once per session;
    one untimed warm-up slice (the server was warm too)."""
    from app.embedding.backends import load_model

    model = load_model(model_name, threads=threads)
    every = [t for texts in texts_by_session.values() for t in texts]

    def encode(texts: list[str]) -> None:
        for i in range(0, len(texts), batch_size):
            model.encode_passages(texts[i: i + batch_size])

    encode(every[:batch_size])
    began, cpu_began = time.perf_counter(), time.process_time()
    encode(every)
    timings = {"one_call": time.perf_counter() - began,
               "one_call_cpu": time.process_time() - cpu_began}
    if per_session:
        began = time.perf_counter()
        for texts in texts_by_session.values():
            encode(texts)
        timings["per_session"] = time.perf_counter() - began
    return timings


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(args: argparse.Namespace) -> Json:
    requests = build_workload(args)
    n_messages = sum(len(r["messages"]) for r in requests)
    chars = [len(m["content"]) for r in requests for m in r["messages"]]
    batch_size = Settings.model_fields["embedding_batch_size"].default
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp:
        server = ServerProcess(Path(tmp) / "data", name="bench-server", env={
            "ENGRAM_EMBEDDING_THREADS": str(args.threads),
            "ENGRAM_ENVIRONMENT": "production",
            "ENGRAM_LOG_LEVEL": "INFO",
        })
        with server:
            rss_loaded = server.memory_kib()
            print(f"server ready on {server.base_url} (pid {server.pid}); importing "
                  f"{n_messages} messages...", flush=True)
            cpu_began = server.cpu_seconds()
            first_wall, first_lat, first_bodies = asyncio.run(
                send_all(server.base_url, requests, args.clients))
            first_cpu = server.cpu_seconds() - cpu_began
            rss_after_first = server.memory_kib()
            print(f"first store: {first_wall:.1f} s; storing the same messages again...",
                  flush=True)
            cpu_began = server.cpu_seconds()
            again_wall, again_lat, again_bodies = asyncio.run(
                send_all(server.base_url, requests, args.clients))
            again_cpu = server.cpu_seconds() - cpu_began
            rss_after = server.memory_kib()
            texts = asyncio.run(memory_texts(server.base_url, requests))
        if server.returncode not in (0, -15):
            print(server.log_tail(), file=sys.stderr)

    new = sum(b["new"] for b in first_bodies)
    again_new = sum(b["new"] + b["updated"] for b in again_bodies)
    if new != n_messages or again_new != 0:
        raise RuntimeError(f"unexpected counts: first new={new}, re-store new+updated="
                           f"{again_new} of {n_messages}")
    n_memories = sum(len(t) for t in texts.values())
    print(f"encoding the {n_memories} memory texts with the bare model...", flush=True)
    encoded = encode_seconds(texts, args.threads, batch_size,
                             per_session=args.per_session_encode)

    store_rate = n_messages / first_wall
    raw_rate = n_messages / encoded["one_call"]
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_before": load_before, "load_after": os.getloadavg()},
        "server": "real uvicorn process (`python -m app.cli serve`), loopback HTTP",
        "workload": {
            "messages": n_messages, "sessions": args.sessions,
            "messages_per_session": args.messages, "namespaces": args.namespaces,
            "clients": args.clients, "wait": "built", "seed": args.seed,
            "embedding_threads": args.threads, "batch_size": batch_size,
            "content_chars": {"min": min(chars), "mean": round(statistics.mean(chars), 1),
                              "max": max(chars)},
            "memories": n_memories,
            "memory_text_chars_mean": round(statistics.mean(
                len(t) for ts in texts.values() for t in ts), 1),
        },
        "first_store": {
            "seconds": round(first_wall, 2), "messages_per_s": round(store_rate, 1),
            "server_cpu_seconds": round(first_cpu, 2),
            "request_p50_s": round(percentile(first_lat, 0.5), 3),
            "request_p95_s": round(percentile(first_lat, 0.95), 3),
        },
        "raw_model": {
            "seconds_one_call": round(encoded["one_call"], 2),
            "cpu_seconds_one_call": round(encoded["one_call_cpu"], 2),
            "seconds_per_session": round(encoded["per_session"], 2)
            if "per_session" in encoded else None,
            "messages_per_s": round(raw_rate, 1),
            "memories_per_s": round(n_memories / encoded["one_call"], 1),
        },
        "ratio": round(store_rate / raw_rate, 3),
        "ratio_cpu": round(encoded["one_call_cpu"] / first_cpu, 3),
        "ratio_vs_per_session_encode": round(encoded["per_session"] / first_wall, 3)
        if "per_session" in encoded else None,
        "restore": {
            "seconds": round(again_wall, 2),
            "percent_of_first": round(100 * again_wall / first_wall, 2),
            "server_cpu_seconds": round(again_cpu, 2),
            "cpu_percent_of_first": round(100 * again_cpu / first_cpu, 2),
            "request_p50_s": round(percentile(again_lat, 0.5), 3),
        },
        "server_memory_mib": {
            "rss_model_loaded": round(rss_loaded["VmRSS"] / 1024),
            "rss_after_first_store": round(rss_after_first["VmRSS"] / 1024),
            "rss_after_restore": round(rss_after["VmRSS"] / 1024),
            "peak_hwm": round(rss_after["VmHWM"] / 1024),
        },
        "targets": {"ratio": TARGET_RATIO, "restore_percent": TARGET_RESTORE_PERCENT,
                    "rss_gb": TARGET_RSS_GB},
    }


def report(result: Json) -> str:
    w, first, raw = result["workload"], result["first_store"], result["raw_model"]
    peak_gb = result["server_memory_mib"]["peak_hwm"] / 1024

    def verdict(ok: bool) -> str:
        return "ok" if ok else "MISSED"

    rows = [
        ("load average", "{:.1f} before, {:.1f} after (1 min; {} CPUs)".format(
            result["machine"]["load_before"][0], result["machine"]["load_after"][0],
            result["machine"]["cpus"]), ""),
        ("workload", f"{w['messages']} msgs = {w['sessions']} sessions x "
                     f"{w['messages_per_session']}, {w['namespaces']} namespaces, "
                     f"{w['clients']} clients, wait=built", ""),
        ("memories built", f"{w['memories']} (mean {w['memory_text_chars_mean']} chars)", ""),
        ("first store", f"{first['seconds']} s = {first['messages_per_s']} msg/s "
                        f"(request p50 {first['request_p50_s']} s, p95 "
                        f"{first['request_p95_s']} s)", ""),
        ("raw model", f"{raw['seconds_one_call']} s = {raw['messages_per_s']} msg/s "
                      f"({raw['memories_per_s']} texts/s, {w['embedding_threads']} threads)"
                      + (f"; per-session calls {raw['seconds_per_session']} s"
                         if raw["seconds_per_session"] else ""), ""),
        ("ratio store/raw", f"{result['ratio']} wall; {result['ratio_cpu']} in CPU seconds "
                            f"({raw['cpu_seconds_one_call']} / {first['server_cpu_seconds']})",
         f"target >= {TARGET_RATIO}: {verdict(result['ratio'] >= TARGET_RATIO)}"),
        ("re-store", f"{result['restore']['seconds']} s = "
                     f"{result['restore']['percent_of_first']} % of first (CPU "
                     f"{result['restore']['cpu_percent_of_first']} %)",
         f"target <= {TARGET_RESTORE_PERCENT} %: "
         f"{verdict(result['restore']['percent_of_first'] <= TARGET_RESTORE_PERCENT)}"),
        ("server RSS", "loaded {rss_model_loaded} MiB, after import {rss_after_first_store} "
                       "MiB, peak {peak_hwm} MiB".format(**result["server_memory_mib"]),
         f"target <= {TARGET_RSS_GB} GB: {verdict(peak_gb <= TARGET_RSS_GB)}"),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name:<{width}}  {value}  {target}".rstrip() for name, value, target in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--messages", type=int, default=100, help="messages per session")
    parser.add_argument("--namespaces", type=int, default=4, help="users the sessions belong to")
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients")
    parser.add_argument("--threads", type=int, default=2,
                        help="embedding threads, for the server and the raw model alike")
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--per-session-encode", action="store_true",
                        help="also time the raw model one call per session")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    result = run(args)
    result["command"] = " ".join([Path(sys.executable).name, *sys.argv])
    print()
    print(report(result))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = RESULTS_DIR / f"store_throughput-{stamp}.json"
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"\nwrote {path.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
