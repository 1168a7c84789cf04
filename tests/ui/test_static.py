"""The inspector's files as the app serves them (no browser): where, with which headers."""

from __future__ import annotations

import re
from typing import Any


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
        for module in ("js/app.js", "js/api.js", "js/dom.js", "app.css"):
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
