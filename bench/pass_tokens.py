"""e5's time for one slice of stored chunks by the token budget of a forward pass.

Why: the pool answers waiting questions between two forward passes of a slice (pool.py),
so a pass's budget (`e5_torch.MAX_BATCH_TOKENS`) is how long a recall can wait behind a
store. This measures what smaller passes cost the store: a slice of `--texts` chunks of 6
generated chat turns (English and Chinese, `tests/procs.chat_messages`), warmed once at every
budget (oneDNN compiles each new shape once), then `--repeats` rounds cycling through the
budgets, so the machine's load falls alike on each. Prints the median and min per budget.

    PYTHONPATH=. .venv/bin/python bench/pass_tokens.py --budgets 256,512,1024,2048
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.embedding import e5_torch
from app.embedding.backends import load_model
from app.embedding.names import E5_NAME
from tests.procs import chat_messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", default="256,512,1024,2048")
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    encoder = load_model(E5_NAME, threads=args.threads)
    rng = random.Random(3)
    texts = ["\n".join(f"{m['role']}: {m['content']}" for m in chat_messages(rng, args.turns))
             for _ in range(args.texts)]
    budgets = [int(b) for b in args.budgets.split(",")]
    defaults = e5_torch.batches.__kwdefaults__  # the budget `_encode` uses
    assert defaults is not None
    seconds: dict[int, list[float]] = {b: [] for b in budgets}
    for budget in budgets:
        defaults["max_tokens"] = budget
        encoder.encode_passages(texts)
    for _ in range(args.repeats):
        for budget in budgets:
            defaults["max_tokens"] = budget
            started = time.perf_counter()
            encoder.encode_passages(texts)
            seconds[budget].append(time.perf_counter() - started)
    for budget in budgets:
        print(f"{budget:5d} tokens per pass: {args.texts} texts in "
              f"{1000 * statistics.median(seconds[budget]):.0f} ms median, "
              f"{1000 * min(seconds[budget]):.0f} ms min", flush=True)


if __name__ == "__main__":
    main()
