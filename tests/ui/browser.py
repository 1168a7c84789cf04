"""Debian's Chromium driven by Playwright for Python (never a browser Playwright downloads).

The flags are those known to work on this machine: headless, no sandbox (root), and no
background networking (the closed network refuses Chromium's own connections), with a fresh
profile directory per launch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import BrowserContext, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@contextmanager
def chromium(profile: Path) -> Iterator[BrowserContext]:
    """A headless Chromium with a new empty profile directory `profile` (Playwright passes
    it as --user-data-dir). Each page of the context is a tab with its own sessionStorage."""
    profile.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport=DESKTOP, locale="en-US")
        try:
            yield context
        finally:
            context.close()
