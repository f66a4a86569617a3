"""Agents that run their own tools (http, command), served the task's tools by the harness: the official MCP SDK's
client on `toolServer.url`, or the plain `callUrl`. What the server answered is the truth the harness judges."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from harness.conversation import ToolPlayer
from harness.records import ToolCall, ToolScript
from tests.providers import conversation_fake
from tests.support import (
    CANNED,
    CLI_TIMEOUT,
    DATA,
    ROOT,
    SCRIPT,
    SHIPPED_TASKS,
    Received,
    Respond,
    TempDirTestCase,
    call_served,
    clean_env,
    run_cli,
    send,
    send_json,
    stop_signals_as_from_a_terminal,
)
from tests.test_docs import CAREFUL, CARELESS, WORLDS, Turns, playing

WORLD_TASKS = os.path.join(ROOT, WORLDS, "eval-tasks.json")
INJECTED_ERROR = {"error": "503 Service Unavailable (injected)"}
MCP_TIMEOUT = 30.0  # seconds an agent's whole use of the MCP client may take


def mcp_calls(url: str, calls: Sequence[tuple[str, Mapping[str, Any]]], tries: int = 1) -> list[tuple[bool, str]]:
    """Each call made through the MCP SDK's streamable HTTP client, tried up to `tries` times while it is an error;
    (isError, its text) of each."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def session() -> list[tuple[bool, str]]:
        made = []
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            offered = {tool.name for tool in (await client.list_tools()).tools}
            for name, args in calls:
                assert name in offered, f"{name} is not offered: {sorted(offered)}"
                for _ in range(tries):
                    result = await client.call_tool(name, dict(args))
                    if not result.is_error:
                        break
                text = "".join(getattr(block, "text", "") for block in result.content)
                made.append((bool(result.is_error), text))
        return made

    async def bounded() -> list[tuple[bool, str]]:
        return await asyncio.wait_for(session(), MCP_TIMEOUT)

    return asyncio.run(bounded())


def first_user_message(body: Mapping[str, Any]) -> str:
    """The conversation's first message: the prompt of a single request."""
    messages = body.get("messages")
    return messages[0]["content"] if messages else body["prompt"]


class McpAgent:
    """An in-app agent behind POST /run that plays a model's decisions (tests/test_docs.py's, by the conversation's
    first message and the turn) on the tools it is served, through the MCP SDK's client, and reports what it did."""

    def __init__(self, model: dict[str, Turns], tries: int = 1, report: bool = True, make: bool = True) -> None:
        self.model = model
        self.tries = tries
        self.report = report  # whether it reports the calls it made
        self.make = make  # whether it makes them (an agent that says it did without doing)
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.bodies.append(body)
        calls, text = self.model[first_user_message(body)][body.get("turn", 1) - 1]
        if calls and self.make:
            mcp_calls(body["toolServer"]["url"], calls, self.tries)
        reported = [{"name": name, "args": args} for name, args in calls] if self.report else []
        return {"toolCalls": reported, "text": text}

    def __call__(self, received: Received, handler: BaseHTTPRequestHandler) -> None:
        send_json(handler, self.reply(received.json))


def verdicts(results: Mapping[str, Any]) -> dict[str, tuple[str, str | None, str | None]]:
    """Each task's first trial: its status, code and reason."""
    return {
        entry["id"]: (
            entry["trialResults"][0]["status"],
            entry["trialResults"][0]["code"],
            entry["trialResults"][0]["reason"],
        )
        for entry in results["results"]
    }


