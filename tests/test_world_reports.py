"""Tool worlds in every report: each turn's verdict, where each result came from, and the state an environment ended
in, on the console, in JUnit, the job summary and the HTML page; and all of it inert, whatever the agent put there."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import unittest
from unittest import mock

import eval_agent
from backends import BACKENDS
from harness.records import AgentRequest, Reply, ToolCall
from harness.reporters.page import html_report
from tests.support import DATA, InProcessAgent

FILES = os.path.join(DATA, "envs", "files.py")
# What the agent writes into the world and names a tool: each would run in a page that took it as markup.
PLANTED = "<script>window.__pwned = 'state'</script>"
ROGUE = "<img src=x onerror=\"window.__pwned = 'turn'\">"
LONG = "n1 " * 30_000  # a final state over the results' cap
TOOLS = [
    {"name": name, "inputSchema": {"type": "object", "properties": {key: {"type": "string"} for key in keys}}}
    for name, keys in {"fs.write": ("path", "text"), "notes.find": ("q",), "notes.delete": ("q",)}.items()
]
TASKS = [
    {
        "id": "greeting-written",
        "category": "files",
        "prompt": "Write the greeting to a.txt.",
        "environment": {"module": FILES, "class": "FileSystem", "config": {"files": {"b.txt": "keep"}}},
        "expect": {"tool": "fs.write", "state": {"match": {"files": {"a.txt": "hello"}}}},
    },
    {
        "id": "notes-kept",
        "category": "notes",
        "prompt": "Find the launch notes.",
        "turns": [
            {"prompt": "Thanks. Leave them be.", "expect": {"noCall": True}},
            {"prompt": "That is all.", "expect": {"noCall": True}},
        ],
        "toolResults": {
            "notes.find": {"cases": [{"args": {"q": "launch"}, "result": {"notes": ["n1"]}}], "default": []}
        },
        "expect": {"tool": "notes.find", "firstTurn": {"tool": "notes.find"}},
    },
    {
        "id": "copied-by-reference",
        "category": "files",
        "prompt": "Look the note up, then copy it to c.txt.",
        "environment": {"module": FILES, "class": "FileSystem"},
        "toolResults": {"notes.find": {"sequence": [["n1"], ["n2"]]}},
        "expect": {
            "trajectory": [
                {"tool": "notes.find"},
                {"tool": "fs.write", "argValues": {"path": ["c.txt"], "text": ["n1"]}},
            ],
            "state": "reference",
        },
    },
]


class WorldAgent(InProcessAgent):
    """Writes a script into a.txt; finds notes twice (a case, then the default), then deletes one when told not to."""

    def run(self, request: AgentRequest) -> Reply:
        made = len(request.steps)
        if request.task_id == "copied-by-reference":
            calls = (ToolCall("notes.find", {"q": "n"}), ToolCall("fs.write", {"path": "c.txt", "text": LONG}))
            return Reply(tool_calls=(calls[made],)) if made < 2 else done()
        if request.task_id == "greeting-written":
            return Reply(tool_calls=(ToolCall("fs.write", {"path": "a.txt", "text": PLANTED}),)) if not made else done()
        if request.turn == 1 and made < 2:
            return Reply(tool_calls=(ToolCall("notes.find", {"q": ("launch", "other")[made]}),))
        if request.turn == 2 and not made:
            return Reply(tool_calls=(ToolCall(ROGUE, {"q": "launch"}),))
        return done()


def done() -> Reply:
    return Reply(text="Done.")


def world_run(folder: str) -> str:
    """A run of the two tasks with every report, in the folder; what it printed."""
    with open(os.path.join(folder, "tasks.json"), "w", encoding="utf-8") as f:
        json.dump({"version": 1, "tools": TOOLS, "tasks": TASKS}, f)
    argv = ["--tasks", os.path.join(folder, "tasks.json"), "--out", os.path.join(folder, "run.json")]
    argv += [flag + os.path.join(folder, name) for flag, name in (("--junit=", "junit.xml"), ("--html=", "page.html"))]
    argv += ["--summary-md", os.path.join(folder, "summary.md")]
    printed = io.StringIO()
    with mock.patch.dict(BACKENDS, {"stub": WorldAgent}), contextlib.redirect_stdout(printed):
        code = eval_agent.main(argv)
    if code != 1:
        raise AssertionError(f"exit {code}, not 1: {printed.getvalue()}")
    return printed.getvalue()


class WorldReports(unittest.TestCase):
    """One run of both tasks, every report read back."""

    folder: str
    printed: str

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.folder = tempfile.mkdtemp()
        cls.addClassCleanup(shutil.rmtree, cls.folder)
        cls.printed = world_run(cls.folder)

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def read(self, name: str) -> str:
        with open(self.path(name), encoding="utf-8") as f:
            return f.read()

    def test_the_console_marks_each_turn_of_a_failing_conversation_and_nothing_more(self) -> None:
        lines = {line.split()[1]: line for line in self.printed.splitlines() if line.startswith("FAIL")}
        self.assertTrue(lines["notes-kept"].endswith("turns 1 ✓ 2 ✗ 3 ✓"), lines["notes-kept"])
        self.assertIn("turn 2: expected no tool call, got <img src=x", lines["notes-kept"])
        self.assertIn(
            "state:mismatch: the state at $.files.a.txt is \"<script>window.__pwned = 'state'</script>\", expected"
            ' "hello"',
            lines["greeting-written"],
        )
        self.assertNotIn("turns", lines["greeting-written"])

    def test_junit_names_the_turn_each_turns_verdict_and_the_state_difference(self) -> None:
        import junitparser

        suite = next(iter(junitparser.JUnitXml.fromfile(os.path.join(self.folder, "junit.xml"))))
        cases = {case.name: case.result[0] for case in suite}
        notes = cases["notes-kept"]
        self.assertEqual(notes.message, f"turn:called-tool: turn 2: expected no tool call, got {ROGUE}")
        self.assertIn("  turns 1 ✓ 2 ✗ 3 ✓\n", notes.text)
        self.assertIn("    turn 1: pass\n", notes.text)
        self.assertIn(f"    turn 2: fail turn:called-tool: expected no tool call, got {ROGUE}\n", notes.text)
        state = cases["greeting-written"]
        self.assertEqual(
            state.message,
            f'state:mismatch: the state at $.files.a.txt is {json.dumps(PLANTED)}, expected "hello"',
        )
        self.assertIn(f'    final state: {{"files": {{"b.txt": "keep", "a.txt": {json.dumps(PLANTED)}}}}}', state.text)

    def test_the_job_summary_gives_each_turns_verdict_and_the_final_state_as_text(self) -> None:
        summary = self.read("summary.md")
        self.assertIn("  - turn 1: pass\n", summary)
        self.assertIn("  - turn 2: fail turn:called-tool: expected no tool call, got &lt;img src=x", summary)
        self.assertIn(
            '  - final state: {"files": {"b.txt": "keep", "a.txt": "&lt;script&gt;window.\\_\\_pwned', summary
        )
        self.assertNotIn("<script", summary)
        self.assertNotIn("<img", summary)

    def test_the_page_shows_each_turns_verdict_each_results_source_and_the_final_state(self) -> None:
        page = self.read("page.html")
        self.assertIn('<h3>Turn 1 <span class="badge pass">pass</span></h3>', page)
        self.assertIn(
            '<h3>Turn 2 <span class="badge fail">fail</span></h3><p class="why">turn:called-tool: expected no tool'
            " call, got &lt;img src=x onerror=&quot;window.__pwned = &#x27;turn&#x27;&quot;&gt;</p>",
            page,
        )
        self.assertIn('<p>notes.find returned <span class="badge">cases[0]</span></p>', page)
        self.assertIn('<p>notes.find returned <span class="badge">default</span></p>', page)
        self.assertIn('returned <span class="badge">no result scripted</span></p>', page)
        self.assertIn('<p>fs.write returned <span class="badge">environment</span></p>', page)
        self.assertIn("<summary>Final state</summary>", page)
        self.assertIn(
            '<p class="why">state:mismatch: the state at $.files.a.txt is &quot;&lt;script&gt;window.__pwned',
            page,
        )
        self.assertNotIn(PLANTED, page)
        self.assertNotIn("<img", page)
        self.assertEqual(page.count("<script"), 1)

    def test_a_final_state_held_to_the_reference_shows_its_hash_and_one_over_the_cap_is_marked_cut(self) -> None:
        import junitparser

        (trial,) = json.loads(self.read("run.json"))["results"][2]["trialResults"]
        digest = trial["referenceStateSha256"]
        self.assertEqual((trial["code"], trial["finalStateCut"]), ("state:mismatch", True))
        suite = next(iter(junitparser.JUnitXml.fromfile(self.path("junit.xml"))))
        failure = next(case for case in suite if case.name == "copied-by-reference").result[0]
        self.assertIn(f"\n    reference state SHA-256: {digest}", failure.text)
        self.assertRegex(failure.text, r'\n    final state: \{"files": \{"c.txt": "n1 n1 [n1 ]+\.\.\. \(cut\)\n')
        self.assertIn(f"  - reference state SHA-256: {digest}\n", self.read("summary.md"))
        page = self.read("page.html")
        self.assertIn(f"<summary>Final state (cut at 64 KiB), held to the reference state (SHA-256 {digest})", page)
        self.assertIn('<p>notes.find returned <span class="badge">sequence</span></p>', page)

    def test_a_results_file_from_before_tool_worlds_still_renders(self) -> None:
        document = json.loads(self.read("run.json"))
        for entry in document["results"]:
            for trial in entry["trialResults"]:
                for key in ("finalState", "finalStateCut", "referenceStateSha256"):
                    trial.pop(key, None)
                for turn in trial.get("conversation", ()):
                    turn.pop("verdict", None)
                    for step in turn["steps"]:
                        for result in step.get("results", ()):
                            result.pop("source", None)
                            result.pop("case", None)
        page = "".join(html_report(document))
        self.assertIn("<h3>Turn 2</h3>", page)
        self.assertNotIn("Final state", page)
        self.assertIn("<p>notes.find returned</p>", page)
        self.assertIn("returned (no result scripted)</p>", page)
