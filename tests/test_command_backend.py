"""The command backend with a real script agent: the contract on stdin and stdout, a folder per task, hangs, crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from harness.records import AgentRequest
from tests.support import (
    CLI_TIMEOUT,
    DATA,
    SCRIPT,
    TempDirTestCase,
    backend_for,
    canonical_task,
    canonical_task_data,
    clean_env,
    run_cli,
    stop_signals_as_from_a_terminal,
)

AGENT = os.path.join(DATA, "agents", "script_agent.py")


class CommandBackend(TempDirTestCase):
    def run_command(self, mode: str, *args: str, **env: str) -> tuple[str, str, int]:
        command = f"{sys.executable} {AGENT} {mode}"
        return run_cli(*args, env=clean_env(EVAL_BACKEND="command", EVAL_AGENT_CMD=command, **env), cwd=self.tmp)

    def test_the_canonical_tasks_pass_through_a_script_agent(self) -> None:
        stdout, stderr, code = self.run_command("correct")
        self.assertEqual((stdout.splitlines()[-1], stderr, code), ("10/10 PASS at 100% (gate 80%)", "", 0))
        self.assertEqual(self.read_json("eval-results.json")["manifest"]["backendSettings"]["command"], sys.executable)

    def test_each_task_gets_the_http_body_on_stdin_in_a_fresh_temporary_folder(self) -> None:
        self.run_command("where", "--category", "asset.*", EVAL_AGENT_BODY='{"workspaceId": "eval"}')
        doc = self.read_json("eval-results.json")
        seen = [json.loads(entry["trialResults"][0]["text"]) for entry in doc["results"]]
        folders = [item["cwd"] for item in seen]
        self.assertEqual(len(set(folders)), len(folders), "a fresh folder per task")
        self.assertTrue(all(not folder.startswith(self.tmp) and not os.path.exists(folder) for folder in folders))
        self.assertEqual(
            set(seen[0]["request"]), {"prompt", "taskId", "runId", "trialId", "trial", "attempt", "workspaceId"}
        )
        self.assertEqual(seen[0]["request"]["taskId"], "asset-search-by-tag")

    def test_a_command_that_is_not_utf8_is_refused_before_anything_runs(self) -> None:
        # A byte that is not UTF-8, as the environment holds it: the manifest, which is JSON, could not say it.
        stdout, stderr, code = self.run_command("correct \udcff")
        self.assertEqual((stdout, stderr, code), ("", "eval_agent: error: EVAL_AGENT_CMD: not UTF-8 text\n", 2))
        self.assertEqual(os.listdir(self.tmp), [])

    def test_a_hanging_agent_is_killed_with_its_children_at_the_timeout(self) -> None:
        pid_file = os.path.join(self.tmp, "child.pid")
        started = time.monotonic()
        _stdout, _, _code = self.run_command(
            "hang", "--category", "safety", EVAL_TIMEOUT="1", AGENT_CHILD_PID_FILE=pid_file
        )
        self.assertLess(time.monotonic() - started, 30, "the run must not wait for the agent's own sleep")
        result = self.read_json("eval-results.json")["results"][0]
        self.assertEqual((result["status"], result["code"]), ("error", "reply:timeout"))
        self.assertEqual(result["reason"], "no reply within 1s; the command and its children were killed")
        with open(pid_file) as f:
            child = int(f.read())
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(_alive(child), "the agent's child outlived the timeout")

    def test_a_child_left_holding_stdout_neither_holds_the_run_nor_outlives_it(self) -> None:
        pid_dir = os.path.join(self.tmp, "pids")
        os.mkdir(pid_dir)
        started = time.monotonic()
        _stdout, stderr, code = self.run_command(
            "background", "--category", "safety", "--runs", "3", "--concurrency", "1", AGENT_CHILD_PID_DIR=pid_dir
        )
        self.assertLess(time.monotonic() - started, 30, "the run must not wait for the children's stdout")
        self.assertEqual((code, stderr), (0, ""))
        trials = self.read_json("eval-results.json")["results"][0]["trialResults"]
        self.assertEqual([trial["status"] for trial in trials], ["pass"] * 3)
        children = [int(name) for name in os.listdir(pid_dir)]
        self.assertEqual(len(children), 3)
        self.assertEqual([child for child in children if _outlives(child)], [], "a child outlived its command")

    def test_the_reply_is_what_the_command_printed_before_it_exited_not_what_a_daemon_it_left_writes_later(
        self,
    ) -> None:
        pid_dir = os.path.join(self.tmp, "pids")
        os.mkdir(pid_dir)
        try:
            _stdout, stderr, code = self.run_command("daemon", "--category", "safety", AGENT_CHILD_PID_DIR=pid_dir)
        finally:
            for name in os.listdir(pid_dir):  # out of the group's reach: ended here, by its id
                os.kill(int(name), signal.SIGKILL)
        self.assertEqual((code, stderr), (0, ""))
        trial = self.read_json("eval-results.json")["results"][0]["trialResults"][0]
        self.assertEqual((trial["status"], trial["text"]), ("pass", "Left a daemon running."))

    def test_a_command_that_never_reads_a_request_larger_than_a_pipe_holds_is_killed_at_the_timeout(self) -> None:
        data = canonical_task_data()
        data["tasks"] = [{**data["tasks"][0], "prompt": "Find it. " * 20_000}]  # 180 KB: past what a pipe buffers
        command = f"{sys.executable} -c 'import time; time.sleep(20)'"  # busy (loading a model, say), stdin unread
        env = clean_env(EVAL_AGENT_CMD=command, EVAL_TASKS=self.write_json("tasks.json", data), EVAL_TIMEOUT="1")
        _stdout, stderr, code = run_cli(env=env, cwd=self.tmp)
        self.assertEqual((code, stderr), (1, ""))
        trial = self.read_json("eval-results.json")["results"][0]["trialResults"][0]
        self.assertEqual(
            (trial["code"], trial["reason"]),
            ("reply:timeout", "no reply within 1s; the command and its children were killed"),
        )

    def test_a_commands_output_is_read_when_the_run_holds_more_than_1024_files_open(self) -> None:
        # A wide run (many commands, tool workers, connections at once, under a raised open-files limit) gives its
        # pipes file descriptors past 1023, where select() takes none.
        opened = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
        try:
            backend = backend_for({"EVAL_AGENT_CMD": f"{sys.executable} {AGENT} correct"})
            reply = backend.run(AgentRequest("asset-get-details", canonical_task("asset-get-details").prompt))
        finally:
            for fd in opened:
                os.close(fd)
        self.assertEqual([call.name for call in reply.tool_calls], ["imageman.asset.get"])

    def test_ctrl_c_ends_the_running_command_and_its_children(self) -> None:
        for concurrency in ("1", "2"):  # the run's own thread, and workers
            with self.subTest(concurrency=concurrency):
                pid_file = os.path.join(self.tmp, f"child-{concurrency}.pid")
                env = clean_env(
                    EVAL_AGENT_CMD=f"{sys.executable} {AGENT} hang",
                    EVAL_CONCURRENCY=concurrency,
                    AGENT_CHILD_PID_FILE=pid_file,
                )
                proc = subprocess.Popen(
                    [sys.executable, "-S", SCRIPT, "--category", "safety"],
                    env=env,
                    cwd=self.tmp,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    preexec_fn=stop_signals_as_from_a_terminal,
                )
                deadline = time.monotonic() + CLI_TIMEOUT
                while not os.path.exists(pid_file) or not os.path.getsize(pid_file):
                    self.assertLess(time.monotonic(), deadline, "the agent never started its child")
                    time.sleep(0.05)
                proc.send_signal(signal.SIGINT)
                self.assertEqual(proc.wait(timeout=CLI_TIMEOUT), 130)
                with open(pid_file) as f:
                    self.assertFalse(_outlives(int(f.read())), "the agent's child outlived the run")

    def test_a_crashing_agent_is_an_error_with_the_last_lines_of_its_stderr(self) -> None:
        self.run_command("crash", "--category", "safety")
        result = self.read_json("eval-results.json")["results"][0]
        self.assertEqual((result["status"], result["code"]), ("error", "reply:command-exit"))
        self.assertEqual(
            result["reason"],
            "the command exited with 1: loading model... | Traceback (most recent call last): | RuntimeError: no GPU",
        )

    def test_a_crash_with_a_long_stderr_line_quotes_it_clipped_like_an_http_body(self) -> None:
        self.run_command("stderr-flood", "--category", "safety")
        result = self.read_json("eval-results.json")["results"][0]
        self.assertEqual(
            (result["code"], result["reason"]), ("reply:command-exit", f"the command exited with 1: {'E' * 197}...")
        )

    def test_output_is_capped_like_an_http_body(self) -> None:
        self.run_command("flood", "--category", "safety", EVAL_MAX_RESPONSE_BYTES="100000")
        result = self.read_json("eval-results.json")["results"][0]
        self.assertEqual(
            (result["code"], result["reason"]), ("reply:too-large", "the command printed over 100000 bytes")
        )


def _outlives(pid: int) -> bool:
    """Whether the process is still alive after a bounded wait for it to die."""
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"  # a zombie is dead, waiting for its reaper
    except OSError:
        return False
