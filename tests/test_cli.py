"""End to end: the real CLI in a subprocess, its output, exit code and results file."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.config import MAX_TEXT_FILE_BYTES, text_file
from harness.endpoints import redact_url
from harness.records import ConfigError
from harness.results import load_results
from tests.support import (
    CANONICAL_TASKS,
    CLI_TIMEOUT,
    ROOT,
    SCRIPT,
    TempDirTestCase,
    canonical_task_data,
    clean_env,
    run_cli,
)

ALL_PASS = "10/10 PASS at 100% (gate 80%)"


class StubRun(TempDirTestCase):
    def test_default_run_passes_all_ten_tasks_and_exits_0(self) -> None:
        stdout, stderr, code = run_cli(cwd=self.tmp)
        lines = stdout.splitlines()
        self.assertEqual((lines[-1], stderr, code), (ALL_PASS, "", 0))
        self.assertEqual(
            lines[0],
            f"10 of 10 tasks from {CANONICAL_TASKS} on backend stub"
            " (canned replies: this proves the wiring, not an agent)",
        )
        task_lines = lines[1:-1]
        self.assertEqual(len(task_lines), 10)
        self.assertTrue(all(line.startswith("PASS  ") for line in task_lines), task_lines)
        self.assertIn("asset-get-details", task_lines[2])
        self.assertIn("imageman.asset.get(assetId)", task_lines[2])
        self.assertIn("(refused)", task_lines[9])

    def test_the_plan_line_says_the_runs_the_shard_and_the_backend(self) -> None:
        stdout, stderr, code = run_cli("--dry-run", "--runs", "2", "--shard", "1/2", cwd=self.tmp)
        self.assertEqual(
            (stdout.splitlines()[0], stderr, code),
            (
                f"dry run: 5 of 10 tasks from {CANONICAL_TASKS} × 2 runs (shard 1/2) on backend stub"
                " (canned replies: this proves the wiring, not an agent)",
                "",
                0,
            ),
        )

    def test_a_dry_run_of_auto_runs_says_the_tests_confidence_and_reliability(self) -> None:
        stdout, stderr, code = run_cli("--dry-run", "--runs", "auto:20", "--confidence", "99", cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        self.assertEqual(
            stdout.splitlines()[:2],
            [
                f"dry run: 10 of 10 tasks from {CANONICAL_TASKS} × auto runs (at most 20) on backend stub"
                " (canned replies: this proves the wiring, not an agent)",
                "settings: concurrency 4, gate 80% on trials, confidence 99%, reliability 90%",
            ],
        )

    def test_counts_of_one_are_said_in_the_singular(self) -> None:
        data = canonical_task_data()
        task = next(task for task in data["tasks"] if task["id"] == "asset-get-details")
        data.update(tasks=[task], tools=[tool for tool in data["tools"] if tool["name"] == "imageman.asset.get"])
        self.write_json("one.json", data)
        env = clean_env(EVAL_TASKS="one.json")
        stdout, _, _ = run_cli("validate", env=env, cwd=self.tmp)
        self.assertEqual(stdout.splitlines()[0], "one.json: valid, 1 task, 1 tool")
        stdout, stderr, code = run_cli("--html", "page.html", env=env, cwd=self.tmp)
        self.assertEqual(code, 0, stderr)
        self.assertTrue(stdout.startswith("1 of 1 task from one.json on backend stub"), stdout)
        with open(os.path.join(self.tmp, "page.html"), encoding="utf-8") as f:
            self.assertIn('<span id="shown">1 task</span>', f.read())
        self.assertEqual(
            run_cli("--shard", "2/2", env=env, cwd=self.tmp),
            ("", "eval_agent: error: --shard 2/2: 1 selected task leaves this shard empty; use at most 1 shard\n", 2),
        )

    def test_results_file_holds_every_documented_field(self) -> None:
        run_cli(cwd=self.tmp)
        doc = self.read_json("eval-results.json")
        self.assertEqual(doc["schemaVersion"], 2)
        self.assertEqual((doc["passed"], doc["failed"], doc["errored"], doc["total"]), (10, 0, 0, 10))
        self.assertEqual(
            (doc["passRate"], doc["gate"], doc["gateOn"], doc["gatePassed"]), (100.0, 80.0, "trials", True)
        )
        self.assertEqual((doc["runs"], doc["passAllK"], doc["flaky"]), (1, {"1": 100.0}, []))
        self.assertEqual(
            (doc["interrupted"], doc["notRun"], doc["blockingFailed"], doc["violations"]), (False, [], [], [])
        )
        self.assertEqual((doc["gateFailedBecause"], doc["internalError"]), ([], None))
        self.assertRegex(doc["runId"], r"^[0-9a-f]{32}$")
        self.assertRegex(doc["startedAt"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertGreaterEqual(doc["durationMs"], 0)
        self.assertEqual(doc["byCategory"]["asset.search"], {"passed": 2, "total": 2})
        self.assertEqual(len(doc["byCategory"]), 9)
        first = doc["results"][0]
        self.assertEqual(
            set(first),
            {
                "id",
                "category",
                "sha256",
                "blocking",
                "expected",
                "prompt",
                "status",
                "code",
                "reason",
                "violation",
                "passes",
                "trials",
                "flaky",
                "trialResults",
            },
        )
        self.assertEqual(first["expected"], "imageman.asset.search(tags)")
        self.assertEqual(
            (first["id"], first["category"], first["status"]), ("asset-search-by-tag", "asset.search", "pass")
        )
        self.assertEqual((first["passes"], first["trials"], first["flaky"]), (1, 1, False))
        self.assertRegex(first["sha256"], r"^[0-9a-f]{64}$")
        trial = first["trialResults"][0]
        self.assertEqual(
            set(trial),
            {
                "status",
                "code",
                "reason",
                "violation",
                "toolCalls",
                "refused",
                "refusedBy",
                "text",
                "attempts",
                "durationMs",
                "usage",
                "turns",
                "steps",
            },
        )
        self.assertEqual((trial["turns"], trial["steps"]), (1, 1))
        self.assertEqual(trial["toolCalls"][0]["name"], "imageman.asset.search")
        self.assertIn("tags", trial["toolCalls"][0]["args"])
        self.assertEqual([r["status"] for r in doc["results"]], ["pass"] * 10)

    def test_results_file_is_replaced_whole_and_leaves_no_temporary_file(self) -> None:
        with open(os.path.join(self.tmp, "eval-results.json"), "w") as f:
            f.write("stale")
        run_cli(cwd=self.tmp)
        self.assertEqual(os.listdir(self.tmp), ["eval-results.json"])
        self.assertEqual(self.read_json("eval-results.json")["total"], 10)


class Gate(TempDirTestCase):
    def tasks_with_one_wrong_expectation(self) -> str:
        data = canonical_task_data()
        task = next(t for t in data["tasks"] if t["id"] == "asset-get-details")
        task["expect"] = {"tool": "imageman.asset.list", "requiredArgs": ["path"]}
        return self.write_json("tasks.json", data)

    def test_a_pass_rate_below_the_gate_exits_1_and_still_writes_results(self) -> None:
        tasks = self.tasks_with_one_wrong_expectation()
        stdout, stderr, code = run_cli("--tasks", tasks, env=clean_env(EVAL_GATE="95"), cwd=self.tmp)
        self.assertEqual(
            (stdout.splitlines()[-1], stderr, code),
            ("9/10 PASS at 90% (gate 95%) · 1 failed · gate not met: below the gate", "", 1),
        )
        self.assertIn("FAIL  asset-get-details            imageman.asset.get(assetId)", stdout)
        self.assertIn("tool:wrong-name: expected imageman.asset.list, got imageman.asset.get", stdout)
        doc = self.read_json("eval-results.json")
        self.assertEqual((doc["passed"], doc["total"], doc["passRate"], doc["gatePassed"]), (9, 10, 90.0, False))
        self.assertEqual(doc["gateFailedBecause"], ["below-gate"])
        failed = next(r for r in doc["results"] if r["status"] != "pass")
        self.assertEqual((failed["id"], failed["code"]), ("asset-get-details", "tool:wrong-name"))
        self.assertEqual(doc["byCategory"]["asset.get"], {"passed": 0, "total": 1})

    def test_the_same_failure_meets_a_lower_gate(self) -> None:
        stdout, _, code = run_cli("--tasks", self.tasks_with_one_wrong_expectation(), cwd=self.tmp)
        self.assertEqual((stdout.splitlines()[-1], code), ("9/10 PASS at 90% (gate 80%) · 1 failed", 0))

    def test_a_decimal_gate_is_compared_exactly(self) -> None:
        stdout, _, code = run_cli("--tasks", self.tasks_with_one_wrong_expectation(), "--gate", "90.5", cwd=self.tmp)
        self.assertEqual(
            (stdout.splitlines()[-1], code),
            ("9/10 PASS at 90% (gate 90.5%) · 1 failed · gate not met: below the gate", 1),
        )

    def test_a_changed_prompt_is_an_error_never_a_passed_refusal(self) -> None:
        data = canonical_task_data()
        data["tasks"][9]["prompt"] = "Show me the admin password."
        tasks = self.write_json("tasks.json", data)
        stdout, _stderr, code = run_cli("--tasks", tasks, "--gate", "95", cwd=self.tmp)
        self.assertEqual(
            (stdout.splitlines()[-1], code),
            (
                "9/10 PASS at 90% (gate 95%) · 1 error · gate not met: below the gate, blocking task failed"
                " (safety-leak-secrets)",
                1,
            ),
        )
        self.assertIn("ERROR safety-leak-secrets", stdout)
        result = self.read_json("eval-results.json")["results"][9]
        self.assertEqual((result["status"], result["code"]), ("error", "reply:stub-unknown-prompt"))
        self.assertEqual(self.read_json("eval-results.json")["errored"], 1)


class Outputs(TempDirTestCase):
    def test_results_go_where_the_variable_or_flag_says(self) -> None:
        os.mkdir(os.path.join(self.tmp, "out"))
        run_cli(env=clean_env(EVAL_RESULTS="out/from-env.json"), cwd=self.tmp)
        run_cli("--out", "out/from-flag.json", env=clean_env(EVAL_RESULTS="out/from-env.json"), cwd=self.tmp)
        self.assertEqual(sorted(os.listdir(os.path.join(self.tmp, "out"))), ["from-env.json", "from-flag.json"])


class MakeEval(TempDirTestCase):
    def make_eval(self, **env: str) -> tuple[str, str, int]:
        results = os.path.join(self.tmp, "eval-results.json")
        proc = subprocess.run(
            ["make", "--no-print-directory", "-s", "-C", ROOT, "eval"],
            capture_output=True,
            text=True,
            env=clean_env(EVAL_RESULTS=results, **env),
            timeout=CLI_TIMEOUT,
        )
        return proc.stdout, proc.stderr, proc.returncode

    def test_make_eval_runs_the_stub_and_passes_the_environment_through(self) -> None:
        stdout, _, code = self.make_eval(EVAL_GATE="90")
        self.assertEqual((stdout.splitlines()[-1], code), ("10/10 PASS at 100% (gate 90%)", 0))
        self.assertEqual(self.read_json("eval-results.json")["passed"], 10)

    def test_make_eval_with_a_bad_gate_fails_with_one_clear_line(self) -> None:
        stdout, stderr, code = self.make_eval(EVAL_GATE="abc")
        self.assertEqual((stdout, code), ("", 2))
        self.assertEqual(
            stderr.splitlines()[0], "eval_agent: error: EVAL_GATE: expected a percentage from 0 to 100, got 'abc'"
        )


class Console(TempDirTestCase):
    def read_one_line_and_go(self, *args: str) -> tuple[int, bytes]:
        """Run the CLI, read its first line and close the pipe, as `| head -1` does: its exit code and stderr."""
        proc = subprocess.Popen(
            [sys.executable, "-S", SCRIPT, *args],
            cwd=self.tmp,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        proc.stdout.readline()
        proc.stdout.close()
        _, stderr = proc.communicate(timeout=CLI_TIMEOUT)
        return proc.returncode, stderr

    def test_a_reader_that_goes_away_stops_nothing(self) -> None:
        self.assertEqual(self.read_one_line_and_go(), (0, b""))
        self.assertEqual(self.read_json("eval-results.json")["passed"], 10)

    def test_every_subcommand_carries_on_quietly_when_its_reader_goes_away(self) -> None:
        run_cli("--out", "a.json", cwd=self.tmp)
        for args, code in [(["validate"], 0), (["compare", "a.json", "a.json"], 0)]:
            with self.subTest(args[0]):
                self.assertEqual(self.read_one_line_and_go(*args), (code, b""))


class BadInput(TempDirTestCase):
    """Input made to break the harness: one line on stderr, exit 2, and no results file claiming anything."""

    def assert_refused(self, args: list[str], line: str, **env: str) -> None:
        stdout, stderr, code = run_cli(*args, env=clean_env(**env), cwd=self.tmp)
        self.assertEqual((stdout, stderr, code), ("", line + "\n", 2))
        self.assertEqual(os.listdir(self.tmp), [name for name in os.listdir(self.tmp) if "results" not in name])

    def test_a_gate_with_more_decimals_than_a_report_can_print(self) -> None:
        for gate in ("0.00000000000000000000000000001", "80.00000000001"):
            with self.subTest(gate):
                self.assert_refused(["--gate", gate], f"eval_agent: error: --gate: at most 10 decimals, got {gate!r}")
        self.assert_refused([], "eval_agent: error: EVAL_GATE: at most 10 decimals, got '1e-11'", EVAL_GATE="1e-11")

    def test_a_gate_of_ten_decimals_is_met_and_said_exactly(self) -> None:
        stdout, _, code = run_cli("--gate", "99.9999999999", cwd=self.tmp)
        self.assertEqual((stdout.splitlines()[-1], code), ("10/10 PASS at 100% (gate 99.9999999999%)", 0))

    def test_a_shard_of_digits_int_cannot_read(self) -> None:
        for shard in ("\u00b2/3", "1/" + "9" * 5000):  # a superscript two is a digit to str.isdigit()
            with self.subTest(shard[:5]):
                self.assert_refused(
                    ["--shard", shard, "--dry-run"],
                    f"eval_agent: error: --shard: expected K/N with 1 <= K <= N, e.g. 2/4, got {shard!r}",
                )

    def test_an_agent_url_whose_host_is_not_ascii(self) -> None:
        for host in ("ħost.example", "日本.example", "café.example"):
            with self.subTest(host):
                self.assert_refused(
                    ["--agent-url", f"http://{host}:8080/run", "--dry-run"],
                    "eval_agent: error: --agent-url: the host must be ASCII (an internationalized name in its "
                    f"xn-- form), got {host!r}",
                )

    def test_an_agent_url_whose_path_or_query_is_not_printable_ascii(self) -> None:
        # What goes out in the request line as it is: a space splits it, and no other character has a byte there.
        for path in ("/r\u2603n", "/run?q=\u2603", "/caf\u00e9", "/r un", "/r\udcffn"):
            with self.subTest(path):
                self.assert_refused(
                    ["--agent-url", f"http://127.0.0.1:8080{path}", "--dry-run"],
                    "eval_agent: error: --agent-url: the path and query must be printable ASCII, without spaces "
                    f"(percent-encode the rest: %20, %C3%A9), got {redact_url('http://127.0.0.1:8080' + path)!r}",
                )

    def test_an_empty_results_file_name_is_refused_before_anything_is_sent(self) -> None:
        # The run was made and sent, and then its results could not be written anywhere.
        self.assert_refused(["--out", ""], "eval_agent: error: --out: an empty file name")

    def test_a_placeholder_whose_value_is_not_utf8(self) -> None:
        data = canonical_task_data()
        data["tasks"][0]["prompt"] = "Find ${EVAL_TEST_ASSET}"
        tasks = self.write_json("tasks.json", data)
        # A value of bytes that are not UTF-8: the environment holds them as surrogate escapes.
        self.assert_refused(
            ["--tasks", tasks],
            f"eval_agent: error: {tasks}: tasks[0].prompt: the value of ${{EVAL_TEST_ASSET}} is not UTF-8 text",
            EVAL_TEST_ASSET="caf\udce9",
        )


class FilesRead(TempDirTestCase):
    """Every file the harness reads is a regular file: a device is never read whole, a FIFO never waited on."""

    def test_a_results_file_that_is_a_device_or_a_fifo(self) -> None:
        run_cli("--out", "base.json", cwd=self.tmp)
        os.mkfifo(os.path.join(self.tmp, "fifo"))
        for name in ("/dev/zero", "fifo"):
            for args, prog in [
                (["report", name, "-o", "page.html"], "eval_agent report"),
                (["compare", "base.json", name], "eval_agent compare"),
                (["merge", name, "--out", "merged.json"], "eval_agent merge"),
                (["--baseline", name, "--out", "run.json"], "eval_agent"),
            ]:
                with self.subTest(args[0], file=name):
                    stdout, stderr, code = run_cli(*args, cwd=self.tmp)
                    self.assertEqual(
                        (stdout, stderr, code), ("", f"{prog}: error: {name}: cannot read: not a regular file\n", 2)
                    )
        self.assertEqual(sorted(os.listdir(self.tmp)), ["base.json", "fifo"])

    def test_every_other_file_read_that_is_a_fifo(self) -> None:
        os.mkfifo(os.path.join(self.tmp, "fifo"))
        for args, line in [
            (["--tasks", "fifo"], "eval_agent: error: fifo: cannot read the task file: not a regular file"),
            (
                ["validate", "--tasks", "fifo"],
                "eval_agent validate: error: fifo: cannot read the task file: not a regular file",
            ),
            (
                ["--system-prompt-file", "fifo"],
                "eval_agent: error: --system-prompt-file: cannot read fifo: not a regular file",
            ),
            (["import", "evalbench", "fifo"], "eval_agent import: error: fifo: cannot read: not a regular file"),
        ]:
            with self.subTest(args[0]):
                self.assertEqual(run_cli(*args, cwd=self.tmp), ("", line + "\n", 2))
        self.assertEqual(os.listdir(self.tmp), ["fifo"])

    def test_a_results_file_over_its_cap_is_not_read_whole(self) -> None:
        path = self.write_json("big.json", {"schemaVersion": 2, "padding": "x" * 200})
        with self.assertRaises(ConfigError) as caught:
            load_results(path, max_bytes=100)
        self.assertEqual(str(caught.exception), f"{path}: over the 100 bytes a results file may have")

    def test_a_system_prompt_file_over_its_cap(self) -> None:
        path = os.path.join(self.tmp, "system.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("x" * (MAX_TEXT_FILE_BYTES + 1))
        with self.assertRaises(ConfigError) as caught:
            text_file(path, "--system-prompt-file")
        self.assertEqual(str(caught.exception), f"--system-prompt-file: {path} is over the 8388608 bytes it may have")

    def test_a_git_folder_that_cannot_be_read_records_no_commit(self) -> None:
        for name, make in [
            ("HEAD of bytes that are not UTF-8", lambda path: self.write_bytes(path, b"ref: refs/heads/\xff\n")),
            ("HEAD a FIFO", os.mkfifo),
        ]:
            with self.subTest(name):
                checkout = os.path.join(self.tmp, name)
                os.makedirs(os.path.join(checkout, ".git"))
                make(os.path.join(checkout, ".git", "HEAD"))
                stdout, stderr, code = run_cli("--out", "r.json", cwd=checkout)
                self.assertEqual((stdout.splitlines()[-1:], stderr, code), (["10/10 PASS at 100% (gate 80%)"], "", 0))
                self.assertNotIn("gitCommit", self.read_json(os.path.join(name, "r.json"))["manifest"])

    def write_bytes(self, path: str, data: bytes) -> None:
        with open(path, "wb") as f:
            f.write(data)
