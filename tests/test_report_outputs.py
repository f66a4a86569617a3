"""Where merge, compare and report write: as a run, never over a file they read, never two reports to one file."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.reporters import REPORTS
from tests.support import CLI_TIMEOUT, ROOT, TempDirTestCase, clean_env, run_cli

MERGE = ("merge", "s1.json", "s2.json")


class SubcommandOutputs(TempDirTestCase):
    def setUp(self) -> None:
        super().setUp()
        for k in (1, 2):
            run_cli("--shard", f"{k}/2", "--out", f"s{k}.json", cwd=self.tmp)
        run_cli("--out", "base.json", cwd=self.tmp)
        run_cli("--out", "cand.json", cwd=self.tmp)

    def contents(self) -> dict[str, bytes]:
        """Every file in the temporary folder, by name, as it is now."""
        found = {}
        for name in sorted(os.listdir(self.tmp)):
            with open(os.path.join(self.tmp, name), "rb") as f:
                found[name] = f.read()
        return found

    def test_an_output_over_an_input_or_another_output_is_one_line_and_exit_2_with_nothing_written(self) -> None:
        cases = [
            (
                (*MERGE, "--out", "m.json", "--junit", "m.json"),
                {},
                "eval_agent merge: error: --junit: m.json is also --out; each report needs a file of its own",
            ),
            (
                (*MERGE, "--out", "s1.json"),
                {},
                "eval_agent merge: error: --out: s1.json is a shard (RESULTS); merge never writes over what it reads",
            ),
            (
                (*MERGE, "--out", "m.json", "--html", "s2.json"),
                {},
                "eval_agent merge: error: --html: s2.json is a shard (RESULTS); merge never writes over what it reads",
            ),
            (
                (*MERGE, "--out", "m.json", "--baseline", "base.json", "--summary-md", "base.json"),
                {},
                "eval_agent merge: error: --summary-md: base.json is the baseline (--baseline); merge never writes over"
                " what it reads",
            ),
            (
                (*MERGE, "--out", "m.json"),
                {"GITHUB_STEP_SUMMARY": "s1.json"},
                "eval_agent merge: error: GITHUB_STEP_SUMMARY: s1.json is a shard (RESULTS); merge never writes over"
                " what it reads",
            ),
            (
                ("compare", "base.json", "cand.json", "--out", "cand.json"),
                {},
                "eval_agent compare: error: --out: cand.json is the candidate (CANDIDATE); compare never writes over"
                " what it reads",
            ),
            (
                ("compare", "base.json", "cand.json", "--out", "./base.json"),
                {},
                "eval_agent compare: error: --out: ./base.json is the baseline (BASELINE); compare never writes over"
                " what it reads",
            ),
            (
                ("report", "cand.json", "--baseline", "base.json", "-o", "base.json"),
                {},
                "eval_agent report: error: -o: base.json is the baseline (--baseline); report never writes over what"
                " it reads",
            ),
        ]
        for args, env, line in cases:
            with self.subTest(args=args, env=env):
                before = self.contents()
                self.assertEqual(run_cli(*args, env=clean_env(**env), cwd=self.tmp), ("", line + "\n", 2))
                self.assertEqual(self.contents(), before)

    def test_merge_never_writes_over_the_baseline_the_shards_recorded(self) -> None:
        for k in (1, 2):
            run_cli("--shard", f"{k}/2", "--baseline", "base.json", "--out", f"b{k}.json", cwd=self.tmp)
        before = self.contents()
        self.assertEqual(
            run_cli("merge", "b1.json", "b2.json", "--out", "base.json", cwd=self.tmp),
            (
                "",
                "eval_agent merge: error: --out: base.json is the baseline (b1.json's baseline.path); merge never"
                " writes over what it reads\n",
                2,
            ),
        )
        self.assertEqual(self.contents(), before)

    def test_merge_and_compare_still_write_every_report_asked_for(self) -> None:
        _, stderr, code = run_cli(
            "merge", "s1.json", "s2.json", "--out", "m.json", "--junit", "m.xml", "--html", "m.html", cwd=self.tmp
        )
        self.assertEqual((stderr, code), ("", 0))
        _, stderr, code = run_cli("compare", "base.json", "cand.json", "--out", "cmp.json", cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        self.assertLessEqual({"m.json", "m.xml", "m.html", "cmp.json"}, set(os.listdir(self.tmp)))


class Imports(TempDirTestCase):
    def reports_imported(self, *args: str) -> set[str]:
        """The reports whose modules a run with these arguments imports."""
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
            env=clean_env(PYTHONPATH=ROOT),
            cwd=self.tmp,
            timeout=CLI_TIMEOUT,
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        imported = set(proc.stderr.splitlines())
        return {report.name for report in REPORTS if report.module in imported}

    def test_a_run_imports_only_the_reports_it_was_asked_for(self) -> None:
        self.assertEqual(self.reports_imported(), {"results"})
        self.assertEqual(self.reports_imported("--junit", "r.xml"), {"results", "junit"})
