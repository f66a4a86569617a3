"""The tool server: a trial's tools served over MCP and a plain JSON endpoint at a path of its own, answered by the
trial's ToolPlayer, every call recorded; paths kept apart, and no client able to hold the run."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import unittest
from contextlib import ExitStack
from typing import Any
from urllib.parse import urlsplit

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from harness.conversation import ToolPlayer
from harness.environments import World, world_of
from harness.records import Environment, Task, TaskFile
from harness.serving.tools import ServedTurn, ToolServer
from harness.taskfile import load_task_file
from tests.support import DATA, ROOT

WORLDS = load_task_file(os.path.join(ROOT, "examples", "worlds", "eval-tasks.json"))
SHARE = next(task for task in WORLDS.tasks if task.id == "share-with-ana")
HOSTILE = os.path.join(DATA, "envs", "hostile.py")
WAIT = 30.0  # seconds any one wait of a test may take before it fails


def task_named(task_file: TaskFile, task_id: str) -> Task:
    return next(task for task in task_file.tasks if task.id == task_id)


def mcp_session(url: str, *steps: Any) -> list[Any]:
    """What the official MCP SDK client gets for each step (an async function of the session), after initialize."""

    async def run() -> list[Any]:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return [await step(session) for step in steps]

    return asyncio.run(asyncio.wait_for(run(), WAIT))


def post(
    url: str, body: Any, headers: dict[str, str] | None = None, method: str = "POST"
) -> tuple[int, dict[str, str], bytes]:
    """One request on a connection of its own: the status, the headers (lower-case names) and the body."""
    where = urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=WAIT)
    try:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})}
        connection.request(method, where.path, data, sent)
        response = connection.getresponse()
        return response.status, {key.lower(): value for key, value in response.getheaders()}, response.read()
    finally:
        connection.close()


def rpc(method: str, params: dict[str, Any] | None = None, ident: int | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}
    return message if ident is None else {**message, "id": ident}


def initialized(url: str) -> dict[str, str]:
    """A session opened by hand as a client does: the headers its later requests carry."""
    status, headers, body = post(url, rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}}))
    assert status == 200, (status, body)
    session = {"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    assert post(url, rpc("notifications/initialized", ident=None), session)[0] == 202
    return session


class Serving(unittest.TestCase):
    def setUp(self) -> None:
        self.server = ToolServer()
        self.addCleanup(self.server.close)

    def world(self, spec: Environment | None = SHARE.environment) -> World:
        assert spec is not None
        stack = ExitStack()
        self.addCleanup(stack.close)
        return stack.enter_context(world_of(spec))

    def share_turn(self, turn: int = 1, names: dict[str, str] | None = None) -> tuple[ServedTurn, World]:
        """The worlds example's share task served: its scripted contacts and its files environment."""
        world = self.world()
        return self.server.serve(WORLDS.tools, ToolPlayer(SHARE.tool_results, world).answer, turn, names), world


