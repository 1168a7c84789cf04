"""POST /v1/classify: the analysis of any text, as a client sees it."""

from __future__ import annotations

from typing import Any


class TestClassifyEndpoint:
    async def test_mixed_chinese_english_decision(self, client: Any) -> None:
        response = await client.post("/v1/classify", json={
            "text": "我们决定使用 LanceDB 和 #向量检索 来构建记忆系统"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["category"] == "decision" and 0 < body["confidence"] <= 1
        assert body["scores"]["decision"] > 0
        assert "LanceDB" in body["entities"]["technologies"]
        assert "向量检索" in body["entities"]["hashtags"]
        assert {"记忆", "系统", "构建"} <= set(body["entities"]["concepts"])
        assert 1 <= body["importance"] <= 10

    async def test_english_preference_and_small_talk(self, client: Any) -> None:
        preference = (await client.post("/v1/classify", json={
            "text": "I prefer green tea over coffee in the afternoon."})).json()
        assert preference["category"] == "preference" and not preference["small_talk"]
        chatter = (await client.post("/v1/classify", json={"text": "哈哈 好的"})).json()
        assert chatter["small_talk"] and chatter["category"] == "general"
        assert chatter["importance"] < preference["importance"]

    async def test_empty_text_is_422(self, client: Any) -> None:
        response = await client.post("/v1/classify", json={"text": ""})
        assert response.status_code == 422
        assert "text" in response.json()["error"]["message"]
