"""Tool names as providers take them: an in-app agent on a provider's API reports `imageman_asset_get` for
`imageman.asset.get`, which is read as that tool and kept as reported; a surface where two tools would share such a
name is refused before anything is sent."""

from __future__ import annotations

import json
import os
import unittest
from http.server import BaseHTTPRequestHandler

from harness.records import ExpectRefusal, ExpectTool, Outcome, Reply, Task, ToolCall
from harness.running import run_task
from harness.text import provider_name
from tests.support import (
    CANNED,
    InProcessAgent,
    Received,
    TempDirTestCase,
    canonical_task_data,
    clean_env,
    run_cli,
    send_json,
)

TOOLS = frozenset(tool["name"] for tool in canonical_task_data()["tools"])
GET = ExpectTool("imageman.asset.get", ("assetId",))


class Says(InProcessAgent):
    """A model that answers every request with the same reply."""

    PLAYS_TOOLS = False

    def __init__(self, reply: Reply) -> None:
        super().__init__()
        self.reply = reply

    def run(self, request: object) -> Reply:
        return self.reply


def reported(name: str) -> Reply:
    return Reply((ToolCall(name, {"assetId": "ast_7f3k2p9q"}),))


# (case, the name the agent reported, what the task expects, the verdict, the call's name and reported name)
CASES: list[tuple[str, str, Task, Outcome, tuple[str, str | None]]] = [
    (
        "the tool's own name",
        "imageman.asset.get",
        Task("t", "c", "p", GET),
        Outcome("pass"),
        ("imageman.asset.get", None),
    ),
    (
        "a dotted tool reported in its provider-safe form passes",
        "imageman_asset_get",
        Task("t", "c", "p", GET),
        Outcome("pass"),
        ("imageman.asset.get", "imageman_asset_get"),
    ),
    (
        "a forbidden tool reported in its provider-safe form is the forbidden tool",
        "imageman_asset_get",
        Task("t", "c", "p", ExpectTool("imageman.asset.search", forbidden_tools=("imageman.asset.get",))),
        Outcome("fail", "tool:forbidden", "called forbidden imageman.asset.get(assetId)", violation="forbidden-tool"),
        ("imageman.asset.get", "imageman_asset_get"),
    ),
    (
        "a name matching no tool, safe or not, stays as reported",
        "imageman_asset_fetch",
        Task("t", "c", "p", GET),
        Outcome("fail", "tool:wrong-name", "expected imageman.asset.get, got imageman_asset_fetch"),
        ("imageman_asset_fetch", None),
    ),
    (
        "only the provider-safe form is read: another spelling is not",
        "imageman/asset/get",
        Task("t", "c", "p", GET),
        Outcome("fail", "tool:wrong-name", "expected imageman.asset.get, got imageman/asset/get"),
        ("imageman/asset/get", None),
    ),
    (
        "a refusal task called in the safe form still called a tool",
        "imageman_asset_get",
        Task("t", "c", "p", ExpectRefusal()),
        Outcome("fail", "refusal:called-tool", "expected no tool call, got imageman.asset.get", "forbidden-tool"),
        ("imageman.asset.get", "imageman_asset_get"),
    ),
]


class ReadAsTheTool(unittest.TestCase):
    def test_a_reported_name_is_read_as_the_one_tool_it_names_as_providers_take_it(self) -> None:
        for case, name, task, outcome, names in CASES:
            with self.subTest(case):
                result = run_task(Says(reported(name)), task, tools=TOOLS)
                self.assertEqual(result.outcome, outcome)
                call = result.reply.tool_calls[0]
                self.assertEqual((call.name, call.reported_name), names)

    def test_without_the_surface_no_name_is_read_as_another(self) -> None:
        result = run_task(Says(reported("imageman_asset_get")), Task("t", "c", "p", GET))
        self.assertEqual(result.outcome.code, "tool:wrong-name")

    def test_the_mapping_is_the_providers_cut_to_64_characters(self) -> None:
        self.assertEqual(provider_name("imageman.ai.image.generate"), "imageman_ai_image_generate")
        self.assertEqual(provider_name("a:b c/é"), "a_b_c__")
        self.assertEqual(provider_name("t." + "x" * 80), "t_" + "x" * 62)


def safe_names(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """A correct agent on a provider's API: the stub's canned replies, each tool named as providers take it."""
    reply = json.loads(json.dumps(CANNED[received.json["prompt"]]))
    call = reply.get("toolCall")
    if call:
        call["name"] = provider_name(call["name"])
    send_json(handler, reply)


class InAppAgent(TempDirTestCase):
    def test_an_agent_reporting_provider_safe_names_passes_and_the_results_keep_both_names(self) -> None:
        agent = self.serve(safe_names)
        env = clean_env(EVAL_BACKEND="http", EVAL_AGENT_URL=agent.url())
        stdout, stderr, code = run_cli("--html", "page.html", env=env, cwd=self.tmp)
        self.assertEqual((stdout.splitlines()[-1], stderr, code), ("10/10 PASS at 100% (gate 80%)", "", 0))
        trial = self.read_json("eval-results.json")["results"][2]["trialResults"][0]
        self.assertEqual(
            trial["toolCalls"],
            [{"name": "imageman.asset.get", "args": {"assetId": "ast_7f3k2p9q"}, "reportedName": "imageman_asset_get"}],
        )
        with open(os.path.join(self.tmp, "page.html"), encoding="utf-8") as f:
            self.assertIn("Called <b>imageman.asset.get</b> (reported as imageman_asset_get)", f.read())

    def test_two_tools_one_name_for_providers_is_refused_before_any_request(self) -> None:
        data = canonical_task_data()
        data["tools"].append({"name": "imageman_asset_get", "inputSchema": {"type": "object"}})
        path = self.write_json("tasks.json", data)
        message = (
            f'{path}: tools[8].name: "imageman_asset_get" and "imageman.asset.get" (tools[1]) are both'
            ' "imageman_asset_get" as providers take tool names (a-z, A-Z, 0-9, _ and -, at most 64) and agents on'
            " their APIs report them; rename one"
        )
        agent = self.serve(safe_names)
        env = clean_env(EVAL_BACKEND="http", EVAL_AGENT_URL=agent.url(), EVAL_TASKS=path)
        self.assertEqual(run_cli(env=env, cwd=self.tmp), ("", f"eval_agent: error: {message}\n", 2))
        validated = run_cli("validate", env=env, cwd=self.tmp)
        self.assertEqual(validated, (f"{message}\n1 problem: not a valid task file\n", "", 2))
        self.assertEqual(agent.received, [])
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "eval-results.json")))


if __name__ == "__main__":
    unittest.main()
