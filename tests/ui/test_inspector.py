"""The memory inspector in a real headless Chromium against a real server with real data.

One server (tests/ui/seed.py) and one browser per module; each test opens a new tab (its own
sessionStorage, so it signs in afresh). What the page shows is checked against what the API
answers for the same question.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.ui.browser import CHROMIUM, PHONE, chromium
from tests.ui.seed import ADMIN_KEY, ALICE_KEY, Inspector, inspector_server

if not CHROMIUM.exists():
    # CI installs it (scripts/install-chromium); a developer without root may lack it.
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM} is missing: scripts/install-chromium installs it")
    pytest.skip(f"{CHROMIUM} is missing: run scripts/install-chromium",
                allow_module_level=True)

pytestmark = pytest.mark.slow

TIMEOUT_MS = 60_000  # two shared cores: a recall may take a few seconds under load


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inspector]:
    with inspector_server(tmp_path_factory.mktemp("inspector")) as running:
        yield running


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as context:
        context.set_default_timeout(TIMEOUT_MS)
        expect.set_options(timeout=TIMEOUT_MS)
        yield context


@pytest.fixture
def page(browser: BrowserContext) -> Iterator[Page]:
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    tab.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def chinese_tab(browser: BrowserContext) -> Page:
    """A tab whose browser prefers Chinese (navigator.languages, Accept-Language), as
    Playwright's locale option sets them, for one tab of the shared browser."""
    tab = browser.new_page()
    cdp = browser.new_cdp_session(tab)
    agent = tab.evaluate("navigator.userAgent")
    cdp.send("Emulation.setUserAgentOverride", {"userAgent": agent,
                                                "acceptLanguage": "zh-CN,zh"})
    return tab


def shown_time(value: str) -> str:
    """An API time as the page shows it."""
    return f"{datetime.fromisoformat(value.replace('Z', '+00:00')):%Y-%m-%d %H:%M} UTC"


def sign_in(page: Page, inspector: Inspector, key: str = ADMIN_KEY) -> None:
    page.goto(inspector.url)
    page.get_by_test_id("api-key").fill(key)
    page.get_by_test_id("signin-submit").click()
    expect(page.get_by_test_id("view-namespaces")).to_be_visible()


def api(inspector: Inspector, method: str, path: str, **kwargs: Any) -> Any:
    with inspector.client() as client:
        response = client.request(method, path, **kwargs)
        assert response.status_code == 200, response.text
        return response.json()


class TestSignIn:
    def test_admin_sees_every_namespace_with_sizes(self, page: Page,
                                                   inspector: Inspector) -> None:
        sign_in(page, inspector)
        listed = api(inspector, "GET", "/v1/namespaces")["namespaces"]
        rows = page.get_by_test_id("namespaces").locator("tbody tr")
        expect(rows).to_have_count(len(listed))
        alice = next(n for n in listed if n["namespace"] == "alice")
        row = rows.filter(has_text="alice")
        expect(row.locator("td[data-label=Memories]")).to_have_text(str(alice["memories"]))
        expect(row.locator("td[data-label=Sessions]")).to_have_text(str(alice["sessions"]))
        # The key lives in this tab's sessionStorage only, not in a cookie or localStorage.
        assert page.evaluate("sessionStorage.getItem('engram.apiKey')") == ADMIN_KEY
        assert page.evaluate("localStorage.length") == 0
        assert page.context.cookies() == []

    def test_a_scoped_key_sees_only_its_namespace(self, page: Page,
                                                  inspector: Inspector) -> None:
        sign_in(page, inspector, ALICE_KEY)
        links = page.get_by_test_id("namespace-link")
        expect(links).to_have_text(["alice"])
        page.goto(f"{inspector.url}#/memories?ns=bob")
        expect(page.get_by_test_id("error")).to_contain_text("403")

    def test_a_wrong_key_is_refused_and_not_kept(self, page: Page,
                                                 inspector: Inspector) -> None:
        page.goto(inspector.url)
        page.get_by_test_id("api-key").fill("not-a-key-of-this-server")
        page.get_by_test_id("signin-submit").click()
        expect(page.get_by_test_id("error")).to_contain_text("401")
        expect(page.get_by_test_id("signin")).to_be_visible()
        assert page.evaluate("sessionStorage.getItem('engram.apiKey')") is None

    def test_no_navigation_before_sign_in(self, page: Page, inspector: Inspector) -> None:
        page.goto(f"{inspector.url}#/memories?ns=alice")
        expect(page.get_by_test_id("signin")).to_be_visible()
        expect(page.locator("#nav")).to_be_hidden()
        expect(page.get_by_role("link", name="Memories")).to_have_count(0)
        expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
        sign_in(page, inspector)
        expect(page.locator("#nav")).to_be_visible()
        page.get_by_role("button", name="Sign out").click()
        expect(page.locator("#nav")).to_be_hidden()

    def test_sign_out_forgets_the_key(self, page: Page, inspector: Inspector) -> None:
        sign_in(page, inspector)
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_test_id("signin")).to_be_visible()
        assert page.evaluate("sessionStorage.getItem('engram.apiKey')") is None


