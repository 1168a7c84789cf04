"""What the interpreter's switch interval costs a request while a build analyses text.

One process: an event loop serves "requests" of ten thread round trips (`asyncio.to_thread`
of a 2 ms call that releases the GIL, as a LanceDB call does), one after another, while
`--busy` threads run the builds' text analysis (`app.classify.analyze`: pure Python, it
holds the GIL). Each interval is set with `sys.setswitchinterval` in turn; p50 / p95 of the
requests, alone and beside the busy threads. Background for `gil_switch_interval_ms`
(app/ops/priority.py).

    PYTHONPATH=. .venv/bin/python bench/gil_switch.py
    PYTHONPATH=. .venv/bin/python bench/gil_switch.py --intervals 5,1 --requests 300
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.classify import analyze

TEXT = "我们下周二上午去医院体检，然后 we decided to use LanceDB for project Falcon. " * 8
ROUND_TRIPS = 10


def _io_call() -> None:
    time.sleep(0.002)  # releases the GIL, as LanceDB's calls do


async def _requests(n: int) -> list[float]:
    took = []
    for _ in range(n):
        started = time.perf_counter()
        for _ in range(ROUND_TRIPS):
            await asyncio.to_thread(_io_call)
        took.append(time.perf_counter() - started)
        await asyncio.sleep(0.01)
    return sorted(took)


def measure(interval_ms: float, busy: int, requests: int) -> tuple[float, float, float]:
    """p50 and p95 in ms, and the analyses a second the busy threads finished meanwhile."""
    sys.setswitchinterval(interval_ms / 1000)
    done = [0]
    stop = threading.Event()

    def analyse() -> None:
        while not stop.is_set():
            analyze(TEXT)
            done[0] += 1

    threads = [threading.Thread(target=analyse, daemon=True) for _ in range(busy)]
    for t in threads:
        t.start()
    started = time.perf_counter()
    try:
        took = asyncio.run(_requests(requests))
    finally:
        stop.set()
        for t in threads:
            t.join()
    rate = done[0] / (time.perf_counter() - started)
    return statistics.median(took) * 1000, took[int(len(took) * 0.95)] * 1000, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intervals", default="5,2,1", help="switch intervals in ms")
    parser.add_argument("--busy", type=int, default=1, help="analysis threads")
    parser.add_argument("--requests", type=int, default=150)
    args = parser.parse_args()
    analyze(TEXT)  # jieba's dictionary, loaded once before timing
    print(f"| switch interval | alone p50 / p95 ms | beside {args.busy} analysis thread(s) "
          "p50 / p95 ms | analyses / s |")
    print("|---|---|---|---|")
    for interval in (float(x) for x in args.intervals.split(",")):
        alone = measure(interval, 0, args.requests)
        busy = measure(interval, args.busy, args.requests)
        print(f"| {interval:g} ms | {alone[0]:.1f} / {alone[1]:.1f} | "
              f"{busy[0]:.1f} / {busy[1]:.1f} | {busy[2]:.0f} |")
    sys.setswitchinterval(0.005)


if __name__ == "__main__":
    main()
