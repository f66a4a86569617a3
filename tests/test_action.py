"""The GitHub Action (action.yml): its step runs as the runner runs it, with the inputs, GITHUB_OUTPUT and
GITHUB_STEP_SUMMARY as environment variables, against the stub and loopback agents; and a workflow that uses it, the
README's example included, passes actionlint with its inputs checked against action.yml."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

import yaml

from tests.support import CANONICAL_TASKS, ROOT, TempDirTestCase, canned, clean_env, send_json
from tests.test_workflows import ACTIONLINT

with open(os.path.join(ROOT, "action.yml"), encoding="utf-8") as _f:
    ACTION = yaml.safe_load(_f)
STEP = next(step for step in ACTION["runs"]["steps"] if step.get("id") == "eval")
# Inputs the composite steps use themselves rather than hand to the harness.
OWN_INPUTS = {"python-version", "artifact-name", "working-directory"}


def env_name(name: str) -> str:
    return "INPUT_" + name.upper().replace("-", "_")


class ActionMetadata(TempDirTestCase):
    def test_every_input_reaches_the_step_and_the_step_reads_every_one(self) -> None:
        with open(os.path.join(ROOT, "action", "run.sh"), encoding="utf-8") as f:
            script = f.read()
        handed = {name for name in ACTION["inputs"] if name not in OWN_INPUTS}
        self.assertEqual(STEP["env"], {env_name(name): f"${{{{ inputs.{name} }}}}" for name in handed})
        for name in handed:
            self.assertIn(f"${{{env_name(name)}:-", script, name)
        self.assertEqual(set(ACTION["outputs"]), {"pass-rate", "gate-passed", "results-path", "exit-code"})

    def test_the_upload_runs_whatever_the_outcome(self) -> None:
        upload = next(step for step in ACTION["runs"]["steps"] if "upload-artifact" in step.get("uses", ""))
        self.assertTrue(upload["if"].startswith("always()"))


class ActionStep(TempDirTestCase):
    """action/run.sh as the runner runs it: bash, in the working directory, the inputs as INPUT_* variables."""

    def run_step(self, **inputs: str) -> tuple[int, dict[str, str], str]:
        shutil.copy(CANONICAL_TASKS, os.path.join(self.tmp, "eval-tasks.json"))
        given = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
        given.update({name.replace("_", "-"): value for name, value in inputs.items()})
        outputs, summary = os.path.join(self.tmp, "github-output"), os.path.join(self.tmp, "step-summary.md")
        env = clean_env(GITHUB_ACTION_PATH=ROOT, GITHUB_OUTPUT=outputs, GITHUB_STEP_SUMMARY=summary)
        del env["EVAL_TASKS"]
        env.update({env_name(name): value for name, value in given.items() if name not in OWN_INPUTS})
        proc = subprocess.run(
            ["bash", os.path.join(ROOT, "action", "run.sh")],
            cwd=self.tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        with open(outputs, encoding="utf-8") as f:
            written = dict(line.split("=", 1) for line in f.read().splitlines())
        step_summary = ""
        if os.path.exists(summary):
            with open(summary, encoding="utf-8") as f:
                step_summary = f.read()
        return proc.returncode, written, step_summary

    def test_the_stub_meets_the_gate(self) -> None:
        code, outputs, summary = self.run_step()
        self.assertEqual(code, 0)
        results = os.path.join(self.tmp, "eval-results.json")
        self.assertEqual(
            outputs,
            {
                "exit-code": "0",
                "junit-path": os.path.join(self.tmp, "eval-junit.xml"),
                "html-path": os.path.join(self.tmp, "eval-report.html"),
                "results-path": results,
                "pass-rate": "100.0",
                "gate-passed": "true",
            },
        )
        for path in (results, outputs["junit-path"], outputs["html-path"]):
            self.assertTrue(os.path.exists(path), path)
        self.assertTrue(summary.startswith("## Agent eval: 10/10 PASS at 100% (gate 80%)"), summary)
        self.assertIn("`eval-report.html`", summary)

    def test_a_worse_agent_fails_the_gate_with_exit_1(self) -> None:
        def worse(received: Any, handler: Any) -> None:
            if received.json["taskId"].startswith("asset-"):
                send_json(handler, {"text": "No idea."})
            else:
                canned(received, handler)

        agent = self.serve(worse)
        code, outputs, _ = self.run_step(agent_url=agent.url(), gate="90", html="")
        self.assertEqual(
            (code, outputs["exit-code"], outputs["gate-passed"], outputs["pass-rate"]), (1, "1", "false", "50.0")
        )
        self.assertEqual(outputs["html-path"], "")

    def test_an_agent_that_is_down_exits_3(self) -> None:
        code, outputs, _ = self.run_step(agent_url=self.refusing_url(), runs="1")
        self.assertEqual((code, outputs["gate-passed"]), (3, "false"))
        self.assertTrue(outputs["results-path"], "the results of an unreachable run are still written")

    def test_bad_input_exits_2_and_an_earlier_results_file_is_not_taken_for_this_run(self) -> None:
        with open(os.path.join(self.tmp, "eval-results.json"), "w", encoding="utf-8") as f:
            f.write('{"passRate": 100.0, "gatePassed": true}')
        os.utime(os.path.join(self.tmp, "eval-results.json"), (1_000_000_000, 1_000_000_000))
        code, outputs, _ = self.run_step(gate="abc")
        self.assertEqual(
            (code, outputs["exit-code"], outputs["results-path"], outputs["pass-rate"], outputs["gate-passed"]),
            (2, "2", "", "", "false"),
        )


class WorkflowsUsingTheAction(TempDirTestCase):
    def actionlint_in_a_repository(self, workflow: str) -> tuple[str, int]:
        """actionlint on a workflow in a repository of its own whose root holds this action.yml, as `./`."""
        subprocess.run(["git", "init", "-q", self.tmp], check=True, timeout=60)
        shutil.copy(os.path.join(ROOT, "action.yml"), self.tmp)
        os.makedirs(os.path.join(self.tmp, ".github", "workflows"))
        with open(os.path.join(self.tmp, ".github", "workflows", "eval.yml"), "w", encoding="utf-8") as f:
            f.write(workflow)
        proc = subprocess.run([ACTIONLINT, "-no-color"], cwd=self.tmp, capture_output=True, text=True, timeout=120)
        return proc.stdout + proc.stderr, proc.returncode

    def test_the_readme_example_passes_actionlint_with_its_inputs_checked(self) -> None:
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        example = re.search(r"```yaml\n(# \.github/workflows/agent-eval\.yml in your repository\n.*?)```", readme, re.S)
        self.assertIsNotNone(example, "the README's workflow example")
        workflow = example.group(1)
        self.assertIn("uses: OWNER/agent-eval-harness@v1", workflow)
        self.assertEqual(
            self.actionlint_in_a_repository(workflow.replace("OWNER/agent-eval-harness@v1", "./")), ("", 0)
        )

    def test_the_readme_gitlab_recipe_is_a_job_with_a_junit_report(self) -> None:
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        recipe = yaml.safe_load(re.search(r"```yaml\n(agent-eval:\n.*?)```", readme, re.S).group(1))
        job = recipe["agent-eval"]
        self.assertEqual(job["artifacts"]["reports"]["junit"], "eval-junit.xml")
        self.assertIn("--junit eval-junit.xml", job["script"][0])

    def test_a_misspelt_input_is_caught(self) -> None:
        workflow = (
            "on: push\njobs:\n  eval:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n"
            "      - uses: ./\n        with:\n          agent-urll: http://example.com/run\n"
        )
        output, code = self.actionlint_in_a_repository(workflow)
        self.assertEqual(code, 1)
        self.assertIn('input "agent-urll" is not defined in action "Agent eval harness"', output)
