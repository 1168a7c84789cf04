"""The memory inspector: a static page at `/ui` that talks to the public API only.

Plain HTML, CSS and JavaScript modules shipped in the package (`static/`), no build step and
no third-party code: whatever the page shows or changes, it does with the same `/v1` calls
an API user makes, with the API key the user typed (kept in the tab's sessionStorage).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).parent / "static"

# Memory texts are user content: the page renders them as text only (never as HTML), and
# the policy forbids inline and foreign scripts as a second line of defence.
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # A new release's files must reach the browser at once: revalidate every time.
    "Cache-Control": "no-cache",
}


class _InspectorFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(_HEADERS)
        return response


def mount_ui(app: FastAPI) -> None:
    """Serve the inspector at `/ui/` (`/ui` redirects there)."""
    app.mount("/ui", _InspectorFiles(directory=STATIC_DIR, html=True), name="ui")
