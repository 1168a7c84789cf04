"""e5's Python tokenizer (app/embedding/e5_torch.py, `E5Tokenizer`): speed, memory, ids.

    PYTHONPATH=$PWD .venv/bin/python bench/tokenizer_speed.py

Prints, as JSON:
- `build_s`: building the lookup table from the parsed model file;
- `table_mb`: what the tokenizer holds (tracemalloc, bytes allocated by its construction
  and still alive, the piece strings of the parsed file included when it keeps them);
- `tokens_per_s_en` / `_zh` / `_mixed`: median of `--repeats` runs over generated memory-like
  sentences (English, Chinese, and both in one text), per second of this thread's CPU time
  (wall time on the shared 2-core machine mostly measures the other processes);
- `ids_sha256`: a digest of every id of every text, to compare two versions of the tokenizer
  (the same digest: the same ids).

Sentences are generated here, not taken from evaluation data. The machine's load matters
(other processes take the cores): the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import statistics
import time
import tracemalloc

from app.embedding.backends import e5_weights
from app.embedding.e5_torch import E5Bin, E5Tokenizer
from bench.embed_speed import EN, ZH  # the same sentence templates as the model's speed

# Edge cases of the normalisation and the Viterbi: emoji, full-width forms, accents, spaces.
ODD = "  ｆｕｌｌ　ｗｉｄｔｈ {d}🙂 Ünïcödé café 🧑‍💻  x{h}xxxxxxxxxxxxxxxxxxxxxxxx  "


def texts(template: str, n: int) -> list[str]:
    return [template.format(d=i % 28 + 1, h=i % 97 + 1) for i in range(n)]


def tokens_per_second(tokenizer: E5Tokenizer, batch: list[str], repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        started = time.thread_time()
        tokens = sum(len(tokenizer.content_ids(t)) for t in batch)
        runs.append(tokens / (time.thread_time() - started))
    return round(statistics.median(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=400, help="per language")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    data = E5Bin(e5_weights()).tokenizer
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    tokenizer = E5Tokenizer(data)
    build = time.perf_counter() - started
    del data  # what the tokenizer keeps of the parsed file stays counted
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    en, zh = texts(EN, args.texts), texts(ZH, args.texts)
    mixed = [a + " " + b for a, b in zip(en, zh, strict=True)]
    digest = hashlib.sha256()
    for text in [*en, *zh, *mixed, *texts(ODD, 50), "", " ", "<s> </s> <unk>", "x" * 50]:
        digest.update(json.dumps(tokenizer.content_ids(text)).encode())
    result = {
        "build_s": round(build, 2), "table_mb": round(held / 2**20, 1),
        "tokens_per_s_en": tokens_per_second(tokenizer, en, args.repeats),
        "tokens_per_s_zh": tokens_per_second(tokenizer, zh, args.repeats),
        "tokens_per_s_mixed": tokens_per_second(tokenizer, mixed, args.repeats),
        "ids_sha256": digest.hexdigest()[:16],
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