class TestMemories:
    @pytest.mark.parametrize(("query", "expected"), [
        ("体检", "下周二上午体检"),
        ("dentist appointment", "My dentist appointment is on Thursday"),
    ])
    def test_search_finds_the_memory_and_opens_its_timeline(
            self, page: Page, inspector: Inspector, query: str, expected: str) -> None:
        sign_in(page, inspector)
        page.get_by_test_id("namespace-link").filter(has_text="alice").click()
        page.get_by_test_id("filter-q").fill(query)
        page.get_by_test_id("filter-submit").click()
        first = page.get_by_test_id("memory-link").first
        expect(first).to_contain_text(expected)
        first.click()
        expect(page.get_by_test_id("memory-text")).to_contain_text(expected)
        memory = inspector.memory_holding("alice", expected)
        expect(page.get_by_test_id("messages").locator("li")).to_have_count(memory["msg_count"])
        weights = page.get_by_test_id("weights")
        assert memory["weight"]["total"] > 0  # the seeded pass scored it
        for dimension in ("novelty", "entropy", "task", "emotion", "total"):
            expect(weights.locator(".bar").filter(has_text=dimension).locator(".bar-value")
                   ).to_have_text(f"{memory['weight'][dimension]:.3f}")
        expect(page.get_by_test_id("category")).to_contain_text(memory["category"])
        events = api(inspector, "GET", f"/v1/memories/{memory['id']}/evolution")["events"]
        timeline = page.get_by_test_id("timeline").locator("li")
        expect(timeline).to_have_count(len(events))
        expect(timeline.first).to_have_attribute("data-event", "created")

    @pytest.mark.parametrize("said", ["下周二上午体检", "My dentist appointment is on Thursday"])
    def test_messages_as_text_with_conversation_time(self, page: Page, inspector: Inspector,
                                                     said: str) -> None:
        memory = inspector.memory_holding("alice", said)
        messages = api(inspector, "GET", f"/v1/memories/{memory['id']}/messages")["items"]
        assert len(messages) == memory["msg_count"] == 2
        sign_in(page, inspector)
        page.goto(f"{inspector.url}#/memory/{memory['id']}")
        shown = page.get_by_test_id("messages").locator("li")
        expect(shown).to_have_count(len(messages))
        expect(shown.get_by_test_id("message-content")).to_have_text(
            [m["content"] for m in messages])
        expect(shown.get_by_test_id("message-role")).to_have_text(["User", "Assistant"])
        expect(shown.get_by_test_id("message-time")).to_have_text(
            [shown_time(m["timestamp"]) for m in messages])
        # The seeded conversation happened in November; the server stored it today.
        said_at = page.get_by_test_id("memory-said")
        expect(said_at).to_contain_text(shown_time(memory["time_start"]))
        expect(said_at).not_to_contain_text(shown_time(memory["created_at"]))
        page.goto(f"{inspector.url}#/memories?ns=alice&limit=500")
        row = page.get_by_test_id("memories").locator("tbody tr").filter(has_text=said)
        expect(row.get_by_test_id("memory-said")).to_have_text(shown_time(memory["time_start"]))

    def test_filters_and_pages_newest_first(self, page: Page, inspector: Inspector) -> None:
        sign_in(page, inspector)
        expected = [m["text"][:40] for m in inspector.memories("alice")]
        page.goto(f"{inspector.url}#/memories?ns=alice&limit=3")
        expect(page.get_by_test_id("page-info")).to_have_text(f"1–3 of {len(expected)}")
        shown = page.get_by_test_id("memory-link")
        expect(shown).to_have_count(3)
        page.get_by_test_id("page-next").click()
        expect(page.get_by_test_id("page-info")).to_have_text(f"4–6 of {len(expected)}")
        for i in range(3):
            expect(shown.nth(i)).to_contain_text(expected[3 + i])
        page.get_by_test_id("filter-category").select_option("decision")
        page.get_by_test_id("filter-submit").click()
        decisions = inspector.memories("alice", category="decision")
        expect(page.get_by_test_id("memory-link")).to_have_count(len(decisions))

    def test_memory_text_is_not_html(self, page: Page, inspector: Inspector) -> None:
        sign_in(page, inspector)
        page.goto(f"{inspector.url}#/memories?ns=alice&q=snippet")
        link = page.get_by_test_id("memory-link").first
        expect(link).to_contain_text('<b id="injected">bold</b>')
        link.click()
        expect(page.get_by_test_id("memory-text")).to_contain_text("<img src=x")
        assert page.locator("#injected").count() == 0
        assert page.evaluate("window.injected") is None

    def test_forget_restore_pin_and_edit(self, page: Page, inspector: Inspector) -> None:
        memory = inspector.memory_holding("alice", "吉他")
        sign_in(page, inspector)
        page.goto(f"{inspector.url}#/memory/{memory['id']}")
        page.get_by_test_id("forget").click()
        expect(page.get_by_test_id("restore")).to_be_visible()
        expect(page.get_by_test_id("state").first).to_have_text("forgotten")
        assert api(inspector, "GET", f"/v1/memories/{memory['id']}")["state"] == "forgotten"
        expect(page.locator("[data-event=forgotten]")).to_have_count(1)

        page.get_by_test_id("restore").click()
        expect(page.get_by_test_id("forget")).to_be_visible()
        assert api(inspector, "GET", f"/v1/memories/{memory['id']}")["state"] == "active"
        expect(page.locator("[data-event=restored]")).to_have_count(1)

        page.get_by_test_id("pin").click()
        expect(page.get_by_test_id("unpin")).to_be_visible()
        assert api(inspector, "GET", f"/v1/memories/{memory['id']}")["pinned"] is True
        page.get_by_test_id("edit-tags").fill("爱好, music")
        page.get_by_test_id("edit-save").click()
        expect(page.locator("#toast")).to_have_text("Saved.")
        expect(page.get_by_test_id("edit-tags")).to_have_value("爱好, music")
        assert api(inspector, "GET", f"/v1/memories/{memory['id']}")["tags"] == ["爱好",
                                                                                 "music"]
        page.get_by_test_id("unpin").click()
        expect(page.get_by_test_id("pin")).to_be_visible()
        assert api(inspector, "GET", f"/v1/memories/{memory['id']}")["pinned"] is False


