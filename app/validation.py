"""Name rules shared by every route: namespaces, session ids and message ids.

Namespaces become file names (lock files) and appear in SQL filters, so they are strict;
session and message ids come from clients (chat ids, LoCoMo `D3:7`) and are looser.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

NAMESPACE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
ID_PATTERN = r"^[^\x00-\x1f\x7f]{1,256}$"  # any printable text, no control characters

Namespace = Annotated[str, StringConstraints(pattern=NAMESPACE_PATTERN)]
SessionId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
MessageId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
