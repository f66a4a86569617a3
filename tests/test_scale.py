"""Runs of any size: memory flat in the number of trials, entries streamed to the results and the reports."""

from __future__ import annotations

import contextlib
import errno
import gc
import io
import json
import os
import tracemalloc
import unittest
from unittest import mock

import junitparser

import eval_agent
from backends import BACKENDS
from harness.records import AgentRequest, Reply, ToolCall
from harness.reporters.jobsummary import MISSES_LISTED
from tests.support import InProcessAgent, TempDirTestCase


class EchoBackend(InProcessAgent):
    """An agent in this process that calls the expected tool at once: the harness's own cost is all there is to see."""

    WRONG_FROM = 10**9  # task numbers from here on get a wrong call
    CALL = ToolCall("bench.echo", {"text": "ok"})

    def run(self, request: AgentRequest) -> Reply:
        if int(request.task_id[1:]) >= self.WRONG_FROM:
            return Reply(tool_calls=(ToolCall("bench.other", {}),))
        return Reply(tool_calls=(self.CALL,))


def write_tasks(path: str, count: int) -> None:
    tool = {"name": "bench.echo", "description": "Echo.", "inputSchema": {"type": "object", "properties": {}}}
    other = {"name": "bench.other", "description": "Not it.", "inputSchema": {"type": "object", "properties": {}}}
    tasks = [
        {"id": f"t{i}", "category": f"c{i % 10}", "prompt": f"Echo {i}.", "expect": {"tool": "bench.echo"}}
        for i in range(count)
    ]
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": 1, "tools": [tool, other], "tasks": tasks}, f)


class FlatMemory(TempDirTestCase):
    def run_in_process(self, *argv: str) -> tuple[int, int]:
        """(exit code, the most memory Python held at once, in bytes) of a whole run here, on the echo backend."""
        gc.collect()
        tracemalloc.start()
        try:
            with mock.patch.dict(BACKENDS, {"stub": EchoBackend}), contextlib.redirect_stdout(io.StringIO()):
                code = eval_agent.main(["--tasks", os.path.join(self.tmp, "tasks.json"), *argv])
            return code, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def test_twenty_thousand_trials_hold_no_more_memory_than_the_tasks_and_a_few_bytes_each(self) -> None:
        write_tasks(os.path.join(self.tmp, "tasks.json"), 4000)
        results = os.path.join(self.tmp, "results.json")
        code, peak = self.run_in_process("--runs", "5", "--out", results, "--junit", os.path.join(self.tmp, "j.xml"))
        self.assertEqual(code, 0)
        with open(results, encoding="utf-8") as f:
            document = json.load(f)
        self.assertEqual((document["passed"], document["total"], len(document["results"])), (20_000, 20_000, 4000))
        # Kept whole, the entries of this run took 25 MB; streamed, the whole run peaks under 4 MB: the definitions
        # (~0.5 KB a task), parsing their file for a moment, and ~35 bytes a task for the verdict.
        self.assertLess(peak, 8 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB")

    def test_the_job_summary_lists_the_first_hundred_tasks_that_did_not_pass_and_counts_the_rest(self) -> None:
        write_tasks(os.path.join(self.tmp, "tasks.json"), 300)
        summary = os.path.join(self.tmp, "summary.md")
        with mock.patch.object(EchoBackend, "WRONG_FROM", 50):
            code, _ = self.run_in_process("--out", os.path.join(self.tmp, "r.json"), "--summary-md", summary)
        self.assertEqual(code, 1)
        with open(summary, encoding="utf-8") as f:
            listed = [line for line in f.read().splitlines() if line.startswith("- ")]
        self.assertEqual(len(listed), MISSES_LISTED + 1)
        self.assertTrue(listed[0].startswith("- **t50** (c0, fail)"), listed[0])
        self.assertEqual(listed[-1], "- … and 150 more, in the results file, `r.json`.")


class StreamedEntries(TempDirTestCase):
    def test_a_run_leaves_only_the_files_it_was_asked_for_however_it_ends(self) -> None:
        write_tasks(os.path.join(self.tmp, "tasks.json"), 30)
        out = os.path.join(self.tmp, "out")
        os.mkdir(out)
        stderr = io.StringIO()
        with mock.patch.dict(BACKENDS, {"stub": EchoBackend}), contextlib.redirect_stdout(io.StringIO()):
            tasks = os.path.join(self.tmp, "tasks.json")
            eval_agent.main(["--tasks", tasks, "--out", os.path.join(out, "r.json"), "--runs", "2"])
            with mock.patch.object(EchoBackend, "run", side_effect=RuntimeError("planted")):
                with contextlib.redirect_stderr(stderr):
                    code = eval_agent.main(["--tasks", tasks, "--out", os.path.join(out, "bug.json")])
        self.assertEqual(code, 4, stderr.getvalue())
        self.assertEqual(sorted(os.listdir(out)), ["bug.json", "r.json"])  # no spool, no temporary file

    def test_a_report_that_cannot_be_put_in_place_leaves_no_other_report_half_done_beside_its_target(self) -> None:
        write_tasks(os.path.join(self.tmp, "tasks.json"), 20)
        replace, renamed = os.replace, []

        def refuse_the_second(source: str, target: str) -> None:
            renamed.append(target)
            if len(renamed) == 2:
                raise OSError(errno.EACCES, "Permission denied")
            replace(source, target)

        argv = ["--tasks", os.path.join(self.tmp, "tasks.json"), "--out", os.path.join(self.tmp, "r.json")]
        argv += ["--junit", os.path.join(self.tmp, "j.xml"), "--html", os.path.join(self.tmp, "r.html")]
        stderr = io.StringIO()
        with mock.patch.dict(BACKENDS, {"stub": EchoBackend}), mock.patch("os.replace", refuse_the_second):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
                code = eval_agent.main(argv)
        self.assertEqual(code, 2, stderr.getvalue())
        self.assertIn("cannot write", stderr.getvalue())
        self.assertEqual(sorted(os.listdir(self.tmp)), ["r.json", "tasks.json"])  # no .eval-*.tmp left

    def test_the_results_junit_and_html_of_a_run_agree_task_for_task(self) -> None:
        write_tasks(os.path.join(self.tmp, "tasks.json"), 500)
        argv = ["--tasks", os.path.join(self.tmp, "tasks.json"), "--out", os.path.join(self.tmp, "r.json")]
        argv += ["--junit", os.path.join(self.tmp, "j.xml"), "--html", os.path.join(self.tmp, "r.html")]
        with mock.patch.dict(BACKENDS, {"stub": EchoBackend}), mock.patch.object(EchoBackend, "WRONG_FROM", 480):
            with contextlib.redirect_stdout(io.StringIO()):
                code = eval_agent.main(argv)
        self.assertEqual(code, 0)  # 96% against the 80% gate
        with open(os.path.join(self.tmp, "r.json"), encoding="utf-8") as f:
            document = json.load(f)
        self.assertEqual([entry["id"] for entry in document["results"]], [f"t{i}" for i in range(500)])
        suite = next(iter(junitparser.JUnitXml.fromfile(os.path.join(self.tmp, "j.xml"))))
        self.assertEqual((suite.tests, suite.failures, suite.errors), (500, 20, 0))
        self.assertEqual([case.name for case in suite][478:482], ["t478", "t479", "t480", "t481"])
        with open(os.path.join(self.tmp, "r.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn("<h2>Tasks (500)</h2>", page)
        self.assertEqual(page.count('role="rowgroup" data-s="fail"'), 20)


if __name__ == "__main__":
    unittest.main()
