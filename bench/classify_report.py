"""Accuracy of the rule-based classifier on the labelled bilingual sets.

Usage::

    .venv/bin/python bench/classify_report.py [--errors] [--timing]

Prints overall accuracy, precision / recall / F1 per category and accuracy per language
for the labelled set (the rules were tuned on it) and the held-out set (written after the
rules were frozen); optionally every misclassified sentence and the time ``analyze()``
takes on 900-character Chinese and English chunks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from sklearn.metrics import classification_report

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.classify.analyzer import analyze  # noqa: E402
from app.classify.categories import Category, classify_category  # noqa: E402

DATA = ROOT / "tests" / "data"
LABELS = [c.value for c in Category]


def load(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def report(title: str, rows: list[dict[str, str]], *, show_errors: bool) -> None:
    truth = [r["label"] for r in rows]
    predicted = [classify_category(r["text"]).category.value for r in rows]
    correct = sum(t == p for t, p in zip(truth, predicted, strict=True))
    print(f"== {title}")
    print(f"sentences: {len(rows)}   accuracy: {correct / len(rows):.3f}\n")
    print(classification_report(truth, predicted, labels=LABELS, digits=3, zero_division=0))

    by_lang: dict[str, list[bool]] = defaultdict(list)
    for row, guess in zip(rows, predicted, strict=True):
        by_lang[row["lang"]].append(row["label"] == guess)
    print("accuracy by language")
    for lang, hits in sorted(by_lang.items()):
        print(f"  {lang:6s} {sum(hits) / len(hits):.3f}  (n={len(hits)})")

    if show_errors:
        print("\nerrors (label -> predicted)")
        for row, guess in zip(rows, predicted, strict=True):
            if row["label"] != guess:
                print(f"  {row['label']:>10s} -> {guess:10s} {row['text']}")


def _chunk(rows: list[dict[str, str]], lang: str, size: int = 900) -> str:
    text = ""
    for row in rows:
        if row["lang"] == lang:
            text += row["text"] + ("" if lang == "zh" else " ")
            if len(text) >= size:
                break
    return text[:size]


def timing(rows: list[dict[str, str]], repeat: int = 200) -> None:
    analyze("预热 jieba 词典")  # the first Chinese text loads jieba's dictionary
    # CPU time is reported beside wall time: on a shared machine the wall clock also
    # counts the time other processes held the CPU.
    print(f"\nanalyze() timing over {repeat} runs (jieba already loaded)")
    for lang in ("zh", "en"):
        text = _chunk(rows, lang)
        wall, cpu = [], []
        for _ in range(repeat):
            w, c = time.perf_counter(), time.process_time()
            analyze(text)
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
        print(
            f"  {lang}: {len(text)} chars  wall median {statistics.median(wall) * 1000:.2f} ms"
            f"  p95 {sorted(wall)[int(repeat * 0.95)] * 1000:.2f} ms"
            f"  cpu median {statistics.median(cpu) * 1000:.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="list misclassified sentences")
    parser.add_argument("--timing", action="store_true", help="time analyze() on 900 chars")
    args = parser.parse_args()
    rows = load("classify_labelled.jsonl")
    report("labelled set (rules tuned on it)", rows, show_errors=args.errors)
    print()
    holdout = load("classify_holdout.jsonl")
    report("held-out set (written after the rules were frozen)", holdout, show_errors=args.errors)
    if args.timing:
        timing(rows)


if __name__ == "__main__":
    main()