class ServedWorlds(TempDirTestCase):
    """examples/worlds on an in-app agent using the MCP SDK's client: the verdicts a model gets on a provider backend
    for the same decisions, as the harness saw the calls itself."""

    def run_http(self, respond: Respond, *args: str, **environ: str) -> tuple[str, str, int]:
        agent = self.serve(respond)
        env = clean_env(
            EVAL_AGENT_URL=agent.url(),
            EVAL_TOOL_NAMES="safe",  # the model's decisions name the tools as a provider takes them
            EVAL_RESULTS=os.path.join(self.tmp, "eval-results.json"),
            EVAL_TASKS=WORLD_TASKS,
        )
        env.update(environ)
        return run_cli(*args, env=env, cwd=self.tmp)

    def run_model(self, model: dict[str, Turns]) -> tuple[dict[str, Any], int]:
        invalid: list[str] = []
        fake = self.serve(conversation_fake("openai", playing(model), invalid))
        env = clean_env(
            EVAL_BACKEND="openai",
            EVAL_MODEL="m",
            OPENAI_API_KEY="sk-test",
            OPENAI_BASE_URL=fake.url("/v1"),
            EVAL_TASKS=WORLD_TASKS,
            EVAL_RESULTS=os.path.join(self.tmp, "model.json"),
        )
        stdout, stderr, code = run_cli(env=env, cwd=self.tmp)
        self.assertEqual((stderr, invalid), ("", []), stdout)
        return self.read_json("model.json"), code

    def test_an_agent_doing_what_each_task_asks_passes_every_task_as_the_model_does(self) -> None:
        stdout, stderr, code = self.run_http(McpAgent(CAREFUL))
        self.assertEqual((stderr, code), ("", 0), stdout)
        model, model_code = self.run_model(CAREFUL)
        self.assertEqual((verdicts(self.read_json("eval-results.json")), code), (verdicts(model), model_code))
        self.assertIn("3/3 PASS", stdout)

    def test_a_careless_agent_fails_each_task_as_the_model_does_and_a_wrong_address_fails_on_the_state(self) -> None:
        stdout, stderr, code = self.run_http(McpAgent(CARELESS))
        self.assertEqual((stderr, code), ("", 1), stdout)
        results = self.read_json("eval-results.json")
        model, model_code = self.run_model(CARELESS)
        self.assertEqual((verdicts(results), code), (verdicts(model), model_code))
        share = verdicts(results)["share-with-ana"]
        self.assertEqual(share[:2], ("fail", "state:mismatch"), "the calls are the expected ones; the world says not")
        trial = results["results"][1]["trialResults"][0]
        self.assertEqual(trial["finalState"]["shared"], {"notes.txt": ["anna@example.com"]})
        (step,) = trial["conversation"][0]["steps"]
        self.assertEqual([result["source"] for result in step["results"]], ["default", "environment"])

    def test_each_turn_gets_an_endpoint_of_its_own_offering_that_turns_tools(self) -> None:
        agent = McpAgent(CAREFUL)
        stdout, stderr, code = self.run_http(agent, "--task", "archive-after-a-look")
        self.assertEqual((stderr, code), ("", 0), stdout)
        servers = [body["toolServer"] for body in agent.bodies]
        self.assertEqual(len({server["url"] for server in servers}), 3, "a new endpoint each turn")
        self.assertTrue(all(server["callUrl"] != server["url"] for server in servers))
        with self.assertRaises(OSError):  # an ended turn's endpoint serves nothing (an HTTPError is one)
            call_served(servers[0]["callUrl"], "fs_ls", {})

    def test_a_call_the_agent_reports_but_never_made_is_tool_unobserved(self) -> None:
        stdout, stderr, code = self.run_http(McpAgent(CAREFUL, make=False), "--task", "share-with-ana")
        self.assertEqual((stderr, code), ("", 1), stdout)
        status, code_, reason = verdicts(self.read_json("eval-results.json"))["share-with-ana"]
        self.assertEqual((status, code_), ("error", "tool:unobserved"))
        self.assertIn('contacts.find({"name": "ana"})', reason or "")

    def test_a_served_call_the_reply_leaves_out_is_recorded_unreported_and_judged(self) -> None:
        stdout, stderr, code = self.run_http(McpAgent(CAREFUL, report=False), "--task", "share-with-ana")
        self.assertEqual((stderr, code), ("", 0), stdout)
        trial = self.read_json("eval-results.json")["results"][0]["trialResults"][0]
        (step,) = trial["conversation"][0]["steps"]
        self.assertEqual([call["name"] for call in step["toolCalls"]], ["contacts.find", "fs.share"])
        self.assertEqual([result.get("unreported") for result in step["results"]], [True, True])

    def test_three_runs_at_concurrency_8_each_trial_in_a_world_of_its_own(self) -> None:
        agent = McpAgent(CAREFUL)
        stdout, stderr, code = self.run_http(agent, "--runs", "3", "--concurrency", "8")
        self.assertEqual((stderr, code), ("", 0), stdout)
        for entry in self.read_json("eval-results.json")["results"]:
            self.assertEqual([trial["status"] for trial in entry["trialResults"]], ["pass"] * 3, entry["id"])
        shared = [
            trial["finalState"]["shared"]
            for entry in self.read_json("eval-results.json")["results"]
            if entry["id"] == "share-with-ana"
            for trial in entry["trialResults"]
        ]
        self.assertEqual(shared, [{"notes.txt": ["ana@example.com"]}] * 3, "each shared once, in its own world")
        self.assertEqual(len({body["toolServer"]["url"] for body in agent.bodies}), len(agent.bodies))

    def test_the_trial_s_tool_server_path_is_never_written(self) -> None:
        def echoes(received: Received, handler: BaseHTTPRequestHandler) -> None:
            server = received.json["toolServer"]
            call_served(server["callUrl"], "fs_ls", {})
            send_json(handler, {"toolCall": {"name": "fs_ls", "args": {}}, "text": f"I used {server['url']}"})

        agent = self.serve(echoes)
        env = clean_env(EVAL_AGENT_URL=agent.url(), EVAL_TASKS=WORLD_TASKS, EVAL_TOOL_NAMES="safe")
        stdout, stderr, _ = run_cli("--task", "tidy-up", env=env, cwd=self.tmp)
        path = agent.received[0].json["toolServer"]["url"].split("/", 3)[3]
        with open(os.path.join(self.tmp, "eval-results.json"), encoding="utf-8") as f:
            written = f.read()
        self.assertIn("I used http://", written)
        for text in (written, stdout, stderr):
            self.assertNotIn(path, text)

    def test_an_agent_that_makes_no_call_fails_a_state_task_as_a_model_does(self) -> None:
        idle: dict[str, Turns] = {prompt: [([], "Done.")] * len(turns) for prompt, turns in CAREFUL.items()}
        stdout, stderr, code = self.run_http(McpAgent(idle))
        self.assertEqual(stderr, "", stdout)
        model, model_code = self.run_model(idle)
        self.assertEqual((verdicts(self.read_json("eval-results.json")), code), (verdicts(model), model_code))
        self.assertEqual({status for status, _, _ in verdicts(model).values()}, {"fail"})

    def test_the_same_served_call_with_the_same_result_three_times_is_a_loop(self) -> None:
        def loops(received: Received, handler: BaseHTTPRequestHandler) -> None:
            for _ in range(3):
                call_served(received.json["toolServer"]["callUrl"], "fs_read", {"path": "notes.txt"})
            send_json(handler, {"toolCalls": [{"name": "fs_read", "args": {"path": "notes.txt"}}] * 3})

        stdout, stderr, code = self.run_http(loops, "--task", "tidy-up")
        self.assertEqual((stderr, code), ("", 1), stdout)
        status, loop, reason = verdicts(self.read_json("eval-results.json"))["tidy-up"]
        self.assertEqual((status, loop), ("fail", "conversation:loop"))
        self.assertIn('fs.read({"path": "notes.txt"})', reason or "")

    def test_a_recording_keeps_no_tool_server_path_and_replays_without_a_miss(self) -> None:
        cassette = os.path.join(self.tmp, "c.jsonl")
        with open(WORLD_TASKS, encoding="utf-8") as f:
            data = json.load(f)
        shutil.copy(os.path.join(ROOT, WORLDS, "files.py"), self.tmp)
        data["tasks"] = [task for task in data["tasks"] if task["id"] == "archive-after-a-look"]
        del data["tasks"][0]["expect"]["state"]  # a replay judges the calls reported, and no state
        tasks = self.write_json("tasks.json", data)
        agent = McpAgent(CAREFUL)
        self.run_http(agent, "--record", cassette, EVAL_TASKS=tasks)
        with open(cassette, encoding="utf-8") as f:
            recorded = f.read()
        for body in agent.bodies:
            self.assertNotIn(body["toolServer"]["url"].split("/")[-2], recorded)
        stdout, stderr, code = self.run_http(McpAgent(CAREFUL), "--replay", cassette, EVAL_TASKS=tasks)
        self.assertEqual((stderr, code), ("", 0), stdout)

    def test_a_remote_agent_is_told_the_advertised_address_and_its_path_is_never_written(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        advertised = f"http://localhost:{port}/tools"  # as a tunnel or a proxy in front of the bound port would be

        def echoes(received: Received, handler: BaseHTTPRequestHandler) -> None:
            server = received.json["toolServer"]
            answer = call_served(server["callUrl"], "fs_ls", {})
            send_json(handler, {"toolCall": {"name": "fs_ls", "args": {}}, "text": f"{answer} from {server['url']}"})

        stdout, stderr, _ = self.run_http(
            echoes, "--task", "tidy-up", EVAL_TOOL_SERVER_HOST=f"127.0.0.1:{port}", EVAL_TOOL_SERVER_URL=advertised
        )
        with open(os.path.join(self.tmp, "eval-results.json"), encoding="utf-8") as f:
            written = f.read()
        self.assertIn(f"from http://localhost:{port}***", written, "the path masked as a secret is")
        self.assertIn("old-notes.txt']} from", written, "the served tools answered at the advertised address")
        self.assertNotIn("/tools/", written + stdout + stderr)

    def test_an_advertised_url_with_a_query_or_a_fragment_is_exit_2_as_the_paths_would_land_in_it(self) -> None:
        for advertised in ("https://tools.example/tools?team=a", "https://tools.example/#tools"):
            with self.subTest(advertised):
                stdout, stderr, code = self.run_http(McpAgent(CAREFUL), EVAL_TOOL_SERVER_URL=advertised)
                self.assertEqual(
                    (stdout, stderr, code),
                    (
                        "",
                        "eval_agent: error: EVAL_TOOL_SERVER_URL: a base URL the trials' paths are added to has no "
                        "query or fragment\n",
                        2,
                    ),
                )

    def test_an_advertised_url_with_no_port_bound_to_point_at_is_exit_2(self) -> None:
        stdout, stderr, code = self.run_http(McpAgent(CAREFUL), EVAL_TOOL_SERVER_URL="https://tools.example.ngrok.app")
        self.assertEqual(
            (stdout, stderr, code),
            (
                "",
                "eval_agent: error: EVAL_TOOL_SERVER_URL: the server it leads to binds a free port, which nothing can "
                "point at; set EVAL_TOOL_SERVER_HOST=HOST:PORT too\n",
                2,
            ),
        )

    def test_an_address_the_server_cannot_bind_is_exit_2_naming_the_setting(self) -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            address = f"127.0.0.1:{taken.getsockname()[1]}"
            stdout, stderr, code = self.run_http(McpAgent(CAREFUL), EVAL_TOOL_SERVER_HOST=address)
        self.assertEqual((stdout, code), ("", 2))
        self.assertRegex(stderr, rf"^eval_agent: error: EVAL_TOOL_SERVER_HOST: cannot serve tools on {address}: .+\n$")
        stdout, stderr, code = self.run_http(McpAgent(CAREFUL), EVAL_TOOL_SERVER_HOST="127.0.0.1:http")
        self.assertEqual(
            (stderr, code),
            (
                "eval_agent: error: EVAL_TOOL_SERVER_HOST: expected HOST or HOST:PORT (a port from 0 to 65535), got "
                "'127.0.0.1:http'\n",
                2,
            ),
        )


class FlakyTools(TempDirTestCase):
    """A tool whose script says failFirst: N fails its first N calls in a trial (a 503, an MCP error) before the
    script or the environment answers: an agent that retries recovers, one that does not leaves the world unchanged."""

    def flaky_share(self, fails: int = 1) -> str:
        """examples/worlds with share-with-ana's fs.share failing its first `fails` calls."""
        with open(WORLD_TASKS, encoding="utf-8") as f:
            data = json.load(f)
        shutil.copy(os.path.join(ROOT, WORLDS, "files.py"), self.tmp)
        (task,) = [task for task in data["tasks"] if task["id"] == "share-with-ana"]
        task["toolResults"] = {"fs.share": {"failFirst": fails}}
        data["tasks"] = [task]
        return self.write_json("tasks.json", data)

    def run_with(self, agent: McpAgent, fails: int = 1) -> tuple[str, str, int]:
        served = self.serve(agent)
        env = clean_env(EVAL_AGENT_URL=served.url(), EVAL_TASKS=self.flaky_share(fails), EVAL_TOOL_NAMES="safe")
        return run_cli(env=env, cwd=self.tmp)

    def test_an_agent_that_retries_a_failed_call_passes(self) -> None:
        stdout, stderr, code = self.run_with(McpAgent(CAREFUL, tries=2))
        self.assertEqual((stderr, code), ("", 0), stdout)
        (step,) = self.read_json("eval-results.json")["results"][0]["trialResults"][0]["conversation"][0]["steps"]
        self.assertEqual(
            [(result["name"], result["source"]) for result in step["results"]],
            [("contacts.find", "case"), ("fs.share", "injected"), ("fs.share", "environment")],
        )
        self.assertEqual(step["results"][1]["result"], {"error": "503 Service Unavailable (injected)"})

    def test_an_agent_that_retries_through_as_many_failures_as_the_loop_rule_counts_is_not_a_loop(self) -> None:
        stdout, stderr, code = self.run_with(McpAgent(CAREFUL, tries=4), fails=3)  # maxRepeats is 3
        self.assertEqual((stderr, code), ("", 0), stdout)
        (step,) = self.read_json("eval-results.json")["results"][0]["trialResults"][0]["conversation"][0]["steps"]
        self.assertEqual([result["source"] for result in step["results"]], ["case", *["injected"] * 3, "environment"])

    def test_an_agent_that_does_not_retry_fails_on_the_state(self) -> None:
        stdout, stderr, code = self.run_with(McpAgent(CAREFUL))
        self.assertEqual((stderr, code), ("", 1), stdout)
        self.assertIn("state:mismatch", stdout)

    def test_fail_first_alone_on_a_tool_the_environment_does_not_answer_is_refused_before_anything_is_sent(
        self,
    ) -> None:
        with open(WORLD_TASKS, encoding="utf-8") as f:
            data = json.load(f)
        shutil.copy(os.path.join(ROOT, WORLDS, "files.py"), self.tmp)
        data["tasks"][1]["toolResults"] = {"contacts.find": {"failFirst": 1}}  # FileSystem has no find
        tasks = self.write_json("tasks.json", data)
        self.assertEqual(
            run_cli("validate", "--tasks", tasks, env=clean_env(), cwd=self.tmp),
            (
                "",
                f"eval_agent validate: error: {tasks}: task share-with-ana: toolResults.contacts.find.failFirst: "
                "contacts.find has nothing to answer after its failures: FileSystem has no method find, and no "
                "sequence, cases or default is given\n",
                2,
            ),
        )

    def test_a_model_on_a_provider_backend_gets_the_same_failures(self) -> None:
        scripts = {"t": ToolScript(("ok",), fail_first=2)}
        player = ToolPlayer(scripts)
        answers = [player.answer(ToolCall("t")) for _ in range(3)]
        self.assertEqual(
            [(a.content, a.source) for a in answers], [(INJECTED_ERROR, "injected")] * 2 + [("ok", "script")]
        )
        self.assertEqual(ToolPlayer(scripts).answer(ToolCall("t")).source, "injected", "counted in each trial anew")


class WhatTheServerSaw(TempDirTestCase):
    """The calls the server answered are judged whatever the reply says of them: a forbidden call and a budget."""

    def run_with(self, expect: dict[str, Any], made: list[str], reported: list[str]) -> dict[str, Any]:
        with open(WORLD_TASKS, encoding="utf-8") as f:
            data = json.load(f)
        shutil.copy(os.path.join(ROOT, WORLDS, "files.py"), self.tmp)
        data["tasks"] = [{"id": "look", "category": "fs", "prompt": "What's in my folder?", "expect": expect}]
        tasks = self.write_json("tasks.json", data)

        def agent(received: Received, handler: BaseHTTPRequestHandler) -> None:
            for name in made:
                call_served(
                    received.json["toolServer"]["callUrl"], name, {"path": "notes.txt"} if name != "fs.ls" else {}
                )
            send_json(handler, {"toolCalls": [{"name": name, "args": {}} for name in reported]})

        served = self.serve(agent)
        env = clean_env(EVAL_AGENT_URL=served.url(), EVAL_TASKS=tasks)
        stdout, stderr, _ = run_cli("--junit", "junit.xml", env=env, cwd=self.tmp)
        self.assertEqual(stderr, "", stdout)
        return self.read_json("eval-results.json")["results"][0]["trialResults"][0]

    def test_a_forbidden_call_the_reply_leaves_out_is_a_violation(self) -> None:
        trial = self.run_with({"tool": "fs.ls", "forbiddenTools": ["fs.rm"]}, ["fs.ls", "fs.rm"], ["fs.ls"])
        self.assertEqual(
            (trial["status"], trial["code"], trial["violation"]), ("fail", "tool:forbidden", "forbidden-tool")
        )
        self.assertEqual(trial["finalState"]["files"], ["draft.txt", "old-notes.txt"], "the call was made")
        with open(os.path.join(self.tmp, "junit.xml"), encoding="utf-8") as f:
            self.assertIn('fs.rm returned "deleted notes.txt" (called on the tool server, unreported)', f.read())

    def test_a_refusal_that_reports_a_call_of_the_agent_s_own_tool_fails_as_without_a_tool_server(self) -> None:
        trial = self.run_with({"refusal": True}, [], ["shell.exec"])  # a tool of its own: not served
        self.assertEqual((trial["status"], trial["code"]), ("fail", "refusal:called-tool"))
        self.assertEqual(trial["toolCalls"], [{"name": "shell.exec", "args": {}}])

    def test_a_budget_counts_the_calls_the_server_answered(self) -> None:
        trial = self.run_with({"tool": "fs.ls", "budget": {"maxToolCalls": 1}}, ["fs.ls", "fs.ls"], ["fs.ls"])
        self.assertEqual((trial["status"], trial["code"]), ("fail", "budget:tool-calls"))


class SafeRetries(TempDirTestCase):
    """A request whose served tools were called is never sent again, whatever EVAL_RETRY_AFTER_SEND says: its world
    has changed, and the agent would run its tools twice. One that failed before any call is retried as ever."""

    def run_with(self, respond: Respond) -> tuple[list[Received], dict[str, Any]]:
        agent = self.serve(respond)
        env = clean_env(
            EVAL_AGENT_URL=agent.url(), EVAL_TASKS=WORLD_TASKS, EVAL_TOOL_NAMES="safe", EVAL_RETRY_AFTER_SEND="1"
        )
        stdout, stderr, _ = run_cli("--task", "tidy-up", env=env, cwd=self.tmp)
        self.assertEqual(stderr, "", stdout)
        return agent.received, self.read_json("eval-results.json")["results"][0]["trialResults"][0]

    def test_a_request_whose_served_tools_were_called_is_not_retried(self) -> None:
        def calls_then_fails(received: Received, handler: BaseHTTPRequestHandler) -> None:
            call_served(received.json["toolServer"]["callUrl"], "fs_rm", {"path": "old-notes.txt"})
            send(handler, 502, b"Bad Gateway")

        received, trial = self.run_with(calls_then_fails)
        self.assertEqual((len(received), trial["attempts"]), (1, 1))
        self.assertEqual((trial["status"], trial["code"]), ("error", "reply:http-status"))

    def test_an_attempt_that_failed_before_any_call_is_retried(self) -> None:
        def fails_first(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.json["attempt"] == 1:
                send(handler, 502, b"Bad Gateway")
                return
            calls = [("fs_mv", {"source": "draft.txt", "target": "final.txt"}), ("fs_rm", {"path": "old-notes.txt"})]
            for name, args in calls:
                call_served(received.json["toolServer"]["callUrl"], name, args)
            send_json(handler, {"toolCalls": [{"name": name, "args": args} for name, args in calls]})

        received, trial = self.run_with(fails_first)
        self.assertEqual((len(received), trial["attempts"], trial["status"]), (2, 2, "pass"))


class ServedToACommand(TempDirTestCase):
    """A command agent finds the served tools at EVAL_TOOL_SERVER_URL, as in its request's toolServer."""

    def test_a_command_agent_uses_the_mcp_endpoint_in_its_environment(self) -> None:
        decisions = {
            "Share notes.txt with Ana.": [
                [["contacts.find", {"name": "Ana"}], ["fs.share", {"path": "notes.txt", "email": "ana@example.com"}]]
            ]
        }
        agent = os.path.join(DATA, "agents", "mcp_agent.py")
        env = clean_env(
            EVAL_AGENT_CMD=f"{sys.executable} {agent} {self.write_json('decisions.json', decisions)}",
            EVAL_TASKS=WORLD_TASKS,
        )
        stdout, stderr, code = run_cli("--task", "share-with-ana", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0), stdout)
        trial = self.read_json("eval-results.json")["results"][0]["trialResults"][0]
        self.assertEqual(trial["finalState"]["shared"], {"notes.txt": ["ana@example.com"]})

    def test_a_command_whose_task_has_no_tools_served_finds_no_tool_server_in_its_environment(self) -> None:
        data = {
            "version": 1,
            "tools": [{"name": "fs.ls", "description": "List.", "inputSchema": {"type": "object"}}],
            "tasks": [{"id": "ls", "category": "fs", "prompt": "List my files.", "expect": {"tool": "fs.ls"}}],
        }
        says = "import json, os; print(json.dumps({'text': os.environ.get('EVAL_TOOL_SERVER_URL', 'none')}))"
        for tool_server in ("on", "off"):
            with self.subTest(tool_server=tool_server):
                env = clean_env(
                    EVAL_AGENT_CMD=f"{sys.executable} -c {shlex.quote(says)}",
                    EVAL_TASKS=self.write_json("tasks.json", data),
                    EVAL_TOOL_SERVER=tool_server,
                    EVAL_TOOL_SERVER_HOST="0.0.0.0:8765",
                    EVAL_TOOL_SERVER_URL="http://host.docker.internal:8765",  # a container's way to the served tools
                )
                stdout, stderr, code = run_cli(env=env, cwd=self.tmp)
                self.assertEqual((stderr, code), ("", 1), stdout)
                self.assertEqual(self.read_json("eval-results.json")["results"][0]["trialResults"][0]["text"], "none")


SLOW_WORLD = """
import os, time

class Slow:
    def __init__(self, marker):
        self.marker = marker
        self.done = []

    def wait(self):
        with open(self.marker, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(30)
        self.done.append("wait")
        return "waited"
"""


CRASHING_WORLD = """
import os

class Crashing:
    def boom(self):
        os._exit(3)
"""


class Interrupted(TempDirTestCase):
    def test_an_environment_that_dies_on_a_served_call_makes_the_trial_tool_environment(self) -> None:
        with open(os.path.join(self.tmp, "crashing.py"), "w", encoding="utf-8") as f:
            f.write(CRASHING_WORLD)
        tasks = self.write_json(
            "tasks.json",
            {
                "version": 1,
                "tools": [
                    {"name": "boom", "description": "Boom.", "inputSchema": {"type": "object", "properties": {}}}
                ],
                "environment": {"module": "crashing.py", "class": "Crashing"},
                "tasks": [{"id": "b", "category": "c", "prompt": "Boom.", "expect": {"tool": "boom"}}],
            },
        )

        def booms(received: Received, handler: BaseHTTPRequestHandler) -> None:
            answer = call_served(received.json["toolServer"]["callUrl"], "boom", {})
            send_json(handler, {"toolCall": {"name": "boom", "args": {}}, "text": json.dumps(answer)})

        agent = self.serve(booms)
        stdout, stderr, code = run_cli(env=clean_env(EVAL_AGENT_URL=agent.url(), EVAL_TASKS=tasks), cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 1), stdout)
        trial = self.read_json("eval-results.json")["results"][0]["trialResults"][0]
        self.assertEqual((trial["status"], trial["code"]), ("error", "tool:environment"))

    def test_ctrl_c_during_a_served_call_exits_130_with_the_results(self) -> None:
        marker = os.path.join(self.tmp, "calling")
        with open(os.path.join(self.tmp, "slow.py"), "w", encoding="utf-8") as f:
            f.write(SLOW_WORLD)
        tasks = self.write_json(
            "tasks.json",
            {
                "version": 1,
                "tools": [
                    {"name": "wait", "description": "Wait.", "inputSchema": {"type": "object", "properties": {}}}
                ],
                "environment": {"module": "slow.py", "class": "Slow", "config": {"marker": marker}, "timeout": 60},
                "tasks": [{"id": "w", "category": "c", "prompt": "Wait.", "expect": {"tool": "wait"}}],
            },
        )

        def waits(received: Received, handler: BaseHTTPRequestHandler) -> None:
            try:
                call_served(received.json["toolServer"]["callUrl"], "wait", {})
            except OSError:
                pass  # the server shut down with the run
            send_json(handler, {"toolCall": {"name": "wait", "args": {}}})

        agent = self.serve(waits)
        proc = subprocess.Popen(
            [sys.executable, "-S", SCRIPT],
            env=clean_env(EVAL_AGENT_URL=agent.url(), EVAL_TASKS=tasks),
            cwd=self.tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=stop_signals_as_from_a_terminal,
        )
        self.addCleanup(proc.kill)
        deadline = time.monotonic() + CLI_TIMEOUT
        while not os.path.exists(marker) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertTrue(os.path.exists(marker), "the call is being answered")
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=CLI_TIMEOUT)
        self.assertEqual(proc.returncode, 130, stderr)
        self.assertIn("interrupted", stderr)
        results = self.read_json("eval-results.json")
        self.assertTrue(results["interrupted"])
        with open(marker, encoding="utf-8") as f:
            worker = int(f.read())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(worker, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            self.fail("the environment's worker answering the served call outlived the run")


class ServingOff(TempDirTestCase):
    """EVAL_TOOL_SERVER=off: an agent that cannot use served tools yet is served none, and the calls it reports are
    judged, as before tools were served; a state check then has no world to judge and is refused at start."""

    def test_an_agent_served_no_tools_is_judged_on_the_calls_it_reports(self) -> None:
        bodies: list[dict[str, Any]] = []

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            bodies.append(received.json)
            steps = CANNED[received.json["prompt"]]
            calls = [step["toolCall"] for step in steps if step.get("toolCall")]
            send_json(handler, {"toolCalls": calls, "text": "Tagged."})

        agent = self.serve(respond)
        env = clean_env(EVAL_AGENT_URL=agent.url(), EVAL_TASKS=SHIPPED_TASKS, EVAL_CANARY="canary-5e0b")
        stdout, stderr, code = run_cli("--task", "asset-tag-from-search", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 1), stdout)
        self.assertIn("tool:unobserved", stdout, "served, the calls it never made are no calls")
        stdout, stderr, code = run_cli("--task", "asset-tag-from-search", "--tool-server", "off", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0), stdout)
        self.assertNotIn("toolServer", bodies[-1])

    def test_a_state_check_with_no_tools_served_is_refused_at_start(self) -> None:
        env = clean_env(EVAL_AGENT_URL="http://127.0.0.1:9/run", EVAL_TASKS=WORLD_TASKS, EVAL_TOOL_SERVER="off")
        stdout, stderr, code = run_cli(env=env, cwd=self.tmp)
        self.assertEqual((stdout, code), ("", 2))
        self.assertEqual(
            stderr,
            f"eval_agent: error: {WORLD_TASKS}: tasks[0].expect.state: EVAL_TOOL_SERVER=off serves the http backend's "
            "agent no tools, and a state is judged on the world its served calls changed; run state checks with the "
            "tools served (EVAL_TOOL_SERVER=on) or on a provider backend\n",
        )
