"""The single-file build: reproducible, holding only what runs, and passing a smoke set of the CLI tests on its own,
from an empty folder with a task file copied in."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
import zipfile

from tests.support import CANONICAL_TASKS, ROOT, TempDirTestCase, canned, clean_env, run_cli
from tools.build_pyz import build


class Archive(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        folder = tempfile.TemporaryDirectory()
        cls.addClassCleanup(folder.cleanup)
        cls.first, cls.second = os.path.join(folder.name, "a.pyz"), os.path.join(folder.name, "b.pyz")
        cls.commit = build(cls.first)
        build(cls.second)

    def test_two_builds_of_one_commit_are_the_same_bytes(self) -> None:
        with open(self.first, "rb") as a, open(self.second, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_it_holds_the_entrypoint_the_engine_and_the_backends_and_nothing_else(self) -> None:
        with zipfile.ZipFile(self.first) as archive:
            names = archive.namelist()
            dates = {entry.date_time for entry in archive.infolist()}
        self.assertEqual(names, sorted(names))
        self.assertEqual(
            {name.split("/")[0] for name in names}, {"__main__.py", "eval_agent.py", "harness", "backends"}
        )
        self.assertIn("backends/stub_replies.json", names)
        self.assertFalse([name for name in names if "__pycache__" in name or "test" in name or "bench" in name])
        self.assertEqual(dates, {(1980, 1, 1, 0, 0, 0)})
        with open(self.first, "rb") as f:
            self.assertEqual(f.readline(), b"#!/usr/bin/env python3\n")
        self.assertTrue(os.access(self.first, os.X_OK))

    def test_its_size_is_the_size_docs_ci_md_gives_within_a_tenth(self) -> None:
        with open(os.path.join(ROOT, "docs", "ci.md"), encoding="utf-8") as f:
            (stated,) = re.findall(r"zipapp, about (\d+) KB", f.read())
        self.assertAlmostEqual(os.path.getsize(self.first) / 1000, int(stated), delta=int(stated) / 10)

    def test_it_says_its_version_and_the_commit_it_was_built_from(self) -> None:
        from harness import __version__

        self.assertRegex(self.commit, r"^[0-9a-f]{40}(\+changes)?$|^unknown$")
        stdout, _, code = run_cli("--version", script=self.first)
        self.assertEqual((stdout, code), (f"eval_agent.py {__version__} (built from {self.commit})\n", 0))


class SmokeFromAnEmptyFolder(TempDirTestCase):
    """The CLI tests' smoke set, against the archive alone: no source tree near it, no PYTHONPATH."""

    @classmethod
    def setUpClass(cls) -> None:
        folder = tempfile.TemporaryDirectory()
        cls.addClassCleanup(folder.cleanup)
        cls.pyz = os.path.join(folder.name, "eval_agent.pyz")
        build(cls.pyz)

    def setUp(self) -> None:
        super().setUp()
        shutil.copy(CANONICAL_TASKS, os.path.join(self.tmp, "eval-tasks.json"))

    def run_pyz(self, *args: str, **env: str) -> tuple[str, str, int]:
        environ = clean_env(**env)
        del environ["EVAL_TASKS"]  # the task file in the working directory, as a user's repository has it
        environ.pop("PYTHONPATH", None)
        return run_cli(*args, env=environ, cwd=self.tmp, script=self.pyz)

    def test_a_stub_run(self) -> None:
        stdout, stderr, code = self.run_pyz("--html", "page.html")
        self.assertEqual((stdout.splitlines()[-1], stderr, code), ("10/10 PASS at 100% (gate 80%)", "", 0))
        self.assertEqual(self.read_json("eval-results.json")["manifest"]["taskFile"]["path"], "eval-tasks.json")
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "page.html")))

    def test_an_http_run_against_a_loopback_agent(self) -> None:
        agent = self.serve(canned)
        stdout, stderr, code = self.run_pyz("--agent-url", agent.url())  # as docs/ci.md shows it
        self.assertEqual((stdout.splitlines()[-1], stderr, code), ("10/10 PASS at 100% (gate 80%)", "", 0))
        self.assertEqual(len(agent.received), 10)

    def test_an_environments_worker_runs_from_the_archive(self) -> None:
        with open(os.path.join(self.tmp, "eval-tasks.json"), encoding="utf-8") as f:
            data = json.load(f)
        with open(os.path.join(self.tmp, "world.py"), "w", encoding="utf-8") as f:
            f.write("class World:\n    def __init__(self):\n        self.untouched = True\n")
        data["environment"] = {"module": "world.py", "class": "World"}
        data["tasks"][9]["expect"]["state"] = {"match": {"untouched": True}}  # a refusal: one step on the stub
        with open(os.path.join(self.tmp, "eval-tasks.json"), "w", encoding="utf-8") as f:
            json.dump(data, f)
        stdout, stderr, code = self.run_pyz("--task", data["tasks"][9]["id"])
        self.assertEqual((stdout.splitlines()[-1], stderr, code), ("1/1 PASS at 100% (gate 80%)", "", 0))
        trial = self.read_json("eval-results.json")["results"][0]["trialResults"][0]
        self.assertEqual(trial["finalState"], {"untouched": True})

    def test_validate_compare_and_merge(self) -> None:
        stdout, stderr, code = self.run_pyz("validate")
        self.assertEqual((stderr, code), ("", 0))
        self.assertIn("eval-tasks.json: valid, 10 tasks, 8 tools", stdout)
        for k in (1, 2):
            self.run_pyz("--shard", f"{k}/2", "--out", f"s{k}.json")
        _, stderr, code = self.run_pyz("merge", "s1.json", "s2.json", "--out", "whole.json")
        self.assertEqual((stderr, code), ("", 0))
        stdout, stderr, code = self.run_pyz("compare", "whole.json", "whole.json")
        self.assertEqual((stderr, code), ("", 0))
        self.assertTrue(stdout.endswith("10 still passing\n"), stdout)

    def test_it_runs_as_a_program_too(self) -> None:
        environ = clean_env()
        del environ["EVAL_TASKS"]
        proc = subprocess.run(
            [self.pyz, "--dry-run"], capture_output=True, text=True, env=environ, cwd=self.tmp, timeout=60
        )
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        self.assertTrue(proc.stdout.startswith("dry run: 10 of 10 tasks from eval-tasks.json"), proc.stdout)
