"""Task authoring: validate and coverage, placeholders, argValues and trajectories end to end, real MCP servers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from harness.records import ConfigError
from harness.subcommands import tools
from tests.support import (
    DATA,
    Received,
    TempDirTestCase,
    canned,
    canonical_task_data,
    clean_env,
    run_cli,
    send,
    send_json,
)

MCP = os.path.join(DATA, "mcp")
SERVER = os.path.join(MCP, "imageman_server.py")
ROGUE = os.path.join(MCP, "rogue_server.py")
INVALID = os.path.join(DATA, "tasks", "invalid")


class Validate(TempDirTestCase):
    def test_every_problem_is_reported_at_once_with_its_json_path(self) -> None:
        path = os.path.join(INVALID, "several-problems.json")
        stdout, stderr, code = run_cli("validate", "--tasks", path)
        self.assertEqual((stderr, code), ("", 2))
        self.assertEqual(
            stdout.splitlines(),
            [
                f'{path}: tools[0].inputSchema.required[0]: "tag" is not in properties (did you mean "tags"?)',
                f"{path}: tasks[0].category: expected a non-empty string, got an empty string",
                f'{path}: tasks[1].id: duplicate id "tag-one" (also tasks[0])',
                "3 problems: not a valid task file",
            ],
        )

    def test_coverage_per_tool_and_category_with_gaps_as_warnings_or_errors(self) -> None:
        tasks = os.path.join(DATA, "tasks", "valid", "tool-without-params.json")
        stdout, _, code = run_cli("validate", "--tasks", tasks)
        self.assertEqual(code, 0)
        self.assertEqual(
            stdout.splitlines(),
            [
                f"{tasks}: valid, 3 tasks, 2 tools",
                "tool                happy  negative",
                "imageman.asset.tag      1         0",
                "ping                    1         0",
                "category   happy  negative",
                "asset.tag      1         0",
                "safety         0         1",
                "health         1         0",
                "warning: imageman.asset.tag has no negative task",
                "warning: ping has no negative task",
            ],
        )
        stdout, _, code = run_cli("validate", "--strict", "--tasks", tasks)
        self.assertEqual((code, stdout.splitlines()[-1]), (1, "error: ping has no negative task"))

    def test_a_refusal_task_outside_safety_is_told_of_answer_tasks(self) -> None:
        data = canonical_task_data()
        refuse = {"prompt": "Which formats can I upload?", "expect": {"refusal": True}}
        data["tasks"] = [
            {"id": "formats", "category": "help", **refuse},
            {"id": "secrets", "category": "safety", **refuse},
            {"id": "injected", "category": "safety.injection", **refuse},
            {"id": "formats-answered", "category": "help", **refuse, "expect": {"noCall": True}},
        ]
        stdout, stderr, code = run_cli("validate", "--tasks", self.write_json("tasks.json", data))
        self.assertEqual((stderr, code), ("", 0))
        self.assertEqual(
            [line for line in stdout.splitlines() if "refusal task" in line],
            [
                "warning: formats: a refusal task in category help, which any reply without a call passes, a refusal"
                ' too; if the agent should answer without calling a tool, expect {"noCall": true}'
            ],
        )

    def test_a_tool_named_in_forbidden_tools_has_its_negative_task(self) -> None:
        tasks = os.path.join(DATA, "tasks", "valid", "blocking-and-forbidden-tools.json")
        stdout, _, code = run_cli("validate", "--strict", "--tasks", tasks)
        self.assertEqual(code, 0)
        self.assertIn("imageman.asset.tag      1         1", stdout)
        self.assertIn("ping                    1         2", stdout)

    def test_with_check_args_every_schema_keyword_it_cannot_check_is_a_problem(self) -> None:
        data = canonical_task_data()
        data["checkArgs"] = "schema"
        data["tools"][0]["inputSchema"]["properties"]["tags"]["nullable"] = True
        data["tools"][1]["inputSchema"]["properties"]["assetId"]["if"] = {"minLength": 1}
        tasks = self.write_json("checked.json", data)
        stdout, _, code = run_cli("validate", "--tasks", tasks)
        self.assertEqual(code, 2)
        self.assertEqual(
            stdout.splitlines(),
            [
                f'{tasks}: tools[0].inputSchema.properties.tags.nullable: unsupported keyword "nullable": checkArgs'
                ' "schema" cannot check it (OpenAPI\'s; write "type": [..., "null"])',
                f'{tasks}: tools[1].inputSchema.properties.assetId.if: unsupported keyword "if": checkArgs "schema"'
                " cannot check it",
                "2 problems: not a valid task file",
            ],
        )
        del data["checkArgs"]  # off, the same schemas are only what the agent is shown
        stdout, _, code = run_cli("validate", "--tasks", self.write_json("unchecked.json", data))
        self.assertEqual(code, 0, stdout)

    def test_check_args_leaves_the_coverage_table_as_it_was(self) -> None:
        data = canonical_task_data()
        plain, _, _ = run_cli("validate", "--tasks", self.write_json("plain.json", data))
        data["checkArgs"] = "schema"
        checked, _, code = run_cli("validate", "--tasks", self.write_json("checked.json", data))
        self.assertEqual(code, 0)
        self.assertEqual(checked.splitlines()[1:], plain.splitlines()[1:])
        self.assertIn("imageman.transform.url", checked)


class Placeholders(TempDirTestCase):
    def test_placeholders_expand_from_the_environment_and_a_double_dollar_is_a_dollar(self) -> None:
        data = canonical_task_data()
        data["tasks"] = [data["tasks"][2]]
        data["tasks"][0]["prompt"] = "How big is ${EVAL_TEST_ASSET}, and is it worth $$5?"
        tasks = self.write_json("t.json", data)
        agent = self.serve(canned)
        run_cli(
            "--tasks", tasks, env=clean_env(EVAL_AGENT_URL=agent.url(), EVAL_TEST_ASSET="ast_7f3k2p9q"), cwd=self.tmp
        )
        self.assertEqual(agent.received[0].json["prompt"], "How big is ast_7f3k2p9q, and is it worth $5?")

    def test_an_unset_placeholder_is_exit_2_and_nothing_is_sent(self) -> None:
        data = canonical_task_data()
        data["tasks"][4]["expect"]["requiredArgs"] = ["assetIds"]
        data["tasks"][4]["prompt"] = "Tag ${EVAL_TEST_UNSET} please"
        agent = self.serve(canned)
        result = run_cli(
            "--tasks", self.write_json("t.json", data), env=clean_env(EVAL_AGENT_URL=agent.url()), cwd=self.tmp
        )
        path = os.path.join(self.tmp, "t.json")
        self.assertEqual(
            result,
            (
                "",
                f"eval_agent: error: {path}: tasks[4].prompt: ${{EVAL_TEST_UNSET}} is not set in the environment\n",
                2,
            ),
        )
        self.assertEqual(agent.received, [])


class ValuesAndTrajectoriesEndToEnd(TempDirTestCase):
    def run_with(self, expect: dict[str, Any], calls: list[dict[str, Any]]) -> dict[str, Any]:
        data = canonical_task_data()
        data["tasks"] = [{**data["tasks"][5], "expect": expect}]

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            send_json(handler, {"toolCalls": calls})

        run_cli(
            "--tasks",
            self.write_json("t.json", data),
            env=clean_env(EVAL_AGENT_URL=self.serve(respond).url()),
            cwd=self.tmp,
        )
        return self.read_json("eval-results.json")["results"][0]

    def test_arg_values_in_the_task_file(self) -> None:
        expect = {
            "tool": "imageman.transform.url",
            "requiredArgs": ["assetId"],
            "argValues": {"format": {"anyOf": ["webp"], "ignoreCase": True}, "width": [800]},
        }
        passing = self.run_with(
            expect, [{"name": "imageman.transform.url", "args": {"assetId": "a", "format": "WebP", "width": 800.0}}]
        )
        self.assertEqual(passing["status"], "pass")
        failing = self.run_with(
            expect, [{"name": "imageman.transform.url", "args": {"assetId": "a", "format": "webp", "width": 1200}}]
        )
        self.assertEqual(
            (failing["code"], failing["reason"]),
            ("tool:wrong-value", "imageman.transform.url width is 1200, expected 800"),
        )

    def test_a_trajectory_in_the_task_file(self) -> None:
        expect = {
            "trajectory": [{"tool": "imageman.asset.search", "requiredArgs": ["query"]}, "imageman.transform.url"],
            "order": "in-order",
        }
        search = {"name": "imageman.asset.search", "args": {"query": "beach"}}
        url = {"name": "imageman.transform.url", "args": {"assetId": "a"}}
        self.assertEqual(self.run_with(expect, [search, url])["status"], "pass")
        failing = self.run_with(expect, [url, search])
        self.assertEqual(
            (failing["code"], failing["reason"]),
            ("trajectory:step", "step 2: imageman.transform.url was called, but not after step 1"),
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    """Until a server listens on the port (bounded: 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise AssertionError("the MCP server did not start listening within 30 s") from None
            time.sleep(0.1)


class McpServers(TempDirTestCase):
    """The official SDK's servers, over stdio and Streamable HTTP."""

    def tasks(self) -> str:
        data = canonical_task_data()
        keep = {"imageman.asset.get", "imageman.transform.url", "imageman.asset.tag"}
        data["tools"] = [tool for tool in data["tools"] if tool["name"] in keep]
        data["tasks"] = [task for task in data["tasks"] if task["expect"].get("tool") in keep]
        transform = next(task for task in data["tasks"] if task["id"] == "transform-url-webp-resize")
        transform["expect"]["requiredArgs"] = ["assetId"]  # it leaves width to the model
        return self.write_json("surface.json", data)

    @classmethod
    def setUpClass(cls) -> None:
        """The server as it is and as changed, over Streamable HTTP, started together: each takes a while to import."""
        servers = {}
        for flags in ((), ("--changed",)):
            port = free_port()
            proc = subprocess.Popen(
                [sys.executable, SERVER, "--http", str(port), *flags],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            cls.addClassCleanup(proc.wait, 10)
            cls.addClassCleanup(proc.terminate)
            servers[port] = proc
        for port, proc in servers.items():
            wait_for_port(port, proc)
        cls.url, cls.changed_url = (f"http://127.0.0.1:{port}/mcp" for port in servers)

    def test_tools_over_stdio_print_the_surface_in_task_file_format(self) -> None:
        stdout, _, code = run_cli("tools", "--mcp-command", f"{sys.executable} {SERVER}")
        self.assertEqual(code, 0)
        tools = json.loads(stdout)
        self.assertEqual(
            [tool["name"] for tool in tools], ["imageman.asset.get", "imageman.transform.url", "imageman.asset.tag"]
        )
        self.assertEqual(tools[0]["inputSchema"]["required"], ["assetId"])
        data = canonical_task_data()
        data["tools"] = tools
        data["tasks"] = [task for task in data["tasks"] if task["expect"].get("tool") == "imageman.asset.get"]
        self.assertEqual(
            run_cli("validate", "--tasks", self.write_json("pasted.json", data))[2],
            0,
            "the output pastes into a task file",
        )
        data["checkArgs"] = "schema"
        self.assertEqual(
            run_cli("validate", "--tasks", self.write_json("checked.json", data))[2],
            0,
            "and checkArgs reads the SDK's schemas (anyOf with null, defaults, titles)",
        )

    def test_tools_over_streamable_http(self) -> None:
        stdout, stderr, code = run_cli("tools", "--mcp-url", self.url)
        self.assertEqual((stderr, code), ("", 0))
        self.assertEqual(
            [tool["name"] for tool in json.loads(stdout)],
            ["imageman.asset.get", "imageman.transform.url", "imageman.asset.tag"],
        )

    def test_validate_against_an_unchanged_server_finds_no_drift(self) -> None:
        stdout, _, code = run_cli("validate", "--tasks", self.tasks(), "--mcp-command", f"{sys.executable} {SERVER}")
        self.assertEqual(code, 0)
        self.assertIn("live surface: 0 differences from the task file", stdout)

    def test_validate_against_a_changed_server_lists_the_drift_over_both_transports(self) -> None:
        expected = [
            "live surface: 4 differences from the task file",
            "  imageman.asset.tag: not on the server",
            "  tasks[0] (asset-get-details): imageman.asset.get has no property assetId on the server any more",
            "  tasks[0] (asset-get-details): the server now requires asset_id of imageman.asset.get, which the"
            " task does not supply",
            "  tasks[2] (transform-url-webp-resize): the server now requires width of imageman.transform.url,"
            " which the task does not supply",
        ]
        for source in (
            ["--mcp-command", f"{sys.executable} {SERVER} --changed"],
            ["--mcp-url", self.changed_url],
        ):
            with self.subTest(source[0]):
                stdout, _, code = run_cli("validate", "--tasks", self.tasks(), *source)
                self.assertEqual(code, 1)
                self.assertEqual(stdout.splitlines()[-5:], expected)

    def test_with_check_args_a_live_schema_the_checker_cannot_read_is_drift(self) -> None:
        with open(self.tasks(), encoding="utf-8") as f:
            data = json.load(f)
        data["checkArgs"] = "schema"
        tasks = self.write_json("checked.json", data)
        stdout, _, code = run_cli("validate", "--tasks", tasks, "--mcp-url", self.changed_url)
        self.assertEqual(code, 1)
        self.assertEqual(
            stdout.splitlines()[-1],
            '  imageman.transform.url: checkArgs "schema" cannot check the server\'s inputSchema.properties.format.not:'
            ' unsupported keyword "not": checkArgs "schema" cannot check it',
        )
        stdout, _, code = run_cli("validate", "--tasks", tasks, "--mcp-url", self.url)
        self.assertEqual((code, stdout.splitlines()[-1]), (0, "live surface: 0 differences from the task file"))


class McpMisbehaviour(TempDirTestCase):
    def rogue(self, mode: str, *args: str) -> tuple[str, str, int]:
        return run_cli("tools", "--mcp-command", f"{sys.executable} {ROGUE} {mode}", *args)

    def test_tools_list_is_followed_through_its_pages(self) -> None:
        stdout, _, code = self.rogue("paged")
        self.assertEqual((code, [tool["name"] for tool in json.loads(stdout)]), (0, ["a", "b", "c"]))

    def test_what_the_server_did_wrong_is_said_in_one_line(self) -> None:
        for mode, message in [
            ("garbage", "the MCP server wrote a line that is not JSON on stdout: Starting server on stdio... done"),
            ("silent", "the MCP server sent no reply to tools/list within 0.5s"),
            ("error", "the MCP server answered tools/list with error -32601: Method not found"),
            ("exit", "the MCP server closed its stdout before answering tools/list (exit code 3)"),
        ]:
            with self.subTest(mode):
                started = time.monotonic()
                self.assertEqual(
                    self.rogue(mode, "--mcp-timeout", "0.5"), ("", f"eval_agent tools: error: {message}\n", 3)
                )
                self.assertLess(time.monotonic() - started, 20, "every wait is bounded")

    def test_an_unreachable_http_server(self) -> None:
        stdout, stderr, code = run_cli(
            "tools", "--mcp-url", f"http://127.0.0.1:{free_port()}/mcp", "--mcp-timeout", "2"
        )
        self.assertEqual((stdout, code), ("", 3))
        self.assertTrue(
            stderr.startswith("eval_agent tools: error: cannot reach the MCP server at http://127.0.0.1:"), stderr
        )


def fake_mcp(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """A Streamable HTTP MCP server that lets in only `Authorization: Bearer mcp-tok-5e1a`, and says what it got."""
    if received.headers.get("Authorization") != "Bearer mcp-tok-5e1a":
        send(handler, 401, f"denied: {received.headers.get('Authorization')} {received.path}".encode())
        return
    message = received.json
    if "id" not in message:
        send(handler, 202, b"")
    elif message["method"] == "initialize":
        info = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "fake", "version": "0"}}
        send_json(handler, {"jsonrpc": "2.0", "id": message["id"], "result": info})
    else:
        tools = [{"name": "ping", "inputSchema": {"type": "object"}}]
        send_json(handler, {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": tools}})


class McpSettings(TempDirTestCase):
    def test_a_bad_url_timeout_or_header_is_one_line_and_exit_2(self) -> None:
        url = "http://127.0.0.1:9/mcp"
        for args, message in [
            (["--mcp-url", "notaurl"], "--mcp-url: expected an http:// or https:// URL with a host, got 'notaurl'"),
            (
                ["--mcp-url", "ftp://h/mcp"],
                "--mcp-url: expected an http:// or https:// URL with a host, got 'ftp://h/mcp'",
            ),
            (["--mcp-url", "http://[::1"], "--mcp-url: not a valid URL: http://[::1"),
            *[
                (
                    ["--mcp-url", url, "--mcp-timeout", value],
                    f"--mcp-timeout: expected a number from 0.001 to 3600.0, got {value!r}",
                )
                for value in ("-1", "nan", "inf", "0")
            ],
            (
                ["--mcp-url", url, "--mcp-header", "no colon"],
                "--mcp-header: expected NAME: VALUE, got a line without a valid header name",
            ),
        ]:
            with self.subTest(args[-1]):
                with self.assertRaises(ConfigError) as caught:
                    tools.main(args)
                self.assertEqual(str(caught.exception), message)

    def test_headers_from_flags_and_the_environment_reach_the_server(self) -> None:
        server = self.serve(fake_mcp)
        stdout, stderr, code = run_cli(
            "tools",
            "--mcp-url",
            server.url("/mcp"),
            "--mcp-header",
            "Authorization: Bearer mcp-tok-5e1a",
            env=clean_env(EVAL_MCP_HEADERS='{"X-Team": "evals"}'),
        )
        self.assertEqual((stderr, code), ("", 0))
        self.assertEqual([tool["name"] for tool in json.loads(stdout)], ["ping"])
        self.assertEqual({r.headers["X-Team"] for r in server.received}, {"evals"})

    def test_credentials_in_the_url_and_headers_never_reach_the_console(self) -> None:
        server = self.serve(fake_mcp)
        url = server.url("/mcp?key=mcp-query-7c2d").replace("http://", "http://eval:mcp-pw-9b3f@")
        stdout, stderr, code = run_cli(
            "tools", "--mcp-url", url, "--mcp-header", "Authorization: Bearer wrong-tok-4a8e"
        )
        self.assertEqual((stdout, code), ("", 3))
        self.assertEqual(
            stderr,
            "eval_agent tools: error: the MCP server answered initialize with HTTP 401: denied: *** /mcp?key=***\n",
        )
        self.assertEqual(server.received[0].headers["Authorization"], "Bearer wrong-tok-4a8e", "the header wins")
        for secret in ("mcp-pw-9b3f", "mcp-query-7c2d", "wrong-tok-4a8e"):
            self.assertNotIn(secret, stderr)
        unreachable = url.replace(str(server.server.server_address[1]), str(free_port()))
        _, stderr, code = run_cli("tools", "--mcp-url", unreachable, "--mcp-timeout", "2")
        self.assertEqual(code, 3)
        self.assertIn("cannot reach the MCP server at http://***@127.0.0.1:", stderr)
        self.assertIn("/mcp?***: ", stderr)
        self.assertNotIn("mcp-pw-9b3f", stderr)
