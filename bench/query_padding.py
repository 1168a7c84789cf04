"""CPU time of one question's embedding by how its row is padded (e5 in torch).

A question is one short row (12-20 tokens). `padded_length` pads every batch to a few
lengths so that the kernels' compiled shapes stay few (app/embedding/e5_torch.py says why);
this measures what the step costs a question: each step's CPU time (`time.thread_time`, less
sensitive than wall time to other processes on a shared machine), steps interleaved round by
round, median over rounds.

    PYTHONPATH=. .venv/bin/python bench/query_padding.py --steps 32,16,8,1 --rounds 9

The questions are written here, English and Chinese; none comes from evaluation data.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.embedding import e5_torch
from app.embedding.backends import e5_weights

QUESTIONS = ("When did I move to Munich?", "我的护照什么时候过期",
             "What do I prefer to drink in the morning?", "下周二上午要做什么？",
             "Which restaurant did we pick for Anna's birthday dinner, and who booked it?",
             "谁会参加周五装修方案的讨论？")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", default="32,16,8,1")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    encoder = e5_torch.E5TorchEncoder.load(e5_weights(), threads=1)
    lengths = [len(encoder.tokenizer.content_ids(e5_torch.QUERY_PREFIX + q)) + 2
               for q in QUESTIONS]

    def one_round(step: int) -> float:
        # Both module constants, so that the step applies to every length here (all short).
        e5_torch.LENGTH_STEP = e5_torch.SHORT_LENGTH_STEP = step
        spent = []
        for question in QUESTIONS:
            started = time.thread_time()
            encoder.encode_queries([question])
            spent.append(time.thread_time() - started)
        return statistics.median(spent) * 1000

    for step in steps:  # warm-up: each shape compiled once
        one_round(step)
    rounds: dict[int, list[float]] = {step: [] for step in steps}
    for _ in range(args.rounds):
        for step in steps:
            rounds[step].append(one_round(step))
    print(f"questions' tokens: {lengths}; load average {os.getloadavg()[0]:.1f}")
    print("| step | CPU ms per question (median of rounds) | ratio to step 32 |")
    print("|---|---|---|")
    base = statistics.median(rounds[steps[0]])
    for step in steps:
        median = statistics.median(rounds[step])
        print(f"| {step} | {median:.2f} | {median / base:.2f} |")


if __name__ == "__main__":
    main()