class TheMcpSdkClient(Serving):
    def test_lists_the_tools_and_changes_the_trials_world_by_calling_them(self) -> None:
        served, world = self.share_turn()

        async def listed(session: ClientSession) -> Any:
            return await session.list_tools()

        async def found(session: ClientSession) -> Any:
            return await session.call_tool("contacts.find", {"name": "ana"})

        async def shared(session: ClientSession) -> Any:
            return await session.call_tool("fs.share", {"path": "notes.txt", "email": "ana@example.com"})

        listing, contact, share = mcp_session(served.url, listed, found, shared)
        self.assertEqual([tool.name for tool in listing.tools], [tool.name for tool in WORLDS.tools])
        self.assertEqual(listing.tools[1].description, "Read a file.")
        self.assertEqual(listing.tools[1].input_schema["required"], ["path"])
        self.assertEqual(contact.structured_content, {"name": "Ana Lima", "email": "ana@example.com"})
        self.assertEqual(json.loads(contact.content[0].text), contact.structured_content)
        self.assertFalse(contact.is_error)
        self.assertEqual(
            (share.content[0].text, share.structured_content), ("shared notes.txt with ana@example.com", None)
        )
        self.assertEqual(world.state()["shared"], {"notes.txt": ["ana@example.com"]})
        calls = served.calls()
        self.assertEqual(
            [
                (one.result.call.name, dict(one.result.call.args), one.result.source, one.turn, one.is_error)
                for one in calls
            ],
            [
                ("contacts.find", {"name": "ana"}, "case", 1, False),
                ("fs.share", {"path": "notes.txt", "email": "ana@example.com"}, "environment", 1, False),
            ],
        )

    def test_a_scripted_error_is_an_mcp_error_and_recorded_as_one(self) -> None:
        served, _ = self.share_turn()

        async def unknown(session: ClientSession) -> Any:
            return await session.call_tool("contacts.find", {"name": "Zed"})

        (result,) = mcp_session(served.url, unknown)
        self.assertTrue(result.is_error)
        self.assertEqual(result.structured_content, {"error": "no contact by that name"})
        (call,) = served.calls()
        self.assertEqual((call.result.source, call.is_error), ("default", True))

    def test_an_environment_that_fails_is_an_mcp_error_and_the_trials_failure(self) -> None:
        hostile = Environment(module=HOSTILE, class_name="Hostile", config={}, methods={"fs.rm": "crash"})
        world = self.world(hostile)
        served = self.server.serve(WORLDS.tools, ToolPlayer({}, world).answer, 1)

        async def crash(session: ClientSession) -> Any:
            return await session.call_tool("fs.rm", {})

        first, again = mcp_session(served.url, crash, crash)
        self.assertTrue(first.is_error and again.is_error)
        self.assertEqual(first.structured_content, {"error": "the tool environment failed"})
        self.assertIsNotNone(served.failure)
        self.assertIn("signal", str(served.failure), "the reason stays the harness's, for the trial's error")
        self.assertEqual([call.is_error for call in served.calls()], [True, True])

    def test_an_unknown_tool_is_the_protocols_error_and_is_recorded(self) -> None:
        served, _ = self.share_turn()

        async def unknown(session: ClientSession) -> Any:
            try:
                return await session.call_tool("fs.format", {})
            except MCPError as err:
                return err

        (refused,) = mcp_session(served.url, unknown)
        self.assertEqual((refused.error.code, refused.error.message), (-32602, "Unknown tool: fs.format"))
        (call,) = served.calls()
        self.assertEqual((call.result.call.name, call.result.source, call.is_error), ("fs.format", "unscripted", True))

    def test_safe_names_are_offered_and_read_back_as_the_task_files(self) -> None:
        names = {tool.name.replace(".", "_"): tool.name for tool in WORLDS.tools}
        served, _ = self.share_turn(turn=2, names=names)

        async def listed(session: ClientSession) -> Any:
            return [tool.name for tool in (await session.list_tools()).tools]

        async def found(session: ClientSession) -> Any:
            return await session.call_tool("contacts_find", {"name": "Bo"})

        listing, contact = mcp_session(served.url, listed, found)
        self.assertEqual(listing, list(names))
        self.assertEqual(contact.structured_content["email"], "bo@example.com")
        (call,) = served.calls()
        self.assertEqual(
            (call.result.call.name, call.result.call.reported_name, call.turn), ("contacts.find", "contacts_find", 2)
        )

    def test_only_the_tools_offered_at_the_turn_are_listed_and_answered(self) -> None:
        offered = [tool for tool in WORLDS.tools if tool.name in ("fs.ls", "fs.read")]
        world = self.world()
        served = self.server.serve(offered, ToolPlayer({}, world).answer, 1)

        async def listed(session: ClientSession) -> Any:
            return [tool.name for tool in (await session.list_tools()).tools]

        self.assertEqual(mcp_session(served.url, listed), [["fs.ls", "fs.read"]])
        status, _, body = post(served.call_url, {"name": "fs.rm", "arguments": {"path": "notes.txt"}})
        self.assertEqual((status, json.loads(body)), (200, {"error": "no tool named fs.rm is offered"}))
        self.assertIn("notes.txt", world.state()["files"], "a tool not offered is never called")


class ThePlainEndpoint(Serving):
    def test_a_call_is_answered_with_its_result_or_its_error(self) -> None:
        served, world = self.share_turn()
        status, headers, body = post(served.call_url, {"name": "contacts.find", "arguments": {"name": "Ana"}})
        self.assertEqual((status, headers["content-type"]), (200, "application/json"))
        self.assertEqual(json.loads(body), {"result": {"name": "Ana Lima", "email": "ana@example.com"}})
        status, _, body = post(served.call_url, {"name": "contacts.find", "arguments": {"name": "Zed"}})
        self.assertEqual((status, json.loads(body)), (200, {"error": "no contact by that name"}))
        status, _, body = post(served.call_url, {"name": "fs.rm", "arguments": {"path": "old-notes.txt"}})
        self.assertEqual(json.loads(body), {"result": "deleted old-notes.txt"})
        self.assertNotIn("old-notes.txt", world.state()["files"])
        self.assertEqual([call.is_error for call in served.calls()], [False, True, False])

    def test_a_body_that_is_not_a_call_is_400_and_calls_nothing(self) -> None:
        served, _ = self.share_turn()
        for body in (b"not json", b"[1]", b'{"arguments": {}}', b'{"name": 3}', b"[" * 100_000):
            with self.subTest(body[:20]):
                status, _, answer = post(served.call_url, body)
                self.assertEqual(status, 400)
                self.assertIn("error", json.loads(answer))
        status, _, answer = post(served.call_url, {"name": "fs.rm", "arguments": ["notes.txt"]})
        self.assertEqual(json.loads(answer), {"error": "arguments are not a JSON object"})
        self.assertEqual([call.result.call.args_error for call in served.calls()], ["arguments are not a JSON object"])


if __name__ == "__main__":
    unittest.main()
