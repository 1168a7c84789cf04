"""Container health check: exit 0 when GET /readyz answers 200, 1 otherwise.

Standard library only (the slim base image has no curl). Talks to the server inside the same
container on loopback, at ENGRAM_PORT. /readyz needs no API key.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


def main() -> int:
    port = os.environ.get("ENGRAM_PORT", "8420")
    url = f"http://127.0.0.1:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=4) as response:
            return 0 if response.status == 200 else 1
    except urllib.error.HTTPError as exc:
        print(f"{url}: {exc.code} {exc.read(300).decode(errors='replace')}", file=sys.stderr)
    except (OSError, urllib.error.URLError) as exc:
        print(f"{url}: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
