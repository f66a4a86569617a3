"""The tool server: a trial's tools served over MCP and a plain JSON endpoint at a path of its own, answered by the
trial's ToolPlayer, every call recorded; paths kept apart, and no client able to hold the run."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import secrets
import socket
import threading
import time
import unittest
from contextlib import ExitStack
from typing import Any
from urllib.parse import urlsplit

from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from harness.conversation import ToolPlayer
from harness.environments import World, world_of
from harness.observed import observed_step
from harness.records import Environment, Reply, Served, Step, Task, TaskFile, Tool, ToolCall, ToolScript
from harness.serving.tools import MAX_BODY, MAX_CALLS, PROTOCOL_VERSIONS, ServedTurn, ToolServer
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


class RealMcpClients(Serving):
    """The official MCP SDK's clients and the OpenAI Agents SDK's, as agents use them."""

    def test_the_sdk_client_lists_the_tools_and_changes_the_trials_world_by_calling_them(self) -> None:
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

    def test_its_high_level_client_that_probes_for_a_newer_revision_first_falls_back_to_the_handshake(self) -> None:
        served, _ = self.share_turn()

        async def run() -> Any:
            async with Client(served.url) as client:
                return await client.call_tool("contacts.find", {"name": "Bo"})

        found = asyncio.run(asyncio.wait_for(run(), WAIT))
        self.assertEqual(found.structured_content, {"name": "Bo Berg", "email": "bo@example.com"})
        self.assertEqual([call.result.source for call in served.calls()], ["case"])

    def test_the_openai_agents_sdks_mcp_client_lists_and_calls_the_served_tools(self) -> None:
        from agents.mcp import MCPServerStreamableHttp

        served, world = self.share_turn()

        async def run() -> Any:
            async with MCPServerStreamableHttp(params={"url": served.url}) as tools:
                listed = [tool.name for tool in await tools.list_tools()]
                unknown = await tools.call_tool("contacts.find", {"name": "Zed"})
                shared = await tools.call_tool("fs.share", {"path": "notes.txt", "email": "bo@example.com"})
                return listed, unknown, shared

        listed, unknown, shared = asyncio.run(asyncio.wait_for(run(), WAIT))
        self.assertEqual(listed, [tool.name for tool in WORLDS.tools])
        self.assertEqual((unknown.is_error, unknown.structured_content), (True, {"error": "no contact by that name"}))
        self.assertEqual((shared.is_error, shared.content[0].text), (False, "shared notes.txt with bo@example.com"))
        self.assertEqual(world.state()["shared"], {"notes.txt": ["bo@example.com"]})
        self.assertEqual([call.result.source for call in served.calls()], ["default", "environment"])

    def test_a_tool_whose_schema_leaves_out_its_object_type_is_listed_as_the_sdk_requires(self) -> None:
        schema = {"properties": {"query": {"type": "string"}}}  # the task file takes it: a call's args are an object
        served = self.server.serve([Tool("assets.search", "Search.", schema)], ToolPlayer({}).answer, 1)

        async def listed(session: ClientSession) -> Any:
            return await session.list_tools()

        (listing,) = mcp_session(served.url, listed)
        self.assertEqual(listing.tools[0].input_schema, {"type": "object", **schema})

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
        player = ToolPlayer({}, world)
        served = self.server.serve(WORLDS.tools, player.answer, 1)

        async def crash(session: ClientSession) -> Any:
            return await session.call_tool("fs.rm", {})

        first, again = mcp_session(served.url, crash, crash)
        self.assertTrue(first.is_error and again.is_error)
        self.assertEqual(first.structured_content, {"error": "the tool environment failed"})
        failure = served.failure
        self.assertIsNotNone(failure)
        self.assertIn("signal", str(failure), "the reason stays the harness's, for the trial's error")
        self.assertEqual([call.is_error for call in served.calls()], [True, True])
        served.end()
        later = self.server.serve(WORLDS.tools, player.answer, 2)
        self.assertEqual(
            json.loads(post(later.call_url, {"name": "fs.rm"})[2]), {"error": "the tool environment failed"}
        )
        self.assertIs(later.failure, failure, "the trial's failure, its environment not asked again")

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

    def test_with_safe_names_the_plain_endpoint_answers_a_call_by_the_task_file_s_name_too(self) -> None:
        names = {tool.name.replace(".", "_"): tool.name for tool in WORLDS.tools}
        served, _ = self.share_turn(names=names)
        for name in ("contacts_find", "contacts.find"):  # the name offered, and the one the request's tools say
            self.assertEqual(
                json.loads(post(served.call_url, {"name": name, "arguments": {"name": "Bo"}})[2]),
                {"result": {"name": "Bo Berg", "email": "bo@example.com"}},
            )
        self.assertEqual(
            [(call.result.call.name, call.result.call.reported_name) for call in served.calls()],
            [("contacts.find", "contacts_find"), ("contacts.find", None)],
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

    def test_a_lone_surrogate_the_result_echoes_is_answered_escaped_on_both_endpoints(self) -> None:
        cut = "launch \U0001f680"[:-1] + "\ud83d"  # what a JavaScript agent slicing UTF-16 sends
        tool = Tool("assets.search", "Search.", {"type": "object", "properties": {"query": {"type": "string"}}})
        player = ToolPlayer({tool.name: ToolScript(results=({"found": {"echo": "query"}},))})
        served = self.server.serve([tool], player.answer, 1)
        status, _, body = post(served.call_url, {"name": tool.name, "arguments": {"query": cut}})
        self.assertEqual((status, json.loads(body)), (200, {"result": {"found": cut}}))
        self.assertIn(b"\\ud83d", body, "escaped: the body is UTF-8")
        client = {"name": "t", "version": "1"}
        init = {"protocolVersion": PROTOCOL_VERSIONS[0], "capabilities": {}, "clientInfo": client}
        _, headers, _ = post(served.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        session = {"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": PROTOCOL_VERSIONS[0]}
        call = {"name": tool.name, "arguments": {"query": cut}}
        status, _, body = post(served.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, session)
        self.assertEqual((status, json.loads(body)["result"]["structuredContent"]), (200, {"found": cut}))
        self.assertEqual([c.result.content for c in served.calls()], [{"found": cut}] * 2)


class Isolation(Serving):
    def test_trials_served_at_once_each_call_and_change_only_their_own_world(self) -> None:
        trials = [self.share_turn() for _ in range(8)]

        async def trial(index: int, served: ServedTurn) -> list[Any]:
            async with streamable_http_client(served.url) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                email = f"user{index}@example.com"
                shared = await session.call_tool("fs.share", {"path": "notes.txt", "email": email})
                moved = await session.call_tool("fs.mv", {"source": "draft.txt", "target": f"draft-{index}.txt"})
                return [shared.content[0].text, moved.content[0].text]

        def plain(index: int, served: ServedTurn, answers: list[Any]) -> None:
            for _ in range(5):
                answers.append(json.loads(post(served.call_url, {"name": "fs.ls", "arguments": {}})[2]))

        answers: list[list[Any]] = [[] for _ in trials]
        threads = [threading.Thread(target=plain, args=(i, served, answers[i])) for i, (served, _) in enumerate(trials)]

        async def together() -> list[Any]:
            return await asyncio.gather(*(trial(index, served) for index, (served, _) in enumerate(trials)))

        for thread in threads:
            thread.start()
        said = asyncio.run(asyncio.wait_for(together(), WAIT))
        for thread in threads:
            thread.join(WAIT)
        for index, (served, world) in enumerate(trials):
            with self.subTest(trial=index):
                email = f"user{index}@example.com"
                self.assertEqual(
                    said[index], [f"shared notes.txt with {email}", f"moved draft.txt to draft-{index}.txt"]
                )
                self.assertEqual(world.state()["shared"], {"notes.txt": [email]})
                self.assertIn(f"draft-{index}.txt", world.state()["files"])
                self.assertEqual(len(answers[index]), 5)
                mine = [call.result.call for call in served.calls() if call.result.call.name != "fs.ls"]
                self.assertEqual(
                    [call.args.get("email", call.args.get("target")) for call in mine], [email, f"draft-{index}.txt"]
                )
                self.assertEqual(len(served.calls()), 7)

    def test_a_guessed_path_gets_404_and_calls_nothing(self) -> None:
        served, world = self.share_turn()
        before = world.state()
        token = urlsplit(served.url).path.split("/")[1]
        base = served.url.rsplit("/", 2)[0]
        guesses = [
            f"{base}/{secrets.token_urlsafe(24)}/call",
            f"{base}/{token[:-1]}{'A' if token[-1] != 'A' else 'B'}/call",
            f"{base}/{token[:16]}/call",
            f"{base}/{token}",
            f"{base}/{token}/call/more",
            f"{base}/{token}/other",
            f"{base}//call",
            f"{base}/",
        ]
        for url in guesses:
            with self.subTest(url.replace(token, "<token>")):
                status, _, body = post(url, {"name": "fs.rm", "arguments": {"path": "notes.txt"}})
                self.assertEqual((status, body), (404, b""))
        self.assertEqual((served.calls(), world.state()), ((), before))

    def test_an_ended_path_gets_404_and_calls_nothing(self) -> None:
        served, world = self.share_turn()
        session = initialized(served.url)
        self.assertEqual(post(served.call_url, {"name": "fs.ls"})[0], 200)
        served.end()
        before = world.state()
        call = rpc("tools/call", {"name": "fs.rm", "arguments": {"path": "notes.txt"}})
        self.assertEqual(post(served.url, call, session)[::2], (404, b""))
        self.assertEqual(post(served.call_url, {"name": "fs.rm", "arguments": {"path": "notes.txt"}})[::2], (404, b""))
        self.assertEqual((len(served.calls()), world.state()), (1, before))

    def test_another_sites_origin_is_refused_and_calls_nothing(self) -> None:
        served, world = self.share_turn()
        port = urlsplit(served.url).port
        call = {"name": "fs.rm", "arguments": {"path": "notes.txt"}}
        for origin in ("http://evil.example", f"http://evil.example:{port}", "null", "http://127.0.0.1:1"):
            with self.subTest(origin):
                self.assertEqual(post(served.call_url, call, {"Origin": origin})[0], 403)
                self.assertEqual(post(served.url, rpc("initialize", {}), {"Origin": origin})[0], 403)
        self.assertEqual((served.calls(), world.state()["files"][1]), ((), "notes.txt"))
        for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
            with self.subTest(origin):
                self.assertEqual(post(served.call_url, {"name": "fs.ls"}, {"Origin": origin})[0], 200)

    def test_an_advertised_address_names_the_paths_and_is_an_origin_of_its_own(self) -> None:
        server = ToolServer(advertised="https://tools.example.net/")
        self.addCleanup(server.close)
        served = server.serve(WORLDS.tools, ToolPlayer(SHARE.tool_results).answer, 1)
        self.assertTrue(served.url.startswith("https://tools.example.net/") and served.url.endswith("/mcp"))
        self.assertTrue(served.call_url.startswith("https://tools.example.net/") and served.call_url.endswith("/call"))
        local = f"http://127.0.0.1:{server.port}{urlsplit(served.call_url).path}"
        call = {"name": "contacts.find", "arguments": {"name": "Ana"}}
        self.assertEqual(post(local, call, {"Origin": "https://tools.example.net"})[0], 200)
        self.assertEqual(post(local, call, {"Origin": "https://other.example.net"})[0], 403)
        behind = ToolServer(advertised="https://tools.example.net/tools/")
        self.addCleanup(behind.close)
        served = behind.serve(WORLDS.tools, ToolPlayer(SHARE.tool_results).answer, 1)
        path = urlsplit(served.call_url).path
        self.assertTrue(path.startswith("/tools/"), path)
        for forwarded in (path, path.removeprefix("/tools")):
            with self.subTest(forwarded):
                self.assertEqual(post(f"http://127.0.0.1:{behind.port}{forwarded}", call)[0], 200)


class Bounds(Serving):
    def test_a_length_of_more_digits_than_int_reads_is_413_not_a_traceback(self) -> None:
        served, _ = self.share_turn()
        path = urlsplit(served.call_url).path
        for expect in ("", "Expect: 100-continue\r\n"):
            with (
                self.subTest(expect=bool(expect)),
                socket.create_connection(("127.0.0.1", self.server.port), WAIT) as c,
            ):
                c.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n{expect}Content-Length: {'9' * 5000}\r\n\r\n".encode())
                self.assertTrue(c.recv(1024).startswith(b"HTTP/1.1 413 "))
        self.assertEqual(post(served.call_url, {"name": "fs.ls"})[0], 200)
        self.assertEqual(served.calls()[0].result.call.name, "fs.ls")

    def test_a_body_over_the_cap_is_413_and_the_server_serves_on(self) -> None:
        served, _ = self.share_turn()
        huge = json.dumps({"name": "fs.ls", "arguments": {"pad": "x" * (10 * 1024 * 1024)}}).encode()
        self.assertGreater(len(huge), MAX_BODY)
        for url in (served.call_url, served.url):
            with self.subTest(url.rsplit("/", 1)[1]):
                self.assertEqual(post(url, huge)[0], 413)
        asking = socket.create_connection(("127.0.0.1", self.server.port), timeout=WAIT)
        self.addCleanup(asking.close)
        path = urlsplit(served.call_url).path
        asking.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(huge)}\r\nExpect: 100-continue\r\n\r\n".encode()
        )
        self.assertTrue(asking.recv(1024).startswith(b"HTTP/1.1 413 "), "refused before it is sent")
        for length in ("-1", "+12", "1_0", "x"):
            with self.subTest(length=length):
                self.assertEqual(post(served.call_url, b"{}", {"Content-Length": length})[0], 400)
        self.assertEqual(served.calls(), ())
        self.assertEqual(post(served.call_url, {"name": "fs.ls"})[0], 200)

    def test_headers_past_the_http_servers_bounds_are_refused_and_the_server_serves_on(self) -> None:
        served, _ = self.share_turn()
        status, _, _ = post(served.call_url, {"name": "fs.ls"}, {"X-Long": "x" * 100_000})
        self.assertEqual(status, 431)
        many = {f"X-{number}": "x" for number in range(200)}
        self.assertEqual(post(served.call_url, {"name": "fs.ls"}, many)[0], 431)
        chunked = socket.create_connection(("127.0.0.1", self.server.port), timeout=WAIT)
        self.addCleanup(chunked.close)
        path = urlsplit(served.call_url).path
        chunked.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        self.assertTrue(chunked.recv(1024).startswith(b"HTTP/1.1 411 "), "a body of no length said is not read")
        self.assertEqual(served.calls(), ())
        self.assertEqual(post(served.call_url, {"name": "fs.ls"})[0], 200)

    def test_a_trials_calls_past_the_cap_over_its_turns_are_errors_that_call_nothing(self) -> None:
        played = ToolPlayer({"fs.ls": ToolScript(("a.txt",))})
        first = self.server.serve(WORLDS.tools, played.answer, 1)
        for _ in range(MAX_CALLS - 1):
            first.call("fs.ls", {})
        first.end()
        served = self.server.serve(WORLDS.tools, played.answer, 2)
        other = self.server.serve(WORLDS.tools, ToolPlayer({"fs.ls": ToolScript(("b.txt",))}).answer, 1)
        self.assertEqual(json.loads(post(served.call_url, {"name": "fs.ls"})[2]), {"result": "a.txt"}, "the last")
        status, _, body = post(served.call_url, {"name": "fs.ls"})
        self.assertEqual((status, json.loads(body)), (200, {"error": f"more than {MAX_CALLS} calls in this trial"}))
        self.assertEqual((len(served.calls()), served.refused, played.calls[("fs.ls", None)]), (1, 1, MAX_CALLS))
        self.assertEqual(json.loads(post(other.call_url, {"name": "fs.ls"})[2]), {"result": "b.txt"}, "another trial")

    def test_a_reply_reporting_a_trials_every_call_in_another_order_is_judged_within_a_bound(self) -> None:
        played = ToolPlayer({"fs.read": ToolScript(("text",))})
        served = self.server.serve(WORLDS.tools, played.answer, 1)
        for number in range(MAX_CALLS):
            served.call("fs.read", {"path": f"{number}.txt"})
        served.end()
        reported = tuple(ToolCall("fs.read", {"path": f"{number}.txt"}) for number in reversed(range(MAX_CALLS)))
        tools = Served(self.server, {tool.name: tool for tool in WORLDS.tools})
        steps: list[Step] = []
        judging = threading.Thread(
            target=lambda: steps.append(observed_step(Reply(tool_calls=reported), served, tools, 3, 1)), daemon=True
        )
        judging.start()
        judging.join(WAIT)  # each reported call was matched by a scan of the calls answered: 60 s, holding the run
        self.assertFalse(judging.is_alive(), "judging the trial's calls held the run")
        (step,) = steps
        self.assertEqual(len(step.results), MAX_CALLS)
        self.assertFalse(any(result.unreported for result in step.results))
        self.assertIsNone(step.reply.error_code)

    def test_clients_that_never_read_or_hold_their_connection_do_not_hold_close(self) -> None:
        big = "x" * 500_000
        served = self.server.serve(WORLDS.tools, ToolPlayer({"fs.ls": ToolScript((big,))}).answer, 1)
        where = urlsplit(served.call_url)
        address = (where.hostname, where.port)
        body = b'{"name": "fs.ls"}'
        request = f"POST {where.path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
        never_reads = socket.create_connection(address, timeout=WAIT)
        self.addCleanup(never_reads.close)
        never_reads.sendall(request * 60)  # 30 MB of answers, more than the sockets between hold
        holds = socket.create_connection(address, timeout=WAIT)
        self.addCleanup(holds.close)
        holds.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\n")  # and never the rest
        idle = socket.create_connection(address, timeout=WAIT)
        self.addCleanup(idle.close)
        deadline = time.monotonic() + WAIT
        while len(served.calls()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(json.loads(post(served.call_url, {"name": "fs.ls"})[2]), {"result": big}, "others are served")
        self.assertLess(len(served.calls()), 60, "the answers wait on a client that reads none")
        closing = threading.Thread(target=self.server.close)
        closing.start()
        closing.join(WAIT)
        self.assertFalse(closing.is_alive(), "close() waited on a client")
        deadline = time.monotonic() + WAIT
        while self.server._listener.threads and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(self.server._listener.threads, set(), "a connection's thread outlived close()")
        with self.assertRaises(OSError):
            post(served.call_url, {"name": "fs.ls"})
        self.server.close()  # again: nothing to do


class TheTransport(Serving):
    """MCP's streamable HTTP transport, as its specification says, with requests made by hand."""

    def test_a_session_is_issued_at_initialize_and_required_after_it(self) -> None:
        served, _ = self.share_turn()
        status, headers, body = post(served.url, rpc("initialize", {"protocolVersion": "2025-06-18"}))
        answer = json.loads(body)
        self.assertEqual((status, headers["content-type"]), (200, "application/json"))
        self.assertEqual(answer["result"]["protocolVersion"], "2025-06-18")
        self.assertEqual(answer["result"]["capabilities"], {"tools": {}})
        self.assertEqual(set(answer["result"]["serverInfo"]), {"name", "version"})
        session = {"Mcp-Session-Id": headers["mcp-session-id"]}
        self.assertEqual(post(served.url, rpc("tools/list"))[0], 400, "no session")
        self.assertEqual(post(served.url, rpc("tools/list"), {"Mcp-Session-Id": "guessed"})[::2], (404, b""))
        self.assertEqual(post(served.url, rpc("notifications/initialized", ident=None), session)[::2], (202, b""))
        self.assertEqual(
            json.loads(post(served.url, rpc("ping", ident=7), session)[2]), {"jsonrpc": "2.0", "id": 7, "result": {}}
        )
        self.assertEqual(post(served.url, None, session, method="DELETE")[0], 200)
        self.assertEqual(post(served.url, rpc("ping"), session)[0], 404, "a session ended is not found")
        self.assertEqual(post(served.url, None, session, method="DELETE")[0], 404)

    def test_a_batch_is_answered_whole_in_the_revision_that_has_them_and_refused_in_later_ones(self) -> None:
        served, world = self.share_turn()
        status, headers, _ = post(served.url, rpc("initialize", {"protocolVersion": "2025-03-26"}))
        session = {"Mcp-Session-Id": headers["mcp-session-id"]}  # no MCP-Protocol-Version: 2025-03-26 sends none
        batch = [
            rpc("notifications/initialized", ident=None),
            rpc("tools/call", {"name": "contacts.find", "arguments": {"name": "Ana"}}, ident="a"),
            rpc("tools/call", {"name": "fs.share", "arguments": {"path": "notes.txt", "email": "ana@example.com"}}, 2),
            {"jsonrpc": "2.0", "id": 3},
            rpc("initialize", {"protocolVersion": "2025-03-26"}, ident=4),
        ]
        status, headers, body = post(served.url, batch, session)
        answers = json.loads(body)
        self.assertEqual((status, headers["content-type"]), (200, "application/json"))
        self.assertEqual([answer["id"] for answer in answers], ["a", 2, None, 4])
        self.assertEqual(answers[0]["result"]["structuredContent"], {"name": "Ana Lima", "email": "ana@example.com"})
        self.assertFalse(answers[1]["result"]["isError"])
        self.assertEqual([answer["error"]["code"] for answer in answers[2:]], [-32600, -32600])
        self.assertEqual([call.result.call.name for call in served.calls()], ["contacts.find", "fs.share"])
        self.assertEqual(world.state()["shared"], {"notes.txt": ["ana@example.com"]})
        self.assertEqual(post(served.url, [rpc("notifications/initialized", ident=None)], session)[::2], (202, b""))
        self.assertEqual(json.loads(post(served.url, [], session)[2])["error"]["code"], -32600)
        status, headers, _ = post(served.url, rpc("initialize", {"protocolVersion": "2025-06-18"}))
        later = {"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        status, _, body = post(served.url, [rpc("ping")], later)
        self.assertEqual((status, json.loads(body)["error"]["code"]), (400, -32600))
        self.assertEqual(len(served.calls()), 2, "nothing called")

    def test_a_version_it_does_not_speak_is_answered_with_its_newest_or_refused_in_the_header(self) -> None:
        served, _ = self.share_turn()
        status, headers, body = post(served.url, rpc("initialize", {"protocolVersion": "2099-01-01"}))
        self.assertEqual(json.loads(body)["result"]["protocolVersion"], PROTOCOL_VERSIONS[0])
        session = {"Mcp-Session-Id": headers["mcp-session-id"]}
        for version in PROTOCOL_VERSIONS:
            self.assertEqual(post(served.url, rpc("ping"), {**session, "MCP-Protocol-Version": version})[0], 200)
        status, _, body = post(served.url, rpc("ping"), {**session, "MCP-Protocol-Version": "1900-01-01"})
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(body)["error"]["data"], {"supported": list(PROTOCOL_VERSIONS)})

    def test_what_is_not_one_json_rpc_request_is_an_error_never_a_crash(self) -> None:
        served, _ = self.share_turn()
        session = initialized(served.url)
        cases = [
            (b"{not json", 400, -32700),
            (b"[" * 100_000, 400, -32700),
            (json.dumps([rpc("ping")]).encode(), 400, -32600),
            (b"[]", 400, -32600),
            (b"3", 400, -32600),
            (json.dumps({"jsonrpc": "1.0", "id": 1, "method": "ping"}).encode(), 400, -32600),
            (json.dumps({"jsonrpc": "2.0", "id": None, "method": "ping"}).encode(), 400, -32600),
            (json.dumps({"jsonrpc": "2.0", "id": 1, "method": 5}).encode(), 400, -32600),
            (json.dumps(rpc("resources/list")).encode(), 200, -32601),
            (json.dumps(rpc("tools/call", {"arguments": {}})).encode(), 200, -32602),
        ]
        for body, status, code in cases:
            with self.subTest(body[:40]):
                got, _, answer = post(served.url, body, session)
                self.assertEqual((got, json.loads(answer)["error"]["code"]), (status, code))
        self.assertEqual(post(served.url, {"jsonrpc": "2.0", "id": 9, "result": {}}, session)[0], 202, "a response")
        self.assertEqual(served.calls(), ())
        self.assertEqual(post(served.url, rpc("ping"), session)[0], 200)

    def test_a_get_is_405_as_there_is_no_stream_of_the_servers_own(self) -> None:
        served, _ = self.share_turn()
        session = initialized(served.url)
        status, headers, _ = post(served.url, None, {**session, "Accept": "text/event-stream"}, method="GET")
        self.assertEqual((status, headers["allow"]), (405, "POST, DELETE"))
        self.assertEqual(post(served.call_url, None, method="GET")[0], 405)

    def test_a_client_that_accepts_only_a_stream_gets_its_answer_as_one_event(self) -> None:
        served, _ = self.share_turn()
        session = initialized(served.url)
        call = rpc("tools/call", {"name": "contacts.find", "arguments": {"name": "Ana"}}, ident=3)
        status, headers, body = post(served.url, call, {**session, "Accept": "text/event-stream"})
        self.assertEqual((status, headers["content-type"]), (200, "text/event-stream"))
        event, data, end = body.decode().split("\n", 2)
        self.assertEqual((event, end), ("event: message", "\n"))
        answer = json.loads(data.removeprefix("data: "))
        self.assertEqual((answer["id"], answer["result"]["isError"]), (3, False))


if __name__ == "__main__":
    unittest.main()
