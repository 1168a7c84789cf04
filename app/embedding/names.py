"""Names of the bundled embedding models (`ENGRAM_EMBEDDING_MODEL`), free of heavy imports:
the settings resolve a model's profile from its name before any model is loaded."""

from __future__ import annotations

E5_NAME = "multilingual-e5-small"
MINILM_NAME = "all-MiniLM-L6-v2"
# MiniLM stays the default: with e5 as the default, five recall tests written for MiniLM's
# scale fail (docs/benchmarks.md §9) and the benchmarks could not be completed on this
# machine. e5 is a setting, `ENGRAM_EMBEDDING_MODEL=multilingual-e5-small`.
DEFAULT_MODEL = MINILM_NAME


def canonical_name(name: str) -> str:
    """The name a store records for the configured model (empty: the default)."""
    return name or DEFAULT_MODEL