class TestLanguage:
    def test_a_chinese_browser_gets_chinese_labels_and_can_switch(
            self, browser: BrowserContext, inspector: Inspector) -> None:
        page = chinese_tab(browser)
        try:
            assert page.evaluate("navigator.languages")[0] == "zh-CN"
            page.goto(inspector.url)
            expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
            expect(page.get_by_test_id("signin").locator("h1")).to_have_text("登录")
            page.get_by_test_id("api-key").fill(ADMIN_KEY)
            page.get_by_test_id("signin-submit").click()
            expect(page.get_by_test_id("view-namespaces").locator("h1")).to_have_text("命名空间")
            expect(page.locator("#nav a")).to_have_text(["命名空间", "记忆", "召回", "压缩"])
            memory = inspector.memory_holding("alice", "体检")
            page.goto(f"{inspector.url}#/memory/{memory['id']}")
            expect(page.get_by_test_id("messages").get_by_test_id("message-role")).to_have_text(
                ["用户", "助手"])
            expect(page.get_by_test_id("memory-said")).to_contain_text("对话时间")

            page.get_by_test_id("lang-switch").click()
            expect(page.locator("html")).to_have_attribute("lang", "en")
            expect(page.locator("#nav a")).to_have_text(
                ["Namespaces", "Memories", "Recall", "Compression"])
            expect(page.get_by_test_id("messages").get_by_test_id("message-role")).to_have_text(
                ["User", "Assistant"])
            # The choice outlives the tab: a new Chinese tab opens in English.
            again = chinese_tab(browser)
            again.goto(inspector.url)
            expect(again.get_by_test_id("signin").locator("h1")).to_have_text("Sign in")
            again.get_by_test_id("lang-switch").click()
            expect(again.get_by_test_id("signin").locator("h1")).to_have_text("登录")
            again.close()
        finally:
            page.evaluate("localStorage.clear()")
            page.close()

    def test_an_english_browser_gets_english(self, page: Page, inspector: Inspector) -> None:
        page.goto(inspector.url)
        expect(page.locator("html")).to_have_attribute("lang", "en")
        expect(page.get_by_test_id("signin").locator("h1")).to_have_text("Sign in")
        expect(page.get_by_test_id("lang-switch")).to_have_text("中文")


