"""Screenshots of every view of the memory inspector, into docs/ui/ (run by
scripts/ui-screenshots). The same real server and data as the browser tests
(tests/ui/seed.py), the same Chromium (tests/ui/browser.py)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.ui.browser import DESKTOP, PHONE, chromium
from tests.ui.seed import ADMIN_KEY, Inspector, inspector_server


def shoot(page: Page, out: Path, name: str) -> None:
    page.wait_for_timeout(300)  # the toast and focus settle
    page.screenshot(path=str(out / f"{name}.png"), full_page=True)
    print(out / f"{name}.png")


def views(page: Page, inspector: Inspector, out: Path, suffix: str = "") -> None:
    url = inspector.url
    page.goto(url)
    expect(page.get_by_test_id("signin")).to_be_visible()
    if not suffix:
        shoot(page, out, "sign-in")
    page.get_by_test_id("api-key").fill(ADMIN_KEY)
    page.get_by_test_id("signin-submit").click()
    expect(page.get_by_test_id("namespaces")).to_be_visible()
    shoot(page, out, f"namespaces{suffix}")

    page.goto(f"{url}#/memories?ns=alice&q=体检")
    expect(page.get_by_test_id("memory-link").first).to_contain_text("体检")
    shoot(page, out, f"memories-search-zh{suffix}")
    page.goto(f"{url}#/memories?ns=alice")
    expect(page.get_by_test_id("memories")).to_be_visible()
    shoot(page, out, f"memories{suffix}")

    memory = inspector.memory_holding("alice", "dentist")
    page.goto(f"{url}#/memory/{memory['id']}")
    expect(page.get_by_test_id("timeline")).to_be_visible()
    shoot(page, out, f"memory{suffix}")

    page.goto(f"{url}#/recall?ns=alice")
    page.get_by_test_id("recall-query").fill("when is my dentist appointment?")
    page.get_by_test_id("recall-submit").click()
    expect(page.get_by_test_id("recall-block")).to_be_visible()
    cat = inspector.memory_holding("alice", "Miso")
    page.locator(f"[data-testid=why-not-button][data-memory-id='{cat['id']}']").click()
    expect(page.get_by_test_id("why-not")).to_be_visible()
    shoot(page, out, f"recall{suffix}")

    page.goto(f"{url}#/compression?ns=team")
    expect(page.get_by_test_id("compressed")).to_be_visible()
    shoot(page, out, f"compression{suffix}")


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="engram-ui-") as tmp:
        root = Path(tmp)
        with inspector_server(root) as inspector, chromium(root / "profile") as browser:
            browser.set_default_timeout(60_000)
            desktop = browser.new_page()
            desktop.set_viewport_size(DESKTOP)
            views(desktop, inspector, out)
            phone = browser.new_page()
            phone.set_viewport_size(PHONE)
            views(phone, inspector, out, suffix="-phone")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/ui"))
