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


def read_outputs(text: str) -> list[tuple[str, str]]:
    """GITHUB_OUTPUT as the runner reads it: lines split at CR or LF, each `name=value`, or `name<<DELIMITER`, the
    value's lines, then the delimiter alone on a line."""
    lines = iter(line for line in re.split(r"\r\n|\r|\n", text) if line)
    found = []
    for line in lines:
        equals, heredoc = line.find("="), line.find("<<")
        if equals > 0 and (heredoc < 0 or equals < heredoc):
            found.append((line[:equals], line[equals + 1 :]))
            continue
        if heredoc <= 0:
            raise AssertionError(f"the runner refuses this line of GITHUB_OUTPUT: {line!r}")
        name, delimiter = line[:heredoc], line[heredoc + 2 :]
        value = []
        for value_line in lines:
            if value_line == delimiter:
                break
            value.append(value_line)
        else:
            raise AssertionError(f"GITHUB_OUTPUT: no closing {delimiter!r} for {name}")
        found.append((name, "\n".join(value)))
    return found


class ActionMetadata(TempDirTestCase):
    def test_every_input_reaches_the_step_and_the_step_reads_every_one(self) -> None:
        with open(os.path.join(ROOT, "action", "run.sh"), encoding="utf-8") as f:
            script = f.read()
        handed = {name for name in ACTION["inputs"] if name not in OWN_INPUTS}
        self.assertEqual(STEP["env"], {env_name(name): f"${{{{ inputs.{name} }}}}" for name in handed})
        for name in handed:
            self.assertIn(f"${{{env_name(name)}:-", script, name)
        self.assertEqual(set(ACTION["outputs"]), {"pass-rate", "gate-passed", "results-path", "exit-code"})

    def test_no_input_handed_to_the_harness_has_a_default_so_the_steps_env_is_not_overridden(self) -> None:
        # GitHub passes an input's default as if it were given: run.sh could not tell it from the user's own value.
        defaults = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items() if name not in OWN_INPUTS}
        self.assertEqual(defaults, dict.fromkeys(defaults, ""))

    def test_the_upload_runs_whatever_the_outcome_and_takes_only_the_files_this_run_wrote(self) -> None:
        upload = next(step for step in ACTION["runs"]["steps"] if "upload-artifact" in step.get("uses", ""))
        self.assertEqual(upload["if"], "always() && inputs.artifact-name != '' && steps.eval.outputs.written != ''")
        self.assertEqual(upload["with"]["path"], "${{ steps.eval.outputs.written }}")


