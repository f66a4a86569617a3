"""`import evalbench`: an evalbench agent evalset printed as a task file this harness loads, with every field it
cannot carry over reported and kept in the task's comment. And what a run imports: only what it uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from typing import Any

from backends import BACKENDS, Declared
from harness.records import ConfigError, ExpectTrajectory
from harness.subcommands.importing import from_evalbench
from harness.taskfile import load_task_file
from tests.support import CLI_TIMEOUT, DATA, ROOT, Received, TempDirTestCase, canned, clean_env, run_cli, send_json

EVALSET = os.path.join(DATA, "evalbench", "cloud-sql.evalset.json")
# What a run of plain tasks (no tool environment, no cassette) does not use: a tool environment's worker and what it is
# started with, a cassette, the temporary files and paths only a command agent or a test asks for, and the reader of
# calls written as text, for a reply whose text has no sign of one, the tool server with its HTTP server, for a run
# that serves its agent no tools, every backend but the stub and the http one, known by their settings alone, and the
# signal module (its enums), where the built-in _signal does, the sequential test of --runs auto and its sending, and
# the shape a results file read back must have.
# A run on the stub has no workers to hear from either (queue); a run against an http agent has, at its default
# concurrency.
UNUSED_BY_A_PLAIN_RUN = {
    "harness.environments", "subprocess", "tempfile", "pathlib", "harness.cassette", "harness.textcalls",
    "harness.serving.tools", "http.server", "backends.provider", "backends.openai_chat", "backends.openai_responses",
    "backends.anthropic_messages", "backends.gemini", "backends.command_agent", "signal",
    "harness.observed", "harness.serving.models", "harness.proxied", "harness.adaptive", "harness.settling",
    "harness.readback",
}  # fmt: skip
# What reads the keys a plain task (id, category, prompt, expect with tool and requiredArgs) does not have: turns and
# scripted results, each turn's checks, a tool environment and its state, a budget, argValues and checkArgs.
UNUSED_BY_PLAIN_TASKS = {
    "harness.taskfile.conversations", "harness.taskfile.turnexpect", "harness.taskfile.environments",
    "harness.taskfile.states", "harness.taskfile.budgets", "harness.taskfile.argchecks",
}  # fmt: skip


def scenario(**fields: Any) -> dict[str, Any]:
    return {"id": "s1", "starting_prompt": "List my instances.", "expected_trajectory": ["sql__list"], **fields}


class ImportEvalbench(TempDirTestCase):
    def test_an_evalset_becomes_a_task_file_this_harness_loads(self) -> None:
        stdout, stderr, code = run_cli("import", "evalbench", EVALSET, env=clean_env(), cwd=self.tmp)
        self.assertEqual(code, 0, stderr)
        path = os.path.join(self.tmp, "imported.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(stdout)
        task_file = load_task_file(path, {"EVAL_GCP_PROJECT_ID": "proj-1"})
        listing, create = task_file.tasks
        self.assertEqual((listing.id, listing.category), ("cloud-sql-list-instances-01", "tools"))
        self.assertEqual(listing.prompt, "list all Cloud SQL instances in project proj-1")
        self.assertEqual(listing.expect, ExpectTrajectory(tuple(listing.expect.steps), "in-order"))
        self.assertEqual(
            [step.tool for step in listing.expect.steps], ["cloud-sql__list_instances", "cloud-sql__get_instance"]
        )
        self.assertEqual(create.prompt, "I need a database. Budget: $20 a month.", "a $ is read back as written")
        self.assertEqual(
            [tool.name for tool in task_file.tools],
            ["cloud-sql__list_instances", "cloud-sql__get_instance", "cloud-sql__create_instance"],
        )
        data = json.loads(stdout)
        self.assertEqual(
            data["tasks"][0]["comment"]["todo"], "write the user's follow-ups from conversationPlan as turns"
        )
        self.assertEqual(data["tasks"][0]["comment"]["env"], {"GOOGLE_CLOUD_PROJECT": "${EVAL_GCP_PROJECT_ID}"})
        self.assertEqual(data["tasks"][1]["comment"]["priority"], "p1")
        self.assertEqual(
            stderr.splitlines(),
            [
                f"eval_agent import: 2 tasks from {EVALSET}",
                "eval_agent import: scenarios[0]: expected_skills: not checked by this harness, kept in the comment"
                " of cloud-sql-list-instances-01",
                "eval_agent import: cloud-sql-list-instances-01: a conversation plan cannot be played as it is:"
                " write its follow-ups as turns",
                "eval_agent import: scenarios[1].priority: unknown field, kept in the comment of csql-create-ambiguous",
                "eval_agent import: scenarios[1]: binary_rubric: not checked by this harness, kept in the comment of"
                " csql-create-ambiguous",
                "eval_agent import: scenarios[2] (no-trajectory): no expected_trajectory of tool names: nothing to"
                " check, left out",
                "eval_agent import: tools: 3 tools by name only: paste the real surface from `eval_agent.py tools`,"
                " so that arguments can be checked",
                "eval_agent import: set before running: EVAL_GCP_PROJECT_ID (placeholders in the prompts, or in env)",
            ],
        )

    def test_ids_become_unique_slugs(self) -> None:
        data = {"scenarios": [scenario(id="a b"), scenario(id="a b"), scenario(id=None), scenario(id="ok.1")]}
        task_file, _ = from_evalbench(data, "e.json")
        self.assertEqual([task["id"] for task in task_file["tasks"]], ["a-b", "a-b-2", "scenario-3", "ok.1"])

    def test_what_is_not_an_evalset_is_one_line_naming_the_file_and_the_field(self) -> None:
        cases = [
            ([], "not an evalbench evalset: expected an object with a list of scenarios"),
            ({"scenarios": [1]}, "scenarios[0]: expected a scenario object, got a number"),
            (
                {"scenarios": [scenario(starting_prompt=" ")]},
                "scenarios[0].starting_prompt: expected a non-empty string, got an empty string",
            ),
            (
                {"scenarios": [scenario(expected_trajectory=[])]},
                "no scenario with a prompt and an expected trajectory: nothing to import",
            ),
        ]
        for data, message in cases:
            with self.subTest(message):
                with self.assertRaises(ConfigError) as caught:
                    from_evalbench(data, "e.json")
                self.assertEqual(str(caught.exception), f"e.json: {message}")

    def test_a_file_that_is_not_json_exits_2_with_one_line(self) -> None:
        path = os.path.join(self.tmp, "bad.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write("{scenarios")
        stdout, stderr, code = run_cli("import", "evalbench", path, env=clean_env(), cwd=self.tmp)
        self.assertEqual(
            (stdout, stderr, code),
            (
                "",
                f"eval_agent import: error: {path}: invalid JSON at line 1, column 2:"
                " Expecting property name enclosed in double quotes\n",
                2,
            ),
        )

    def test_an_integer_longer_than_python_reads_exits_2_with_one_line(self) -> None:
        path = os.path.join(self.tmp, "long.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write('{"scenarios": [' + "1" * 5000 + "]}")
        self.assertEqual(
            run_cli("import", "evalbench", path, env=clean_env(), cwd=self.tmp),
            ("", f"eval_agent import: error: {path}: an integer too long to read as a number\n", 2),
        )


class WhatARunImports(TempDirTestCase):
    """A run imports what it uses: each module it does not need is a cost to every run's start."""

    def imported(self, *args: str, **environ: str) -> set[str]:
        """The modules a run with these arguments and settings has imported when it ends (started without site)."""
        main = (
            "import sys, eval_agent\n"
            "code = eval_agent.main(sys.argv[1:])\n"
            "print(*sorted(sys.modules), sep='\\n', file=sys.stderr)\n"
            "sys.exit(code)"
        )
        proc = subprocess.run(
            [sys.executable, "-S", "-c", main, *args],
            capture_output=True,
            text=True,
            env=clean_env(PYTHONPATH=ROOT, **environ),
            cwd=self.tmp,
            timeout=CLI_TIMEOUT,
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return set(proc.stderr.splitlines())

    def test_a_stub_run_imports_no_environment_cassette_text_call_reader_or_worker_queue(self) -> None:
        imported = self.imported("--out", "r.json")
        self.assertEqual(imported & (UNUSED_BY_A_PLAIN_RUN | {"queue"}), set())
        self.assertIn("harness.exchanges", imported, "the seam every exchange goes through")

    def test_an_http_run_on_plain_tasks_imports_only_what_it_uses(self) -> None:
        agent = self.serve(canned)
        imported = self.imported("--out", "r.json", EVAL_AGENT_URL=agent.url())
        self.assertEqual(imported & UNUSED_BY_A_PLAIN_RUN, set())
        self.assertIn("queue", imported, "its workers hand their results over in one")

    def test_a_run_of_plain_tasks_imports_no_check_of_a_key_they_do_not_have(self) -> None:
        def echo(received: Received, handler: BaseHTTPRequestHandler) -> None:
            send_json(handler, {"toolCall": {"name": "echo", "args": {"text": received.json["prompt"]}}})

        tool = {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}
        task = {"category": "echo", "prompt": "Echo this.", "expect": {"tool": "echo", "requiredArgs": ["text"]}}
        tasks = [{"id": f"t{i}", **task} for i in range(3)]
        path = self.write_json("tasks.json", {"version": 1, "tools": [tool], "tasks": tasks})
        imported = self.imported("--out", "r.json", EVAL_AGENT_URL=self.serve(echo).url(), EVAL_TASKS=path)
        self.assertEqual(imported & UNUSED_BY_PLAIN_TASKS, set())

    def test_a_run_that_records_imports_the_cassette(self) -> None:
        self.assertIn("harness.cassette", self.imported("--out", "r.json", "--record", "c.jsonl"))

    def test_a_backend_known_by_its_settings_alone_declares_what_its_class_does(self) -> None:
        for name, backend in BACKENDS.items():
            if isinstance(backend, Declared):
                with self.subTest(name):
                    loaded = backend.loaded()
                    self.assertEqual(loaded.NAME, name)
                    self.assertIs(loaded.SETTINGS, backend.SETTINGS)
                    self.assertEqual(getattr(loaded, "NAMED_ONLY", False), backend.NAMED_ONLY)

    def test_a_run_on_the_command_backend_imports_it_and_no_provider_backend(self) -> None:
        agent = os.path.join(self.tmp, "agent.py")
        with open(agent, "w", encoding="utf-8") as f:
            f.write('import sys\nsys.stdin.read()\nprint(\'{"text": "I will not do that.", "toolCalls": []}\')\n')
        imported = self.imported("--out", "r.json", "--task", "safety-*", EVAL_AGENT_CMD=f"{sys.executable} {agent}")
        command = {"backends.command_agent", "subprocess", "tempfile", "signal"}  # its process, its folder, its group
        self.assertEqual(imported & UNUSED_BY_A_PLAIN_RUN, command)
