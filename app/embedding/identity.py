"""Which embedding model built the store, and what happens when the configured one differs.

Vectors of two models are not comparable, so a store must never mix them silently. The
model's name and dimension are recorded in the `meta` table at the first start. On a later
start with another model the service refuses to start with a clear error, unless
`ENGRAM_REEMBED_ON_MODEL_CHANGE=true`: then every memory is embedded again with the new model
(the vector column is rebuilt first when the dimension changes) before the service is ready.
"""

from __future__ import annotations

import json

import structlog

from app.embedding.pool import EmbeddingPool
from app.errors import Unavailable
from app.storage.repository import Repository

log = structlog.get_logger(__name__)

META_KEY = "embedding_model"
_REEMBED_BATCH = 512  # memories written per merge: bounded memory, few table versions


async def ensure_model_matches(repo: Repository, pool: EmbeddingPool, *, reembed: bool) -> int:
    """Check (and record) the store's model; re-embed on a change if allowed.

    Returns:
        How many memories were re-embedded (0 when the model is unchanged).

    Raises:
        Unavailable: the store was built with another model and re-embedding is off.
    """
    current = {"name": pool.name, "dim": pool.dim}
    raw = await repo.get_meta(META_KEY)
    stored = json.loads(raw) if raw else {"name": None, "dim": repo.stored_vector_dim}
    if stored == current:
        return 0
    first_start = raw is None and stored["dim"] == pool.dim
    if first_start:
        await repo.set_meta(META_KEY, json.dumps(current))
        return 0
    if not reembed:
        raise Unavailable(
            f"this store was built with embedding model {stored['name']!r} "
            f"({stored['dim']} dimensions) but {pool.name!r} ({pool.dim} dimensions) is "
            f"configured; set ENGRAM_EMBEDDING_MODEL={stored['name']} to keep it, or set "
            "ENGRAM_REEMBED_ON_MODEL_CHANGE=true to re-embed every memory with the new model"
        )
    log.warning("model_changed_reembedding", old=stored, new=current)
    memories = await repo.all_memories()
    if stored["dim"] != pool.dim or repo.stored_vector_dim != pool.dim:
        await repo.reset_vectors(pool.dim)
    for start in range(0, len(memories), _REEMBED_BATCH):
        batch = memories[start: start + _REEMBED_BATCH]
        vectors = await pool.embed_many([m.text for m in batch], background=True)
        for memory, vector in zip(batch, vectors, strict=True):
            memory.vector, memory.embedding_model = vector.tolist(), pool.name
        await repo.upsert_memories(batch)
    await repo.set_meta(META_KEY, json.dumps(current))
    log.info("model_change_done", memories=len(memories), model=pool.name)
    return len(memories)
