"""The classifier's word lists and rule table, kept as data files in ``data/``.

Lists are words or phrases separated by whitespace; a line whose first character (after
spaces) is ``#`` is a comment. Only whole lines: ``#`` inside a line is text (a regular
expression may hold one). The files ship in the wheel (pyproject.toml's package-data) and
are read once, at import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["DATA_DIR", "data_lines", "word_set"]

DATA_DIR: Final = Path(__file__).with_name("data")


def data_lines(name: str) -> list[str]:
    """The lines of a data file that are neither empty nor comments, without trailing
    spaces."""
    text = (DATA_DIR / name).read_text(encoding="utf-8")
    lines = (line.rstrip() for line in text.splitlines())
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def word_set(name: str) -> frozenset[str]:
    """The whitespace-separated words of a data file."""
    return frozenset(word for line in data_lines(name) for word in line.split())
