"""Resident memory of a server's start-up, step by step, in the order of app/main.py's lifespan.

    PYTHONPATH=$PWD .venv/bin/python bench/start_memory.py
    PYTHONPATH=$PWD .venv/bin/python bench/start_memory.py --parts   # e5's load in parts

One process does what the lifespan does (import the app, load the configured model, warm
jieba, open the tables in a temporary data dir, hand free pages back) and prints VmRSS and its
anonymous part (RssAnon: heaps; the rest is mostly the libraries' mapped code) after each
step, in MB. `--parts` splits the load of e5 in torch instead (importing torch, parsing the
model file, building the model, building the tokenizer's table) and stops there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path


def mb(field: str) -> int:
    """A size from /proc/self/status in MB (read here, so older commits can be measured)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", action="store_true")
    args = parser.parse_args()
    steps: list[dict[str, object]] = []

    def step(name: str) -> None:
        steps.append({"step": name, "rss_mb": mb("VmRSS"), "anonymous_mb": mb("RssAnon")})
        print(json.dumps(steps[-1]), flush=True)

    step("python")
    import app.main  # noqa: F401  (what `engram serve` imports)
    step("import app.main")
    from app.config import Settings
    from app.embedding.backends import e5_weights, load_model
    from app.embedding.names import E5_NAME, canonical_name
    from app.ops import malloc

    with tempfile.TemporaryDirectory(prefix="start-memory-") as tmp:
        os.environ["ENGRAM_DATA_DIR"] = str(Path(tmp) / "data")
        settings = Settings()
        malloc.limit_arenas(settings.malloc_arena_max)
        if args.parts and canonical_name(settings.embedding_model) == E5_NAME:
            import torch

            step("import torch")
            from app.embedding.e5_torch import E5Bin, E5Model, E5Tokenizer, cpu_has_fast_bf16

            torch.set_num_threads(settings.embedding_threads)
            weights = E5Bin(e5_weights())
            step("parse the model file")
            dtype = torch.bfloat16 if cpu_has_fast_bf16() else torch.float32
            model = E5Model(weights, dtype)
            step("build the model")
            tokenizer = E5Tokenizer(weights.tokenizer)
            step("build the tokenizer's table")
            del weights
            step("parsed file dropped")
            assert model and tokenizer
            return
        encoder = load_model(settings.embedding_model, threads=settings.embedding_threads)
        step("model loaded")
        from app.classify import warm_up

        warm_up()
        step("jieba dictionary")
        from app.storage.repository import Repository

        async def open_tables() -> None:
            repo = await Repository.open(settings, embedding_dim=int(encoder.dim))
            step("tables opened")
            release = getattr(malloc, "release_free_memory", None)
            if release is not None:  # a commit before it: skipped
                release()
                step("free pages handed back")
            await repo.close()

        asyncio.run(open_tables())
    print(json.dumps({"load_average": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
