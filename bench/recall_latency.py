"""Recall latency over HTTP at 1k / 10k / 100k memories, on four sets of data.

The synthetic set: memories written through the repository (bilingual sentences from a fixed
vocabulary, random unit vectors: search cost does not depend on what the vectors mean),
spread over namespaces so that the queried namespace holds a realistic share. Then the app
starts on that store (real model, real lifespan), the maintenance pass runs as an idle server
would (compaction folds rows into the full-text index; past `vector_index_min_rows` the
IVF_PQ vector index is built), and recalls are timed one after another from a client.
`min_score` is 0 so that every recall packs a full result (the expensive path).

The real-shaped sets (`--sets zh,en,long`, see `bench/latency_sets.py`) store a few queried
namespaces through `/v1/store` as a client would (real chunking, real embeddings): MemDaily
users in Chinese, LoCoMo conversations in English, generated histories of long assistant
answers. The rest of the store, up to each size, is written straight to the repository from
the same set's lines (random vectors), in namespaces of ~500 memories. Their questions are
asked in turn at the product's default relevance floor with a 500-token budget, and the
model's own encode time for the same questions is printed beside: the floor a recall cannot
go under. Compression and hit-based promotion are off, so the store does not change while
it is measured.

Usage (one command, all four sets at three sizes: ~75 min on the shared 2-core machine at
load ~12, of which ~25 min for 1k and 10k and ~10 min per set at 100k, most of that the
compaction and IVF_PQ build; the queried namespaces are stored once per set and run)::

    PYTHONPATH=. .venv/bin/python bench/recall_latency.py
    PYTHONPATH=. .venv/bin/python bench/recall_latency.py --sets zh,en,long --sizes 1000,10000
    PYTHONPATH=. .venv/bin/python bench/recall_latency.py --sets synthetic --sizes 100000 \
        --share 1.0

`--share` (synthetic set only) is the fraction of all memories in the queried namespace
(default 0.02: 2,000 of 100k, a heavy user's year of daily chats). Prints markdown tables.

`--data-dir DIR` keeps the store: the first run writes it (into DIR/<size>), later runs with
the same set, size and share reuse it, so variants of the code compare on the same data without
the ~2 min build. `--stages` adds a table of per-stage times (embedding, each search,
scoring, packing, the second hop), measured by wrapping the service's own methods; stages
overlap (the keyword search runs during the embedding), so they do not add up to the total.
`--set NAME=VALUE` overrides a setting (e.g. `--set namespace_cache_max_rows=0`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from app.config import Settings  # noqa: E402
from app.main import create_app  # noqa: E402
from app.ops.metrics import resident_bytes  # noqa: E402
from app.storage.records import MemoryRecord  # noqa: E402
from app.storage.repository import Repository  # noqa: E402
from bench.latency_sets import DATA_DIR, RealSet, real_set  # noqa: E402
from bench.locomo import ingest, setting_overrides, settle  # noqa: E402

_EN_VOCABULARY = (
    "project deadline meeting budget report client design database index query latency "
    "memory vector search cache server deploy release review feedback roadmap quarter team "
    "manager interview hiring travel flight hotel passport visa dentist doctor checkup gym "
    "running marathon yoga coffee tea breakfast dinner recipe garden kids school birthday "
    "gift concert movie book guitar piano painting camping hiking beach weekend holiday "
    "invoice payment contract lawyer apartment rent move furniture car repair insurance"
)
_ZH_VOCABULARY = (
    "项目 截止 日期 会议 预算 报告 客户 设计 数据库 索引 查询 延迟 记忆 向量 搜索 缓存 "
    "服务器 发布 评审 反馈 路线图 季度 团队 经理 面试 招聘 出差 航班 酒店 护照 签证 牙医 "
    "医生 体检 健身 跑步 马拉松 瑜伽 咖啡 茶 早餐 晚餐 菜谱 花园 孩子 学校 生日 礼物 音乐会 电影"
)
WORDS = _EN_VOCABULARY.split()
ZH = _ZH_VOCABULARY.split()
QUERIES = [
    "when is the project deadline?", "what did we decide about the database index?",
    "我的体检安排是哪天", "which hotel for the flight next week", "coffee or tea for breakfast",
    "上次说的预算报告", "how is the marathon training going", "孩子的生日礼物买了吗",
    "what did the client say in the review", "passport and visa for travel", "服务器发布时间",
    "guitar and piano lessons", "as I said before, the rent contract", "护照 签证 出差",
]


class Vocabulary:
    """Zipf-distributed pseudo-words (20k English-like, 8k Chinese-like) with the real words
    above placed at mid-frequency ranks, so that posting lists of the full-text index are
    as long as in real text (a 60-word vocabulary would put every word in every memory)."""

    def __init__(self, rng: random.Random) -> None:
        syllables = [a + b for a in "bdfgklmnprstvz" for b in ("a", "e", "i", "o", "u", "an",
                                                              "er", "is", "or")]
        english: set[str] = set()
        while len(english) < 20_000:
            english.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
        han = [chr(0x4E00 + i) for i in rng.sample(range(0x5000), 900)]
        chinese: set[str] = set()
        while len(chinese) < 8_000:
            chinese.add("".join(rng.choice(han) for _ in range(2)))
        self.english = self._place(sorted(english), WORDS, rng)
        self.chinese = self._place(sorted(chinese), ZH, rng)
        self.en_weights = self._zipf(len(self.english))
        self.zh_weights = self._zipf(len(self.chinese))

    @staticmethod
    def _place(pseudo: list[str], real: list[str], rng: random.Random) -> list[str]:
        rng.shuffle(pseudo)
        for word in real:
            pseudo.insert(rng.randint(200, 3_000), word)
        return pseudo

    @staticmethod
    def _zipf(n: int) -> list[float]:
        total, cumulative = 0.0, []
        for rank in range(n):
            total += 1 / (rank + 10) ** 1.05
            cumulative.append(total)
        return cumulative

    def sentence(self, rng: random.Random) -> str:
        if rng.random() < 0.3:
            words = rng.choices(self.chinese, cum_weights=self.zh_weights,
                                k=rng.randint(8, 20))
            return "user: " + "".join(words) + "。"
        words = rng.choices(self.english, cum_weights=self.en_weights, k=rng.randint(14, 28))
        return f"{rng.choice(['user', 'assistant'])}: " + " ".join(words).capitalize() + "."


async def populate(settings: Settings, *, total: int, share: float, dim: int,
                   seed: int = 7) -> str:
    """Write `total` memories; return the queried namespace (holding `share` of them)."""
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    vocabulary = Vocabulary(rng)
    repo = await Repository.open(settings, embedding_dim=dim)
    target = max(1, int(total * share))
    others = max(1, (total - target) // 500)  # the rest in namespaces of ~500 memories
    now = datetime.now(UTC)
    batch: list[MemoryRecord] = []
    started = time.perf_counter()
    for i in range(total):
        namespace = "target" if i < target else f"user{(i - target) % others:05d}"
        text = "\n".join(vocabulary.sentence(rng) for _ in range(rng.randint(3, 6)))
        vector = nprng.standard_normal(dim).astype(np.float32)
        vector /= np.linalg.norm(vector)
        when = now - timedelta(days=rng.uniform(0, 365))
        batch.append(MemoryRecord(
            id=f"mem_{i:08d}", namespace=namespace, session_id=f"s{i // 6}", text=text,
            vector=vector.tolist(), created_at=when, updated_at=when, time_start=when,
            time_end=when, msg_ids=[f"m{i}-{j}" for j in range(text.count("\n") + 1)],
            msg_count=text.count("\n") + 1, importance=rng.randint(1, 10),
            language="zh" if "。" in text else "en"))
        if len(batch) == 5_000:
            await repo.upsert_memories(batch)
            batch = []
    if batch:
        await repo.upsert_memories(batch)
    print(f"  wrote {total} memories in {time.perf_counter() - started:.1f} s "
          f"({target} in the queried namespace, {others} others)", file=sys.stderr)
    # What the writing server's maintenance does once writes are idle: compaction folds the
    # rows into the full-text and scalar indexes, then the vector index past its threshold.
    started = time.perf_counter()
    await repo.compact("memories")
    built = await repo.ensure_vector_index(min_rows=settings.vector_index_min_rows)
    print(f"  compaction and indexes: {time.perf_counter() - started:.1f} s "
          f"(vector index built: {built})", file=sys.stderr)
    return "target"


async def timed_recall(client: httpx.AsyncClient, namespace: str, query: str
                       ) -> tuple[float, httpx.Response]:
    """One bench recall (every memory may be a candidate: `min_score` 0): its wall time in
    ms and its response, failed on an error status."""
    body = {"namespace": namespace, "query": query, "min_score": 0, "top_k": 10,
            "max_tokens": 1500}
    t0 = time.perf_counter()
    response = await client.post("/v1/recall", json=body)
    elapsed = (time.perf_counter() - t0) * 1000
    response.raise_for_status()
    return elapsed, response


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Stages:
    """Per-request time spent in the wrapped methods (ms), summed per stage per request."""

    def __init__(self) -> None:
        self.current: defaultdict[str, float] = defaultdict(float)
        self.requests: list[dict[str, float]] = []
        self.queries: list[str] = []

    def wrap(self, owner: object, method: str, stage: str) -> None:
        original: Callable[..., object] = getattr(owner, method)
        current = self.current

        if asyncio.iscoroutinefunction(original):
            @functools.wraps(original)
            async def timed_async(*a: object, **k: object) -> object:
                t0 = time.perf_counter()
                try:
                    return await original(*a, **k)  # type: ignore[misc]
                finally:
                    current[stage] += (time.perf_counter() - t0) * 1000
            setattr(owner, method, timed_async)
        else:
            @functools.wraps(original)
            def timed(*a: object, **k: object) -> object:
                t0 = time.perf_counter()
                try:
                    return original(*a, **k)
                finally:
                    current[stage] += (time.perf_counter() - t0) * 1000
            setattr(owner, method, timed)

    def instrument(self, state: object) -> None:
        recall, repo, pool = state.recall, state.repo, state.pool  # type: ignore[attr-defined]
        self.wrap(pool, "embed_query", "embed (await)")
        self.wrap(pool, "encode_blocking", "encode (model)")
        self.wrap(repo, "text_search", "text_search")
        self.wrap(repo, "vector_search", "vector_search")
        self.wrap(repo, "count_memories", "count_memories")
        self.wrap(repo, "get_memories", "get_memories")
        for method, stage in (("_search", "search (one part)"), ("_score", "score"),
                              ("_pack", "pack"), ("_bridge", "bridge (build query)"),
                              ("_candidates", "candidates (all searches)"),
                              ("_newer_first", "newer first"),
                              ("_block_tokens", "block tokens")):
            if hasattr(recall, method):
                self.wrap(recall, method, stage)

    def end_request(self, keep: bool, query: str, wall: float) -> None:
        if keep:
            self.requests.append({**self.current, "total (wall)": wall})
            self.queries.append(query)
        self.current.clear()

    def table(self) -> str:
        names = sorted({n for r in self.requests for n in r})
        lines = ["| stage | mean ms | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|"]
        for name in names:
            values = [r.get(name, 0.0) for r in self.requests]
            lines.append(f"| {name} | {statistics.mean(values):.2f} | {pct(values, 50):.2f} | "
                         f"{pct(values, 95):.2f} | {pct(values, 99):.2f} |")
        lines += ["", "| query | p50 ms | max ms | embed p50 | text_search p50 |",
                  "|---|---|---|---|---|"]
        for query in dict.fromkeys(self.queries):
            mine = [r for r, q in zip(self.requests, self.queries, strict=True) if q == query]
            walls = [r["total (wall)"] for r in mine]
            lines.append(f"| {query} | {pct(walls, 50):.1f} | {max(walls):.1f} | "
                         f"{pct([r.get('embed (await)', 0.0) for r in mine], 50):.1f} | "
                         f"{pct([r.get('text_search', 0.0) for r in mine], 50):.1f} |")
        return "\n".join(lines)


def settings_for(data_dir: Path, args: argparse.Namespace) -> Settings:
    overrides = setting_overrides(args.set)
    return Settings(data_dir=data_dir, environment="testing", log_level="ERROR",  # type: ignore[call-arg]
                    compression_enabled=False, embedding_threads=args.embedding_threads,
                    _env_file=None, **overrides)


async def measure(total: int, args: argparse.Namespace, stages: Stages | None) -> str:
    if args.data_dir:
        data_dir = Path(args.data_dir) / f"{total}-{args.share}"
        marker = data_dir / "populated"
    else:
        data_dir = Path(tempfile.mkdtemp(prefix=f"engram-latency-{total}-"))
        marker = None
    settings = settings_for(data_dir, args)
    if marker is not None and marker.exists():
        namespace = marker.read_text().strip()
        print(f"  reusing the store in {data_dir}", file=sys.stderr)
    else:
        if marker is not None:
            shutil.rmtree(data_dir, ignore_errors=True)
            data_dir.mkdir(parents=True)
        namespace = await populate(settings, total=total, share=args.share, dim=384)
        if marker is not None:
            marker.write_text(namespace)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        indexed = await app.state.engram.repo.has_vector_index()
        if stages is not None:
            stages.instrument(app.state.engram)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.bench",
                                     timeout=60) as client:
            wall: list[float] = []
            server: list[float] = []
            for i in range(args.warmup + args.requests):
                query = QUERIES[i % len(QUERIES)]
                elapsed, response = await timed_recall(client, namespace, query)
                if stages is not None:
                    stages.end_request(i >= args.warmup, query, elapsed)
                if i == 0:
                    first = elapsed  # a cold namespace (nothing cached yet)
                if i >= args.warmup:
                    wall.append(elapsed)
                    server.append(response.json()["took_ms"])
        cache = getattr(app.state.engram.repo, "namespace_cache", None)
        if cache is not None:
            print(f"  namespace copies loaded: {cache.loads}", file=sys.stderr)
        session = app.state.engram.repo.lancedb_session
        print(f"  LanceDB caches held {session.size_bytes / 2**20:.1f} MiB "
              f"(caps {settings.lancedb_index_cache_mb} + "
              f"{settings.lancedb_metadata_cache_mb} MiB); RSS "
              f"{resident_bytes() / 2**20:.0f} MiB", file=sys.stderr)
    if not args.keep and not args.data_dir:
        shutil.rmtree(data_dir, ignore_errors=True)
    target = int(total * args.share)
    return (f"| {total:,} | {target:,} | {'yes' if indexed else 'no'} | "
            f"{args.embedding_threads} | {len(wall)} | "
            f"{pct(wall, 50):.1f} | {pct(wall, 95):.1f} | {pct(wall, 99):.1f} | "
            f"{statistics.mean(server):.1f} | {first:.1f} |")


async def write_filler(repo: Repository, lines: list[str], *, count: int, dim: int,
                       long: bool, chunk_chars: int, seed: int = 7) -> None:
    """Write `count` memories into namespaces of ~500 memories, straight to the repository:
    texts cut from the set's own lines (3-6 lines a memory; for long messages one chunk of
    `chunk_chars` from a line, as the chunker cuts them), random unit vectors."""
    if count <= 0:
        return
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    namespaces = max(1, count // 500)
    now = datetime.now(UTC)
    started = time.perf_counter()
    batch: list[MemoryRecord] = []
    for i in range(count):
        if long:
            line = rng.choice(lines)
            at = rng.randrange(max(1, len(line) - chunk_chars))
            text = line[at:at + chunk_chars]
        else:
            at = rng.randrange(len(lines))
            text = "\n".join(lines[at:at + rng.randint(3, 6)]) or lines[0]
        vector = nprng.standard_normal(dim).astype(np.float32)
        vector /= np.linalg.norm(vector)
        when = now - timedelta(days=rng.uniform(0, 365))
        n_lines = text.count("\n") + 1
        batch.append(MemoryRecord(
            id=f"fill_{i:08d}", namespace=f"other{i % namespaces:05d}",
            session_id=f"s{i // 6}", text=text, vector=vector.tolist(), created_at=when,
            updated_at=when, time_start=when, time_end=when,
            msg_ids=[f"f{i}-{j}" for j in range(n_lines)], msg_count=n_lines,
            importance=rng.randint(1, 10), language="en" if text.isascii() else "zh"))
        if len(batch) == 5_000:
            await repo.upsert_memories(batch)
            batch = []
    if batch:
        await repo.upsert_memories(batch)
    print(f"  wrote {count} other memories in {time.perf_counter() - started:.1f} s "
          f"({namespaces} namespaces)", file=sys.stderr)


def real_settings(data_dir: Path, args: argparse.Namespace) -> Settings:
    """As `bench/locomo.py` measures: nothing changes the store while it is measured."""
    overrides = {"compression_enabled": False, "promote_daily_hits": 10**9,
                 "promote_longterm_hits": 10**9, **setting_overrides(args.set)}
    return Settings(data_dir=data_dir, environment="testing", log_level="ERROR",  # type: ignore[call-arg]
                    embedding_threads=args.embedding_threads, _env_file=None, **overrides)


async def ingested(data: RealSet, args: argparse.Namespace, made: dict[str, Path]) -> Path:
    """A store holding only the set's queried namespaces, stored through HTTP once per run
    (or once per `--data-dir`) and copied for each size."""
    from bench.locomo import Sample

    if data.name in made:
        return made[data.name]
    root = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(
        prefix="engram-latency-"))
    base = root / f"{data.name}-queried"
    marker = base / "populated"
    if marker.exists():
        print(f"  reusing the queried namespaces in {base}", file=sys.stderr)
    else:
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        app = create_app(real_settings(base, args))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://engram.bench",
                                         timeout=300) as client:
                client.app = app  # type: ignore[attr-defined]  # for `settle`
                samples: dict[str, Sample] = {}
                for namespace, session_id, messages in data.sessions:
                    samples.setdefault(namespace, Sample(namespace)).sessions.append(
                        (session_id, messages))
                await ingest(client, list(samples.values()), parallel=2)
                await settle(client)
        marker.write_text("done")
    made[data.name] = base
    return base


async def measure_real(data: RealSet, total: int, args: argparse.Namespace,
                       made: dict[str, Path]) -> str:
    """The set's queried namespaces, the store filled up to `total`, the set's questions
    timed; one markdown row."""
    base = await ingested(data, args, made)
    data_dir = base.parent / f"{data.name}-{total}"
    marker = data_dir / "populated"
    reuse = args.data_dir is not None and marker.exists()
    if not reuse:
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.copytree(base, data_dir)
        marker.unlink()
    settings = real_settings(data_dir, args)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        state = app.state.engram
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.bench",
                                     timeout=300) as client:
            client.app = app  # type: ignore[attr-defined]  # for `settle`
            queried = 0
            for namespace in data.namespaces:
                queried += await state.repo.count_memories(namespace)
            if reuse:
                print(f"  reusing the store in {data_dir}", file=sys.stderr)
            else:
                await write_filler(state.repo, data.filler_lines, count=total - queried,
                                   dim=state.pool.dim, long=data.name == "long",
                                   chunk_chars=settings.chunk_max_chars)
                await settle(client)
                marker.write_text("done")
            indexed = await state.repo.has_vector_index()
            wall: list[float] = []
            asked: list[str] = []
            empty = degraded = 0  # degraded: the server's default deadline skipped a stage
            for i in range(args.warmup + args.requests):
                namespace, query = data.questions[i % len(data.questions)]
                body = {"namespace": namespace, "query": query, "max_tokens": args.max_tokens}
                t0 = time.perf_counter()
                response = await client.post("/v1/recall", json=body)
                elapsed = (time.perf_counter() - t0) * 1000
                response.raise_for_status()
                if i >= args.warmup:
                    wall.append(elapsed)
                    asked.append(query)
                    answer = response.json()
                    empty += not answer["memories"]
                    degraded += answer["degraded"]
            # The floor: the model alone on the same questions, on this thread.
            floor: list[float] = []
            for query in asked:
                t0 = time.perf_counter()
                state.pool.encode_blocking([query], query=True)
                floor.append((time.perf_counter() - t0) * 1000)
    if not args.keep and not args.data_dir:
        shutil.rmtree(data_dir, ignore_errors=True)
    p50, floor50 = pct(wall, 50), pct(floor, 50)
    return (f"| {data.name} | {total:,} | {len(data.namespaces)} × "
            f"{queried / len(data.namespaces):.0f} | {'yes' if indexed else 'no'} | "
            f"{len(wall)} ({empty} empty, {degraded} degraded) | {p50:.1f} | {pct(wall, 95):.1f} | "
            f"{pct(wall, 99):.1f} | {pct(wall, 99) / p50:.1f} | {floor50:.1f} | "
            f"{p50 / floor50:.1f} |")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="synthetic,zh,en,long",
                        help="synthetic (English-heavy generated lines), zh (MemDaily users), "
                        "en (LoCoMo conversations), long (generated long assistant answers)")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--share", type=float, default=0.02,
                        help="synthetic set: fraction of all memories in the queried namespace")
    parser.add_argument("--namespaces", type=int,
                        help="real sets: queried namespaces (default zh 10, en 3, long 3)")
    parser.add_argument("--source-dir", type=Path, default=DATA_DIR,
                        help="where the evaluation files are read (zh, en)")
    parser.add_argument("--max-tokens", type=int, default=500,
                        help="real sets: the recall budget")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    parser.add_argument("--data-dir", help="keep the stores under this directory and reuse "
                        "them on later runs (same set, size and share)")
    parser.add_argument("--stages", action="store_true",
                        help="synthetic set: print per-stage timings")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a setting, e.g. namespace_cache_max_rows=0 "
                        "(repeatable)")
    parser.add_argument("--embedding-threads", type=int, default=Settings.model_fields[
        "embedding_threads"].default, help="torch threads (1 keeps tails short on a busy box)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    rows, real_rows, tables = [], [], []
    made: dict[str, Path] = {}
    for name in names:
        data = None if name == "synthetic" else real_set(name, args.source_dir, args.namespaces)
        for size in sizes:
            print(f"{name}, {size} memories (load {os.getloadavg()[0]:.1f}):", file=sys.stderr)
            if data is None:
                stages = Stages() if args.stages else None
                rows.append(await measure(size, args, stages))
                if stages is not None:
                    tables.append(f"\nStages at {size:,} memories (per recall):\n\n"
                                  f"{stages.table()}")
            else:
                real_rows.append(await measure_real(data, size, args, made))
            print(f"  done (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
    if rows:
        print("Synthetic set (min_score 0, top_k 10, 1,500 tokens):\n")
        print("| memories | in the queried namespace | vector index | torch threads | recalls "
              "| p50 ms | p95 ms | p99 ms | server mean ms | first recall ms |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows))
        print("\n".join(tables))
    if real_rows:
        print(f"\nReal-shaped sets (default floor, {args.max_tokens} tokens, one client):\n")
        print("| set | memories | queried namespaces × memories | vector index | recalls "
              "| p50 ms | p95 ms | p99 ms | p99/p50 | encode p50 ms (floor) | p50/floor |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(real_rows))
    if not args.keep and not args.data_dir:
        for base in made.values():
            shutil.rmtree(base.parent, ignore_errors=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
