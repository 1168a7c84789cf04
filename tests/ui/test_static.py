"""The inspector's files as the app serves them (no browser): where, with which headers."""

from __future__ import annotations

import json
import re
from typing import Any

from app.ui import STATIC_DIR


class TestServedFiles:
    async def test_ui_redirects_to_the_page(self, client: Any) -> None:
        response = await client.get("/ui")
        assert response.status_code in (307, 308)
        assert response.headers["location"].endswith("/ui/")

    async def test_page_and_modules_with_a_strict_policy(self, client: Any) -> None:
        page = await client.get("/ui/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert '<script type="module" src="js/app.js">' in page.text
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert page.headers["x-content-type-options"] == "nosniff"
        for module in ("js/app.js", "js/api.js", "js/dom.js", "js/i18n.js", "app.css",
                       "strings.json"):
            response = await client.get(f"/ui/{module}")
            assert response.status_code == 200, module
            assert response.headers["content-security-policy"] == policy
        script = await client.get("/ui/js/app.js")
        assert "javascript" in script.headers["content-type"]

    async def test_unknown_file_is_a_404(self, client: Any) -> None:
        response = await client.get("/ui/js/nothing.js")
        assert response.status_code == 404

    async def test_the_page_uses_the_public_api_only(self, client: Any) -> None:
        """Every path the page calls is a route of the OpenAPI document."""
        schema = (await client.get("/openapi.json")).json()
        patterns = [re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", p) + "$")
                    for p in schema["paths"]]
        source = (await client.get("/ui/js/app.js")).text
        called = set(re.findall(r'"(/(?:v1|debug)/[^"`]*)"', source))
        called |= {re.sub(r"\$\{[^}]+\}", "x", p)
                   for p in re.findall(r"`(/(?:v1|debug)/[^`]*)`", source)}
        assert called, "no API path found in app.js"
        unknown = [p for p in called if not any(x.match(p) for x in patterns)]
        assert not unknown, unknown


class TestStrings:
    """The page's words are data: every string the scripts pass to t() has its Chinese."""

    async def test_every_ui_string_has_its_chinese_and_none_is_stale(self, client: Any
                                                                      ) -> None:
        response = await client.get("/ui/strings.json")
        assert response.status_code == 200
        zh = response.json()["zh"]
        source = "".join(p.read_text("utf-8") for p in (STATIC_DIR / "js").glob("*.js"))
        used = set(re.findall(r'\bt\("([^"]*)"', source))
        used |= set(re.findall(r'data-i18n="([^"]*)"',
                               (STATIC_DIR / "index.html").read_text("utf-8")))
        roles = re.search(r"const ROLES = (\{[^}]*\})", source)
        assert roles, "ROLES not found in app.js"
        used |= set(re.findall(r'"([^"]*)"', roles.group(1)))
        assert len(used) > 80, "t() strings not found"
        assert sorted(used - set(zh)) == [], "strings without a Chinese translation"
        assert sorted(set(zh) - used) == [], "translations no script uses"
        assert all(re.search(r"[\u4e00-\u9fff]", text) for text in zh.values())
        assert json.loads((STATIC_DIR / "strings.json").read_text("utf-8"))["zh"] == zh
