"""The MCP server at /mcp, driven by the SDK's own client against a real `engram serve`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from tests.mcp.conftest import ADMIN, ALICE
from tests.procs import ServerProcess

pytestmark = pytest.mark.slow

TOOLS = {"remember", "recall", "context", "forget", "list_memories", "search_memories"}


@asynccontextmanager
async def mcp_client(server: ServerProcess, key: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        transport = streamable_http_client(f"{server.base_url}/mcp", http_client=http)
        async with Client(transport) as client:
            yield client


def payload(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


class TestTools:
    async def test_lists_the_tools_with_descriptions(self, server: ServerProcess) -> None:
        async with mcp_client(server, ALICE) as client:
            listed = await client.list_tools()
        names = {tool.name for tool in listed.tools}
        assert names == TOOLS
        for tool in listed.tools:
            assert tool.description and len(tool.description) > 40, tool.name
            assert "namespace" in tool.input_schema["properties"] or tool.name == "forget"

    @pytest.mark.parametrize(("note", "question", "expected"), [
        ("I am allergic to peanuts, never suggest satay.",
         "what food allergies do I have?", "peanuts"),
        ("我下周二上午要去医院体检，要空腹。", "我什么时候去体检？", "体检"),
    ])
    async def test_remember_then_recall(self, server: ServerProcess, note: str, question: str,
                                        expected: str) -> None:
        async with mcp_client(server, ALICE) as client:
            stored = payload(await client.call_tool(
                "remember", {"namespace": "alice", "note": note}))
            assert stored["status"] == "stored" and stored["memories_created"]
            recalled = payload(await client.call_tool(
                "recall", {"namespace": "alice", "query": question}))
        assert expected in recalled["block"]
        assert stored["memories_created"][0] in {m["id"] for m in recalled["memories"]}

    async def test_remember_a_conversation_twice_stores_it_once(self, server: ServerProcess
                                                                ) -> None:
        turns = [{"msg_id": "1", "role": "user", "content": "We picked LanceDB as the store."},
                 {"msg_id": "2", "role": "assistant", "content": "Noted: LanceDB it is."}]
        args = {"namespace": "alice", "session_id": "chat-7", "messages": turns}
        async with mcp_client(server, ALICE) as client:
            first = payload(await client.call_tool("remember", args))
            again = payload(await client.call_tool("remember", args))
            listed = payload(await client.call_tool(
                "list_memories", {"namespace": "alice", "session_id": "chat-7"}))
        assert (first["new"], again["new"], again["status"]) == (2, 0, "unchanged")
        assert listed["count"] == 1 and "LanceDB" in listed["items"][0]["text"]

    @pytest.mark.parametrize(("namespace", "note", "search", "language"), [
        ("alice-pins-en", "Always answer me in British English.", "British", "en"),
        ("alice-pins-zh", "以后回答我时请一律用简体中文。", "简体中文", "zh"),
    ])
    async def test_pinned_note_leads_the_context_and_is_found_by_search(
            self, server: ServerProcess, namespace: str, note: str, search: str,
            language: str) -> None:
        async with mcp_client(server, ADMIN) as client:
            await client.call_tool("remember", {
                "namespace": namespace, "session_id": "chat-1", "messages": [
                    {"role": "user", "content": "Let's plan the Lisbon trip for May."},
                    {"role": "assistant", "content": "Sure, May in Lisbon it is."}]})
            pinned = payload(await client.call_tool(
                "remember", {"namespace": namespace, "note": note, "pinned": True}))
            context = payload(await client.call_tool(
                "context", {"namespace": namespace, "language": language}))
            found = payload(await client.call_tool(
                "search_memories", {"namespace": namespace, "query": search}))
            refused = await client.call_tool(
                "forget", {"memory_id": pinned["memories_created"][0]})
        first = context["memories"][0]
        assert (first["id"], first["reason"]) == (pinned["memories_created"][0], "pinned")
        assert note in context["block"] and "Lisbon" in context["block"]
        assert found["items"][0]["id"] == first["id"] and found["items"][0]["pinned"]
        assert "conflict: " in error_text(refused) and "pinned" in error_text(refused)

    @pytest.mark.parametrize(("note", "question", "language"), [
        ("My dentist appointment is on the 14th at 9am.", "when is my dentist?", "en"),
        ("我的牙医预约在十四号上午九点。", "我什么时候看牙医？", "zh"),
    ])
    async def test_the_recalled_block_sent_back_makes_no_memory(
            self, server: ServerProcess, note: str, question: str, language: str) -> None:
        namespace = f"alice-echo-{language}"
        async with mcp_client(server, ADMIN) as client:
            await client.call_tool("remember", {"namespace": namespace, "note": note})
            recalled = payload(await client.call_tool("recall", {
                "namespace": namespace, "query": question, "language": language}))
            assert recalled["block"]
            echoed = payload(await client.call_tool("remember", {
                "namespace": namespace, "session_id": "chat-2", "messages": [
                    {"msg_id": "sys", "role": "system", "content": recalled["block"]},
                    {"msg_id": "q", "role": "user", "content": question}]}))
            listed = payload(await client.call_tool("list_memories", {"namespace": namespace}))
        assert echoed["firewalled"] == ["sys"] and echoed["new"] == 2
        assert all(recalled["block"] not in m["text"] for m in listed["items"])

    async def test_forget_removes_it_from_recall(self, server: ServerProcess) -> None:
        async with mcp_client(server, ALICE) as client:
            stored = payload(await client.call_tool(
                "remember", {"namespace": "alice", "note": "My locker code is 4711."}))
            memory_id = stored["memories_created"][0]
            forgotten = payload(await client.call_tool("forget", {"memory_id": memory_id}))
            recalled = payload(await client.call_tool(
                "recall", {"namespace": "alice", "query": "what is my locker code?"}))
        assert forgotten["state"] == "forgotten"
        assert memory_id not in {m["id"] for m in recalled["memories"]}

    async def test_bad_arguments_are_a_tool_error_naming_them(self, server: ServerProcess
                                                              ) -> None:
        async with mcp_client(server, ALICE) as client:
            both = await client.call_tool("remember", {"namespace": "alice", "note": "x",
                                                       "messages": []})
            no_session = await client.call_tool("remember", {
                "namespace": "alice", "messages": [{"role": "user", "content": "hi there"}]})
        assert "either messages" in error_text(both)
        assert "session_id is required" in error_text(no_session)


class TestKeys:
    def test_no_key_is_a_401(self, server: ServerProcess) -> None:
        response = httpx.post(f"{server.base_url}/mcp", json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"accept": "application/json, text/event-stream"})
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"

    async def test_scoped_key_cannot_reach_another_namespace(self, server: ServerProcess
                                                             ) -> None:
        async with mcp_client(server, ADMIN) as admin:
            bob = payload(await admin.call_tool(
                "remember", {"namespace": "bob", "note": "Bob's bank PIN is 9090."}))
        async with mcp_client(server, ALICE) as alice:
            results = [
                await alice.call_tool("recall", {"namespace": "bob", "query": "bank PIN"}),
                await alice.call_tool("remember", {"namespace": "bob", "note": "hijack"}),
                await alice.call_tool("list_memories", {"namespace": "bob"}),
                await alice.call_tool("search_memories", {"namespace": "bob", "query": "PIN"}),
                await alice.call_tool("context", {"namespace": "bob"}),
            ]
            for result in results:
                assert "forbidden: this API key has no access" in error_text(result), result
                assert "'bob'" in error_text(result)
            # By id, bob's memory is as unknown to alice's key as an id that never existed.
            by_id = await alice.call_tool("forget", {"memory_id": bob["memories_created"][0]})
            assert "not_found: memory" in error_text(by_id)
        async with mcp_client(server, ADMIN) as admin:
            still = payload(await admin.call_tool("list_memories", {"namespace": "bob"}))
        assert [m["state"] for m in still["items"]] == ["active"]
        assert "9090" in still["items"][0]["text"]

