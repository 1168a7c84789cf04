"""The hygiene bench's scenario sets (bench/hygiene/*.jsonl) load and are well-formed:
enough cases per family in both languages, every session a case names exists in its
namespace, changed facts months apart, dated periods consistent. No model, no store."""

from __future__ import annotations

import json
from pathlib import Path

from bench.hygiene import FAMILIES, MIN_CASES, load_backgrounds, load_cases, problems


def test_every_family_loads_and_is_well_formed() -> None:
    cases = load_cases()
    assert set(cases) == set(FAMILIES)
    assert all(len(items) >= MIN_CASES for items in cases.values())
    assert problems(cases, load_backgrounds()) == []


def test_a_broken_set_is_reported(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[2] / "bench" / "hygiene"
    for path in source.glob("*.jsonl"):
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    changed = tmp_path / "changed.jsonl"
    rows = [json.loads(line) for line in changed.read_text(encoding="utf-8").splitlines()]
    rows[0]["new"] = "no-such-session"
    rows[1]["id"] = rows[2]["id"]
    changed.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows[:-10]),
                       encoding="utf-8")
    found = problems(load_cases(tmp_path), load_backgrounds(tmp_path))
    assert any("fewer than 30" in p for p in found)
    assert any("new names no session" in p for p in found)
    assert any("duplicate id" in p for p in found)