class TestRecall:
    @pytest.mark.parametrize(("query", "unrelated"), [
        ("when is my dentist appointment?", "Miso"),
        ("我的体检安排是哪天", "Miso"),
    ])
    def test_block_explain_and_why_not(self, page: Page, inspector: Inspector, query: str,
                                       unrelated: str) -> None:
        sign_in(page, inspector)
        page.goto(f"{inspector.url}#/recall?ns=alice")
        page.get_by_test_id("recall-query").fill(query)
        page.get_by_test_id("recall-submit").click()
        block = page.get_by_test_id("recall-block")
        expect(block).to_be_visible()
        answer = api(inspector, "POST", "/v1/recall", json={"namespace": "alice",
                                                            "query": query})
        # Exactly the block an assistant gets (the same text, line for line).
        assert block.inner_text() == answer["block"]
        rows = page.get_by_test_id("recalled").locator("tbody tr")
        expect(rows).to_have_count(answer["count"])
        for i, recalled in enumerate(answer["memories"]):
            for part in ("relevance", "vector", "keyword", "decay", "boost"):
                expect(rows.nth(i).get_by_test_id(f"explain-{part}")).to_have_text(
                    f"{recalled['explain'][part]:.3f}")

        other = inspector.memory_holding("alice", unrelated)
        page.locator(f"[data-testid=why-not-button][data-memory-id='{other['id']}']").click()
        verdict = api(inspector, "POST", "/v1/recall/why_not", json={
            "namespace": "alice", "query": query, "memory_ids": [other["id"]],
            "top_k": 10, "language": "auto"})["items"][0]
        assert verdict["verdict"] in ("below_threshold", "not_candidate"), verdict
        expect(page.get_by_test_id("why-not-verdict")).to_have_text(
            verdict["verdict"].replace("_", " "))
        expect(page.get_by_test_id("why-not-reason")).to_have_text(verdict["reason"])

    def test_why_not_by_id_names_the_state(self, page: Page, inspector: Inspector) -> None:
        memory = inspector.memory_holding("alice", "half marathon")
        api(inspector, "POST", f"/v1/memories/{memory['id']}/forget")
        try:
            sign_in(page, inspector)
            page.goto(f"{inspector.url}#/recall?ns=alice")
            page.get_by_test_id("recall-query").fill("marathon training in October")
            page.get_by_test_id("recall-submit").click()
            page.get_by_test_id("why-not-id").fill(memory["id"])
            page.get_by_test_id("why-not-submit").click()
            expect(page.get_by_test_id("why-not-verdict")).to_have_text("state")
            expect(page.get_by_test_id("why-not-reason")).to_contain_text("forgotten")
        finally:
            api(inspector, "POST", f"/v1/memories/{memory['id']}/restore")


class TestCompression:
    def test_latest_pass_shadow_report_and_restore(self, page: Page,
                                                   inspector: Inspector) -> None:
        sign_in(page, inspector)
        page.goto(f"{inspector.url}#/compression?ns=team")
        status = api(inspector, "GET", "/v1/compression/status")["namespaces"]["team"]
        expect(page.get_by_test_id("last-pass")).to_contain_text(
            f"{len(status['compressed'])} compressed")
        expect(page.get_by_test_id("shadow-report").first).to_contain_text(
            f"{status['shadow']['differing']} decisions differ")
        compressed = inspector.memories("team", state="compressed")
        rows = page.get_by_test_id("compressed").locator("tbody tr")
        expect(rows).to_have_count(len(compressed))
        target = compressed[0]["id"]
        page.locator(f"[data-testid=restore-compressed][data-memory-id='{target}']").click()
        expect(rows).to_have_count(len(compressed) - 1)
        assert api(inspector, "GET", f"/v1/memories/{target}")["state"] == "active"


class TestPhoneWidth:
    def test_every_view_fits_a_phone(self, page: Page, inspector: Inspector,
                                     tmp_path: Path) -> None:
        page.set_viewport_size(PHONE)
        sign_in(page, inspector)
        memory = inspector.memory_holding("alice", "dentist")
        for route, ready in (("#/", "namespaces"), ("#/memories?ns=alice", "memories"),
                             (f"#/memory/{memory['id']}", "timeline"),
                             ("#/compression?ns=team", "compressed")):
            page.goto(f"{inspector.url}{route}")
            expect(page.get_by_test_id(ready)).to_be_visible()
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{route} is {width} px wide"
        page.goto(f"{inspector.url}#/recall?ns=alice")
        page.get_by_test_id("recall-query").fill("dentist")
        page.get_by_test_id("recall-submit").click()
        expect(page.get_by_test_id("recall-block")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        # Tables turn into one card per row: the header row is hidden, each cell labelled.
        expect(page.get_by_test_id("recalled").locator("thead")).to_be_hidden()
