"""Compare two `bench/locomo.py --dump` files question by question.

`BASE` is a full run; `OTHER` is a run of the same questions or of a subset of them (for
example `--with-list-terms`, the only questions a word-list setting can change). For each
setting both have, prints BASE's overall evidence recall and hit@1, the same with OTHER's
outcomes in place of BASE's for the questions OTHER asked (the overall figure OTHER's
settings would give on BASE's questions), and how many of those questions gained or lost.
`--show N` lists the first N questions that changed, with the evidence each one missed.
Where both dumps list the returned memories, it also counts the answers that are identical
(the same memories, msg_ids, order and scores).

Usage::

    PYTHONPATH=. .venv/bin/python bench/dump_diff.py BASE.jsonl OTHER.jsonl [--show 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

Key = tuple[str, str, tuple[str, ...]]


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def key(row: dict[str, Any]) -> Key:
    return row["namespace"], row["question"], tuple(row["evidence"])


def hit1(result: dict[str, Any], evidence: list[str]) -> float:
    return 1.0 if set(result.get("first") or []) & set(evidence) else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("other", type=Path)
    parser.add_argument("--show", type=int, default=0, help="list this many changed questions")
    args = parser.parse_args()
    base, other = read(args.base), read(args.other)
    # The same question may be asked twice in one sample: match them in order.
    pending: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    for row in other:
        pending[key(row)].append(row)
    replaced: list[dict[str, Any] | None] = []
    for row in base:
        queue = pending.get(key(row))
        replaced.append(queue.pop(0) if queue else None)
    unmatched = sum(len(q) for q in pending.values())
    asked = sum(r is not None for r in replaced)
    print(f"{len(base)} questions in {args.base.name}, {asked} also in {args.other.name}"
          + (f" ({unmatched} of its questions not in the base)" if unmatched else ""))
    labels = [label for label in base[0]["results"] if any(
        r is not None and label in r["results"] for r in replaced)] if base else []
    changed: list[tuple[str, dict[str, Any], float, float]] = []
    for label in labels:
        before = [row["results"][label]["recall"] for row in base]
        after = [(r or row)["results"][label]["recall"] for row, r in zip(base, replaced,
                                                                           strict=True)]
        hit_before = [hit1(row["results"][label], row["evidence"]) for row in base]
        hit_after = [hit1((r or row)["results"][label], row["evidence"])
                     for row, r in zip(base, replaced, strict=True)]
        gained = sum(a > b for a, b in zip(after, before, strict=True))
        lost = sum(a < b for a, b in zip(after, before, strict=True))
        print(f"{label}: overall {statistics.mean(before):.3f} -> {statistics.mean(after):.3f}"
              f", hit@1 {statistics.mean(hit_before):.3f} -> {statistics.mean(hit_after):.3f}"
              f"; {gained} questions gained, {lost} lost")
        changed += [(label, row, b, a) for row, b, a in zip(base, before, after, strict=True)
                    if a != b]
        # The whole answer (memories, their lines, their order, scores), where both dumps
        # have it: what a refactor must keep.
        same = [row["results"][label].get("returned") == r["results"][label].get("returned")
                for row, r in zip(base, replaced, strict=True) if r is not None
                and "returned" in row["results"][label] and "returned" in r["results"][label]]
        if same:
            print(f"  {label}: {sum(same)} of {len(same)} answers identical (memories, "
                  f"msg_ids, order, scores)")
    for label, row, b, a in changed[:args.show]:
        print(f"- [{label}] {row['namespace']}: {row['question']!r} {b:.2f} -> {a:.2f}; "
              f"missed before {row['results'][label]['missed']}")


if __name__ == "__main__":
    main()
