"""The job summary as GitHub shows it: under its cap whatever an agent sends, and nothing of the agent's as markup."""

from __future__ import annotations

import contextlib
import io
import os
import re
from unittest import mock

import eval_agent
from backends import BACKENDS
from harness.records import AgentRequest, Reply, ToolCall
from harness.reporters import jobsummary
from tests.support import CANONICAL_TASKS, InProcessAgent, TempDirTestCase

GITHUB_CAP = 1024 * 1024  # GitHub drops a step's whole summary over this many bytes
BADGE = "![eval passing](https://img.shields.io/badge/eval-passing-brightgreen)"
MARKUP = [BADGE, "[all green](https://example.com/report)", "<img src=x>", "`code`", "| a | b |", "# heading", "~~x~~"]


def same_run(line: str) -> str:
    """The line as any run would have it: every run has its own id, of the same length."""
    return re.sub("run `[0-9a-f]{32}`", "run `RUN`", line)


class ScriptedAgent(InProcessAgent):
    """An agent in this process that answers every task with the calls of its class."""

    CALLS: tuple[ToolCall, ...] = ()

    def run(self, request: AgentRequest) -> Reply:
        return Reply(tool_calls=self.CALLS, text=" ".join(MARKUP))


class JobSummary(TempDirTestCase):
    def summary_of_a_run(self, calls: tuple[ToolCall, ...]) -> str:
        """The job summary a run of the ten canonical tasks appends, every task answered with these calls."""
        path = os.path.join(self.tmp, f"summary{len(os.listdir(self.tmp))}.md")  # a summary file is appended to
        argv = ["--tasks", CANONICAL_TASKS, "--out", os.path.join(self.tmp, "r.json"), "--summary-md", path]
        with mock.patch.dict(BACKENDS, {"stub": ScriptedAgent}), mock.patch.object(ScriptedAgent, "CALLS", calls):
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(eval_agent.main(argv), 1)
        with open(path, encoding="utf-8") as f:
            return f.read()

    def test_one_huge_reply_keeps_the_summary_under_githubs_cap(self) -> None:
        calls = tuple(ToolCall(f"tool{i}." + "x" * 400, {"k" * 400: i}) for i in range(3000))
        summary = self.summary_of_a_run(calls)
        self.assertLess(len(summary.encode("utf-8")), jobsummary.SUMMARY_BYTES)
        self.assertLessEqual(jobsummary.SUMMARY_BYTES, GITHUB_CAP // 2)
        listed = [line for line in summary.splitlines() if line.startswith("- **")]
        self.assertEqual(len(listed), 10)  # every task that did not pass, each clipped
        self.assertTrue(all(line.endswith("...") for line in listed), listed[0][-80:])

    def test_a_summary_over_its_cap_is_cut_on_whole_lines_with_a_note_naming_the_results_file(self) -> None:
        whole = self.summary_of_a_run((ToolCall("imageman.asset.delete", {"assetId": "a" * 500}),))
        lines = whole.splitlines()
        three_tasks = lines[: lines.index("### Not passing") + 5]
        cap = sum(len(line.encode("utf-8")) + 1 for line in three_tasks) + jobsummary.NOTE_BYTES
        with mock.patch.object(jobsummary, "SUMMARY_BYTES", cap):
            cut = self.summary_of_a_run((ToolCall("imageman.asset.delete", {"assetId": "a" * 500}),))
        self.assertLessEqual(len(cut.encode("utf-8")), cap)
        *kept, note = cut.rstrip("\n").splitlines()
        self.assertEqual([same_run(line) for line in kept], [same_run(line) for line in three_tasks])  # lines whole
        self.assertEqual(
            note,
            f"- … and 7 more not shown: this summary stops at {cap:,} bytes (GitHub shows at most 1 MiB of a step's"
            " summary); every task is in the results file, `r.json`.",
        )

    def test_markdown_an_agent_sends_is_shown_as_text(self) -> None:
        summary = self.summary_of_a_run(tuple(ToolCall(markup, {markup: 1}) for markup in MARKUP))
        for markup in MARKUP:
            if markup.startswith("#"):
                continue  # escaped, it still holds itself: \\# heading
            with self.subTest(markup):
                self.assertFalse(markup in summary, f"{markup} stands as it came")
        self.assertIn(r"!\[eval passing\](https://img.shields.io/badge/eval-passing-brightgreen)", summary)
        self.assertIn(r"&lt;img src=x&gt;", summary)
        self.assertIn(r"\`code\`", summary)
        self.assertIn(r"\| a \| b \|", summary)
        self.assertIn(r"\# heading", summary)
        # Outside the harness's own code spans, no markup character of the agent's stands unescaped.
        for line in summary.splitlines():
            if line.startswith("- **"):
                agents = re.sub(r"^- \*\*[\w.-]+\*\* \([^)]*\): `[\w:-]+` ", "", line)
                self.assertIsNone(re.search(r"(?<!\\)[\[\]`|<>*_~]", agents), agents)