class ActionStep(TempDirTestCase):
    """action/run.sh as the runner runs it: bash, in the working directory, the inputs as INPUT_* variables."""

    def run_step(self, step_env: dict[str, str] | None = None, **inputs: str) -> tuple[int, dict[str, str], str]:
        """The step's exit code, its outputs (each written once), and the job summary; step_env: the step's `env`."""
        if not os.path.exists(os.path.join(self.tmp, "eval-tasks.json")):
            shutil.copy(CANONICAL_TASKS, os.path.join(self.tmp, "eval-tasks.json"))
        given = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
        given.update({name.replace("_", "-"): value for name, value in inputs.items()})
        outputs, summary = os.path.join(self.tmp, "github-output"), os.path.join(self.tmp, "step-summary.md")
        if os.path.exists(outputs):
            os.remove(outputs)
        env = clean_env(GITHUB_ACTION_PATH=ROOT, GITHUB_OUTPUT=outputs, GITHUB_STEP_SUMMARY=summary)
        del env["EVAL_TASKS"]
        env.update(step_env or {})
        env.update({env_name(name): value for name, value in given.items() if name not in OWN_INPUTS})
        proc = subprocess.run(
            ["bash", os.path.join(ROOT, "action", "run.sh")],
            cwd=self.tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.stderr = proc.stderr
        with open(outputs, encoding="utf-8", newline="") as f:
            self.raw_outputs = f.read()
        found = read_outputs(self.raw_outputs)
        self.assertEqual(len(found), len(dict(found)), f"an output written twice: {found}")
        step_summary = ""
        if os.path.exists(summary):
            with open(summary, encoding="utf-8") as f:
                step_summary = f.read()
        return proc.returncode, dict(found), step_summary

    def test_the_stub_meets_the_gate(self) -> None:
        code, outputs, summary = self.run_step()
        self.assertEqual(code, 0)
        results = os.path.join(self.tmp, "eval-results.json")
        written = [results, os.path.join(self.tmp, "eval-junit.xml"), os.path.join(self.tmp, "eval-report.html")]
        self.assertEqual(
            outputs,
            {
                "exit-code": "0",
                "results-path": results,
                "pass-rate": "100.0",
                "gate-passed": "true",
                "written": "\n".join(written),
            },
        )
        for path in written:
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
        code, outputs, _ = self.run_step(agent_url=agent.url(), gate="90", html="none")
        self.assertEqual(
            (code, outputs["exit-code"], outputs["gate-passed"], outputs["pass-rate"]), (1, "1", "false", "50.0")
        )
        self.assertEqual(
            outputs["written"].splitlines(),
            [os.path.join(self.tmp, name) for name in ("eval-results.json", "eval-junit.xml")],
        )

    def test_an_agent_that_is_down_exits_3(self) -> None:
        code, outputs, _ = self.run_step(agent_url=self.refusing_url(), runs="1")
        self.assertEqual((code, outputs["gate-passed"]), (3, "false"))
        self.assertTrue(outputs["results-path"], "the results of an unreachable run are still written")

    def test_bad_input_exits_2_and_no_earlier_run_s_file_is_taken_for_this_run_s_or_uploaded(self) -> None:
        for name in ("eval-results.json", "eval-junit.xml", "eval-report.html"):
            with open(os.path.join(self.tmp, name), "w", encoding="utf-8") as f:
                f.write('{"passRate": 100.0, "gatePassed": true}')
        code, outputs, _ = self.run_step(gate="abc")
        self.assertEqual(
            (code, outputs),
            (2, {"exit-code": "2", "results-path": "", "pass-rate": "", "gate-passed": "false", "written": ""}),
        )

    def test_an_empty_input_leaves_each_setting_to_the_steps_env(self) -> None:
        os.mkdir(os.path.join(self.tmp, "out"))
        shutil.copy(CANONICAL_TASKS, os.path.join(self.tmp, "mine.json"))
        step_env = {
            "EVAL_TASKS": "mine.json",
            "EVAL_RESULTS": "out/r.json",
            "EVAL_JUNIT": "out/j.xml",
            "EVAL_HTML": "out/page.html",
            "EVAL_GATE": "100",
            "EVAL_TASK_GLOB": "asset-*",
        }
        code, outputs, _ = self.run_step(step_env)
        self.assertEqual((code, outputs["exit-code"], outputs["pass-rate"]), (0, "0", "100.0"))
        self.assertEqual(sorted(os.listdir(os.path.join(self.tmp, "out"))), ["j.xml", "page.html", "r.json"])
        self.assertEqual(
            sorted(os.listdir(self.tmp)), ["eval-tasks.json", "github-output", "mine.json", "out", "step-summary.md"]
        )
        results = self.read_json("out/r.json")
        self.assertEqual((results["gate"], results["total"]), (100.0, 5), results["manifest"])
        self.assertEqual(results["manifest"]["taskFile"]["path"], "mine.json")

    def test_an_input_given_wins_over_the_steps_env_and_none_turns_a_report_off(self) -> None:
        step_env = {"EVAL_RESULTS": "env.json", "EVAL_JUNIT": "env.xml", "EVAL_HTML": "env.html"}
        code, outputs, _ = self.run_step(step_env, results="input.json", junit="none", html="none")
        self.assertEqual((code, outputs["written"]), (0, os.path.join(self.tmp, "input.json")))
        self.assertEqual(
            sorted(os.listdir(self.tmp)), ["eval-tasks.json", "github-output", "input.json", "step-summary.md"]
        )

    def test_a_line_break_in_an_input_cannot_forge_an_output(self) -> None:
        def worse(received: Any, handler: Any) -> None:
            send_json(handler, {"text": "No idea."})

        agent = self.serve(worse)
        for forged in ("j.xml\nexit-code=0", "j.xml\rexit-code=0", "j.xml\ngate-passed<<EOF\ntrue\nEOF"):
            with self.subTest(forged):
                code, outputs, _ = self.run_step(agent_url=agent.url(), junit=forged)
                message = f"eval_agent action: error: EVAL_JUNIT: a file name with a line break, {forged!r}\n"
                self.assertEqual((code, self.stderr), (2, message))
                self.assertEqual(
                    outputs,
                    {"exit-code": "2", "results-path": "", "pass-rate": "", "gate-passed": "false", "written": ""},
                )
        self.assertEqual(agent.received, [])

    def test_a_file_name_the_upload_would_read_as_a_pattern_is_refused(self) -> None:
        # upload-artifact reads each path as a glob: j*.xml would upload every j...xml there, older ones included.
        for name in ("j*.xml", "j?.xml", "j[1].xml"):
            with self.subTest(name):
                code, outputs, _ = self.run_step(html=name)
                message = (
                    f"eval_agent action: error: EVAL_HTML: a file name the upload would read as a pattern, {name!r}\n"
                )
                self.assertEqual((code, self.stderr, outputs["written"]), (2, message, ""))

    def test_a_list_of_files_is_written_with_a_random_delimiter(self) -> None:
        delimiters = []
        for _ in range(2):
            code, outputs, _ = self.run_step()
            self.assertEqual((code, len(outputs["written"].splitlines())), (0, 3))
            (delimiter,) = re.findall(r"^written<<(.*)$", self.raw_outputs, re.M)
            delimiters.append(delimiter)
        self.assertNotEqual(*delimiters)
        self.assertTrue(all(len(delimiter) >= 32 for delimiter in delimiters), delimiters)


def workflow_example(path: str) -> str:
    """The workflow example of a Markdown file of the repository."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    example = re.search(r"```yaml\n(# \.github/workflows/agent-eval\.yml in your repository\n.*?)```", text, re.S)
    if example is None:
        raise AssertionError(f"no workflow example in {path}")
    return example.group(1)


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
        examples = [workflow_example(path) for path in ("README.md", os.path.join("docs", "ci.md"))]
        self.assertEqual(examples[0], examples[1], "the README's workflow example is docs/ci.md's")
        workflow = examples[0]
        self.assertIn("uses: OWNER/agent-eval-harness@v1", workflow)
        self.assertEqual(
            self.actionlint_in_a_repository(workflow.replace("OWNER/agent-eval-harness@v1", "./")), ("", 0)
        )

    def test_the_gitlab_recipe_is_a_job_with_a_junit_report(self) -> None:
        with open(os.path.join(ROOT, "docs", "ci.md"), encoding="utf-8") as f:
            ci = f.read()
        recipe = yaml.safe_load(re.search(r"```yaml\n(agent-eval:\n.*?)```", ci, re.S).group(1))
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
