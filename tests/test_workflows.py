"""The CI workflows pass actionlint, and the linter is live: it catches a broken workflow."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import unittest

from tests.support import ROOT, TempDirTestCase

ACTIONLINT = os.path.join(os.path.dirname(sys.executable), "actionlint")
WORKFLOWS = sorted(glob.glob(os.path.join(ROOT, ".github", "workflows", "*.yml")))


def actionlint(*paths: str) -> tuple[str, int]:
    if not os.path.exists(ACTIONLINT):
        raise AssertionError(f"no {ACTIONLINT}: run `make test`, which installs the test tools into .venv")
    proc = subprocess.run([ACTIONLINT, "-no-color", *paths], capture_output=True, text=True, timeout=120)
    return proc.stdout + proc.stderr, proc.returncode


class Workflows(TempDirTestCase):
    def test_there_are_the_nightly_and_the_test_workflow(self) -> None:
        self.assertEqual([os.path.basename(path) for path in WORKFLOWS], ["agent-eval.yml", "test.yml"])

    def test_every_workflow_passes_actionlint(self) -> None:
        self.assertEqual(actionlint(*WORKFLOWS), ("", 0))

    def test_the_commented_sharded_alternative_passes_actionlint_too(self) -> None:
        with open(os.path.join(ROOT, ".github", "workflows", "agent-eval.yml"), encoding="utf-8") as f:
            text = f.read()
        head = text[: text.index("jobs:\n")]
        commented = text[text.index("  # eval-shard:") :].splitlines()
        jobs = "\n".join(line.replace("  # ", "  ", 1) if line.startswith("  # ") else "" for line in commented)
        sharded = os.path.join(self.tmp, "agent-eval-sharded.yml")
        with open(sharded, "w", encoding="utf-8") as f:
            f.write(head + "jobs:\n" + jobs + "\n")
        self.assertIn("eval_agent.py merge", jobs)
        self.assertEqual(actionlint(sharded), ("", 0))

    def test_actionlint_catches_a_broken_workflow(self) -> None:
        broken = os.path.join(self.tmp, "broken.yml")
        with open(broken, "w") as f:
            f.write(
                "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nope }}\n"
            )
        output, code = actionlint(broken)
        self.assertEqual(code, 1)
        self.assertIn('property "nope" is not defined', output)


if __name__ == "__main__":
    unittest.main()
