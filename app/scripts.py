"""Writing systems: the one definition of which characters are Chinese (Han).

Segmentation, keyword matching, language guessing and compression all ask "is this Chinese?"
and must agree: a run of characters the keyword matcher treats as Chinese has to be the run
the entity extractor segments with jieba. The range covers CJK Unified Ideographs with
Extension A and the compatibility ideographs; kana and hangul are not Han (a Japanese or
Korean word is matched as a word of its own, see `app/recall/service.py`).
"""

from __future__ import annotations

import re
from typing import Final

HAN: Final = r"\u3400-\u9fff\uf900-\ufaff"  # the body of a character class: f"[{HAN}]"
HAN_CHAR: Final = re.compile(f"[{HAN}]")
HAN_RUN: Final = re.compile(f"[{HAN}]+")


def has_han(text: str) -> bool:
    """Whether `text` holds at least one Chinese character."""
    return HAN_CHAR.search(text) is not None
