"""Why recall missed: for each question whose evidence was not all returned at a budget,
where its evidence stood by the vector alone, by its own line, and what filled the budget.

Runs on a kept store of `bench/locomo.py` (same data file, same role protocol) in-process,
through the HTTP API plus the app's own model. Per missed question:

- the evidence memory's rank and cosine in the full ranking (min_score 0, top-k 100,
  32,000 tokens) and by cosine alone among those candidates;
- the cosine of the question with the evidence line alone (embedded as stored text), and
  that line's rank among the lines of the 30 best candidates by their own cosine;
- the memories returned at the budget: cosine, keyword, relevance, trimmed, evidence or not.

Usage::

    PYTHONPATH=. .venv/bin/python bench/recall_misses.py DATA --data-dir COPY \\
        --set embedding_model=multilingual-e5-small --set recall_equivalents=false \\
        [--dump misses.jsonl] [--only-lost-from ON_DUMP]

The data never enters the repository; the output (stdout, --dump) is for looking at, not
for committing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.locomo import Question, engram_client, load

_LINES_FROM = 30  # candidates whose lines are ranked by their own cosine


async def recall(client: Any, q: Question, **body: Any) -> dict[str, Any]:
    response = await client.post("/v1/recall", json={"namespace": q.namespace,
                                                     "query": q.text, **body})
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def content(line: str) -> str:
    return line.split(": ", 1)[-1]


def whole_in(dump: str, budget: int) -> set[tuple[str, str]]:
    """The questions a `bench/locomo.py --dump` run returned whole at `budget`."""
    only = set()
    for line in Path(dump).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["results"][f"budget {budget}"]["recall"] >= 1:
            only.add((row["namespace"], row["question"]))
    return only


async def diagnose(args: argparse.Namespace, only: set[tuple[str, str]] | None
                   ) -> list[dict[str, Any]]:
    samples = load(Path(args.data), roles=args.roles)
    questions = [q for s in samples for q in s.questions]
    texts = {(s.namespace, m["msg_id"]): m["content"]
             for s in samples for _, messages in s.sessions for m in messages}
    rows = []
    async with engram_client(args) as client:
        pool = client.app.state.engram.pool
        for q in questions:
            if only is not None and (q.namespace, q.text) not in only:
                continue
            at = await recall(client, q, max_tokens=args.budget, top_k=100)
            returned = {i for m in at["memories"] for i in m["msg_ids"]}
            if q.evidence <= returned:
                continue
            full = await recall(client, q, max_tokens=32_000, top_k=100, min_score=0)
            ranked = full["memories"]
            holding = [i for i, m in enumerate(ranked) if q.evidence & set(m["msg_ids"])]
            by_cosine = sorted(range(len(ranked)), key=lambda i: -ranked[i]["explain"]["cosine"])
            cosine_rank = {i: r for r, i in enumerate(by_cosine)}
            qv = np.asarray(await pool.embed_query(q.text), dtype=np.float32)
            lines: dict[str, str] = {}
            for m in ranked[:_LINES_FROM]:
                for i in m["msg_ids"]:
                    if (q.namespace, i) in texts:
                        lines[i] = texts[(q.namespace, i)]
            for i in q.evidence:
                lines.setdefault(i, texts[(q.namespace, i)])
            ids = sorted(lines)
            vectors = np.asarray(await pool.embed_many([lines[i] for i in ids]), np.float32)
            line_cos = dict(zip(ids, (vectors @ qv).tolist(), strict=True))
            line_order = sorted(ids, key=lambda i: -line_cos[i])
            missed = sorted(q.evidence - returned)
            row = {
                "namespace": q.namespace, "question": q.text, "category": q.category,
                "evidence": {i: content(texts[(q.namespace, i)]) for i in sorted(q.evidence)},
                "missed": missed,
                "memory_rank": [h for h in holding],
                "memory_cosine_rank": [cosine_rank[h] for h in holding],
                "memory_cosine": [ranked[h]["explain"]["cosine"] for h in holding],
                "memory_keyword": [ranked[h]["explain"]["keyword"] for h in holding],
                "memory_relevance": [ranked[h]["explain"]["relevance"] for h in holding],
                "memory_lines": [len(ranked[h]["msg_ids"]) for h in holding],
                "best_cosine": ranked[by_cosine[0]]["explain"]["cosine"] if ranked else None,
                "line_cosine": {i: round(line_cos[i], 4) for i in missed},
                "line_rank": {i: line_order.index(i) for i in missed},
                "best_lines": [(i, round(line_cos[i], 4), content(lines[i])[:40])
                               for i in line_order[:3]],
                "returned": [{"cosine": m["explain"]["cosine"], "keyword": m["explain"]["keyword"],
                              "relevance": m["explain"]["relevance"], "lines": len(m["msg_ids"]),
                              "trimmed": m["trimmed"], "evidence": bool(q.evidence
                                                                        & set(m["msg_ids"])),
                              "text": m["text"][:80]} for m in at["memories"]],
            }
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
    return rows


def summary(rows: list[dict[str, Any]], budget: int) -> None:
    if rows:
        first = [r["memory_rank"][0] for r in rows if r["memory_rank"]]
        line_ranks = [min(r["line_rank"].values()) for r in rows]
        print(f"{len(rows)} questions missed evidence at {budget} tokens; evidence memory "
              f"rank median {statistics.median(first) if first else '-'}, in no candidate "
              f"{sum(1 for r in rows if not r['memory_rank'])}; evidence line first by its own "
              f"cosine {sum(1 for r in line_ranks if r == 0)}, in the top 3 "
              f"{sum(1 for r in line_ranks if r < 3)}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data")
    parser.add_argument("--data-dir", required=True, help="a kept store (a copy: recall "
                        "records hits)")
    parser.add_argument("--roles", choices=("speakers", "user"), default="speakers")
    parser.add_argument("--budget", type=int, default=500)
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE")
    parser.add_argument("--only-lost-from", default="",
                        help="a bench/locomo.py --dump of a run that returned the evidence: "
                        "only the questions it returned whole")
    parser.add_argument("--dump", default="")
    args = parser.parse_args()
    args.url = ""
    only = whole_in(args.only_lost_from, args.budget) if args.only_lost_from else None
    rows = asyncio.run(diagnose(args, only))
    if args.dump:
        Path(args.dump).write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows)
                                   + "\n", encoding="utf-8")
    summary(rows, args.budget)


if __name__ == "__main__":
    main()
