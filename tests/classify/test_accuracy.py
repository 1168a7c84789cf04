"""Accuracy of the category rules on the labelled bilingual sentences.

`tests/data/classify_labelled.jsonl` holds 528 chat messages written for this purpose
(half English, half Chinese, a few mixed; 66 per category). The rules were tuned on it, so
its accuracy is an optimistic figure. `tests/data/classify_holdout.jsonl` (64 messages) was
written after the rules were frozen and shows how they do on phrasing they never saw.
`bench/classify_report.py` prints the same numbers with the misclassified sentences.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from sklearn.metrics import classification_report, precision_recall_fscore_support

from app.classify.categories import Category, classify_category

DATA = Path(__file__).resolve().parent.parent / "data"
LABELS = [c.value for c in Category]

# Measured 0.920 on the labelled set (bench/classify_report.py). The floor sits four
# points lower: room for a rule change that trades a few sentences for better
# generalisation, while a real regression (a broken rule family) still fails.
ACCURACY_FLOOR = 0.88
# Lowest measured recall is 0.742 (note: personal facts without any cue word, such as
# "The spare key is in the blue box"); every other category is at 0.909 or above.
RECALL_FLOOR = 0.65
# Each language must work on its own: measured en 0.930, zh 0.910.
LANGUAGE_FLOOR = 0.85
# Measured 0.672 on the held-out set when it was written, 0.719 after two bug fixes it
# revealed (a "?" counted twice, missing greetings). Rules generalise worse than they fit.
HOLDOUT_FLOOR = 0.62


def load(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def predict(rows: list[dict[str, str]]) -> list[str]:
    return [classify_category(row["text"]).category.value for row in rows]


def accuracy(truth: list[str], predicted: list[str]) -> float:
    return sum(t == p for t, p in zip(truth, predicted, strict=True)) / len(truth)


@pytest.fixture(scope="module")
def labelled() -> list[dict[str, str]]:
    return load("classify_labelled.jsonl")


class TestLabelledSet:
    def test_shape(self, labelled: list[dict[str, str]]) -> None:
        assert len(labelled) >= 320
        assert len({row["text"] for row in labelled}) == len(labelled), "duplicate sentences"
        labels = Counter(row["label"] for row in labelled)
        assert set(labels) == set(LABELS)
        assert min(labels.values()) >= 30
        langs = Counter(row["lang"] for row in labelled)
        assert set(langs) <= {"zh", "en", "mixed"}
        assert langs["zh"] == langs["en"]

    def test_holdout_is_separate(self, labelled: list[dict[str, str]]) -> None:
        holdout = load("classify_holdout.jsonl")
        assert not {r["text"] for r in holdout} & {r["text"] for r in labelled}


class TestAccuracy:
    def test_overall_and_per_category(self, labelled: list[dict[str, str]]) -> None:
        truth = [row["label"] for row in labelled]
        predicted = predict(labelled)
        print()
        print(classification_report(truth, predicted, labels=LABELS, digits=3, zero_division=0))
        assert accuracy(truth, predicted) >= ACCURACY_FLOOR

        _, recall, _, _ = precision_recall_fscore_support(
            truth, predicted, labels=LABELS, zero_division=0
        )
        low = {
            label: round(r, 3) for label, r in zip(LABELS, recall, strict=True) if r < RECALL_FLOOR
        }
        assert not low, f"recall below {RECALL_FLOOR}: {low}"

    @pytest.mark.parametrize("lang", ["en", "zh"])
    def test_per_language(self, labelled: list[dict[str, str]], lang: str) -> None:
        rows = [row for row in labelled if row["lang"] == lang]
        assert accuracy([row["label"] for row in rows], predict(rows)) >= LANGUAGE_FLOOR

    def test_holdout(self) -> None:
        rows = load("classify_holdout.jsonl")
        assert accuracy([row["label"] for row in rows], predict(rows)) >= HOLDOUT_FLOOR
