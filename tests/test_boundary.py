"""The boundaries: what the agent may see (never the answer key), and the one place exceptions become exit codes."""

from __future__ import annotations

import os
import random
import shutil
import signal
import threading
import time
import unittest
from unittest import mock

import eval_agent
from backends.stub import StubBackend
from harness.conversation import agent_request
from harness.records import (
    AgentRequest,
    BackendError,
    ExpectRefusal,
    ExpectTool,
    Reply,
    Result,
    Task,
    fields,
    replace,
)
from harness.running import INTERRUPTED, Ending, HandingOn, run_jobs
from harness.taskfile import load_task_file
from tests.support import (
    CANONICAL_TASKS,
    ROOT,
    SHIPPED_TASKS,
    InProcessAgent,
    TempDirTestCase,
    clean_env,
    run_cli,
)


class AnswerKeyBoundary(unittest.TestCase):
    def test_a_request_carries_the_conversation_so_far_and_nothing_else(self) -> None:
        self.assertEqual(
            list(fields(AgentRequest)),
            [
                "task_id",
                "prompt",
                "conversation_id",
                "history",
                "steps",
                "tools",
                "trial_id",
                "trial",
                "tool_server",
                "tools_called",  # whether the agent called the served tools yet: for a retry, never sent
                "model_proxy",  # where the trial's model calls go (EVAL_MODEL_PROXY): no part of the answer key
            ],
        )
        task = load_task_file(CANONICAL_TASKS).tasks[0]
        self.assertEqual(agent_request(task), AgentRequest(task_id=task.id, prompt=task.prompt))

    def test_the_stub_receives_no_expected_tool_or_argument_key(self) -> None:
        tasks = load_task_file(CANONICAL_TASKS).tasks
        stub = StubBackend()
        self.assertIsNone(run_jobs(stub, tasks, concurrency=4, on_result=lambda result: None).cut)
        self.assertEqual(sorted(request.task_id for request in stub.requests), sorted(task.id for task in tasks))
        requests = {request.task_id: request for request in stub.requests}
        for task in tasks:
            with self.subTest(task.id):
                self.assertEqual(requests[task.id].prompt, task.prompt)
                if isinstance(task.expect, ExpectTool):
                    self.assertNotIn(task.expect.tool, repr(requests[task.id]))
                    self.assertNotIn("requiredArgs", repr(requests[task.id]))

    def test_every_request_of_every_turn_and_step_is_the_same_whatever_the_task_expects(self) -> None:
        tasks = load_task_file(SHIPPED_TASKS).tasks
        answer_keys = [
            tasks,
            [replace(task, expect=ExpectRefusal(forbidden_tools=("imageman.asset.tag",))) for task in tasks],
            [replace(task, expect=ExpectTool("imageman.asset.get", ("assetId",))) for task in tasks],
        ]
        seen = []
        for variant in answer_keys:
            stub = StubBackend()
            self.assertIsNone(run_jobs(stub, variant, concurrency=1, on_result=lambda result: None).cut)
            # The conversation's and the trial's ids are drawn for each trial: the one part of a request that differs.
            seen.append([replace(request, conversation_id="", trial_id="") for request in stub.requests])
        self.assertGreater(len(seen[0]), len(tasks), "the conversations took more than one request each")
        self.assertEqual(seen[1], seen[0])
        self.assertEqual(seen[2], seen[0])


class CutShort(unittest.TestCase):
    def test_a_trial_finished_before_the_signal_is_recorded_though_not_yet_taken_from_its_worker(self) -> None:
        tasks = load_task_file(CANONICAL_TASKS).tasks[:2]
        both_done = threading.Barrier(3, timeout=10)

        class BothAnswer(InProcessAgent):
            def run(self, request: AgentRequest) -> Reply:
                reply = StubBackend().run(request)
                threading.Thread(target=both_done.wait, daemon=True).start()  # each trial counts itself done
                return reply

        recorded: list[str] = []

        def on_result(result: Result) -> None:
            recorded.append(result.task.id)
            if len(recorded) == 1:
                both_done.wait()  # the other trial is finished too, in its worker, not yet taken
                deadline = time.monotonic() + 10  # a worker ends once it handed its result on and found no more work
                while any(thread.name.endswith("(worker)") for thread in threading.enumerate()):
                    self.assertLess(time.monotonic(), deadline, "the pool's workers never ended")
                    time.sleep(0.01)
                raise KeyboardInterrupt  # the signal, heard while the first result was being recorded

        stop = run_jobs(BothAnswer(), tasks, concurrency=2, on_result=on_result).cut
        self.assertIsInstance(stop, KeyboardInterrupt)
        self.assertEqual(sorted(recorded), sorted(task.id for task in tasks))

    def test_a_ctrl_c_while_a_result_is_handed_on_lets_it_be_handed_on_whole(self) -> None:
        """The signal comes halfway through handing a result on (its entry to disk, say): the exception raised there
        lost the result, or wrote half of it; the run hears it once the result is handed on, and stops."""
        tasks = load_task_file(CANONICAL_TASKS).tasks[:4]
        previous = signal.signal(signal.SIGINT, eval_agent._interrupt)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        self.addCleanup(INTERRUPTED.clear)
        begun: list[str] = []
        handed: list[str] = []

        def on_result(result: Result) -> None:
            begun.append(result.task.id)
            if len(begun) == 2:
                os.kill(os.getpid(), signal.SIGINT)  # its handler runs in this thread, before the next line
            handed.append(result.task.id)

        for concurrency in (1, 2):
            with self.subTest(concurrency=concurrency):
                begun.clear(), handed.clear(), INTERRUPTED.clear()
                ending = run_jobs(StubBackend(), tasks, concurrency=concurrency, on_result=on_result)
                self.assertIsInstance(ending.cut, KeyboardInterrupt)
                self.assertEqual(handed, begun)

    def test_a_ctrl_c_after_the_last_result_is_handed_on_is_heard_not_raised_until_the_run_ignores_signals(
        self,
    ) -> None:
        """Between the jobs' end and the run ignoring signals, an exception raised by the handler would leave every
        trial unwritten: a first signal there is only heard."""
        tasks = load_task_file(CANONICAL_TASKS).tasks[:2]
        previous = signal.signal(signal.SIGINT, eval_agent._interrupt)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        self.addCleanup(INTERRUPTED.clear)
        self.addCleanup(setattr, HandingOn, "now", False)
        for concurrency in (1, 2):
            with self.subTest(concurrency=concurrency):
                INTERRUPTED.clear()
                ending = run_jobs(StubBackend(), tasks, concurrency=concurrency, on_result=lambda result: None)
                os.kill(os.getpid(), signal.SIGINT)  # as send() has not yet ignored signals
                self.assertEqual((ending.cut, INTERRUPTED.is_set()), (None, True))

    def test_a_ctrl_c_while_the_workers_start_stops_those_already_started(self) -> None:
        """The signal comes as the second of two workers starts: the first, already taking jobs, must stop too."""
        tasks = load_task_file(CANONICAL_TASKS).tasks
        asked: list[str] = []
        go = threading.Event()

        class Counting(InProcessAgent):
            def run(self, request: AgentRequest) -> Reply:
                asked.append(request.task_id)
                go.wait(timeout=10)  # the first job is under way when the signal comes
                return StubBackend().run(request)

        start, started = threading.Thread.start, []

        def start_then_ctrl_c(thread: threading.Thread) -> None:
            if started:
                raise KeyboardInterrupt
            started.append(thread)
            start(thread)

        with mock.patch.object(threading.Thread, "start", start_then_ctrl_c):
            ending = run_jobs(Counting(), tasks, concurrency=2, on_result=lambda result: None)
        self.assertIsInstance(ending.cut, KeyboardInterrupt)
        go.set()
        started[0].join(timeout=10)
        self.assertFalse(started[0].is_alive(), "the worker started before the signal never ended")
        self.assertLessEqual(len(asked), 1, "the worker went on with the jobs handed out ahead")

    def test_whatever_order_the_trials_end_in_and_whatever_cuts_them_each_is_handed_on_once_in_job_order(self) -> None:
        """A property, over seeded random runs: workers end their trials in any order; a bug in one, a rejected key
        or a Ctrl-C while a result is handed on cuts the run at a random point; never a trial twice or out of order."""
        tasks = load_task_file(CANONICAL_TASKS).tasks[:5]
        for seed in range(40):
            draw = random.Random(seed)
            runs, concurrency = draw.randint(1, 3), draw.randint(2, 6)
            jobs = [task for task in tasks for _ in range(runs)]
            cut = draw.choice(["none", "bug", "key", "ctrl-c"])
            at = draw.randrange(len(jobs))  # the job that raises or is rejected, or the hand-on that is interrupted
            with self.subTest(seed=seed, runs=runs, concurrency=concurrency, cut=cut, at=at):
                ending, handed, answered = self.random_run(draw, jobs, concurrency, cut, at)
                self.assertEqual(handed, sorted(set(handed)), "each trial once, in job order")
                self.assertLessEqual(set(handed), set(answered) | {at})
                if cut == "none":
                    self.assertIsNone(ending.cut)
                    self.assertEqual(handed, list(range(len(jobs))))
                elif cut == "bug":
                    self.assertIsInstance(ending.cut, RuntimeError)
                    self.assertNotIn(at, handed)
                elif cut == "key":  # what was still being sent is dropped: the rejection is the run's end
                    self.assertIsNone(ending.cut)
                    self.assertIsNotNone(ending.stopped_by)
                    self.assertIn(at, handed)
                else:
                    self.assertIsInstance(ending.cut, KeyboardInterrupt)
                    self.assertEqual(handed[: at + 1], list(range(at + 1)))

    def random_run(
        self, draw: random.Random, jobs: list[Task], concurrency: int, cut: str, at: int
    ) -> tuple[Ending, list[int], list[int]]:
        """How the jobs ended, the job numbers handed on, and those the agent answered, each after a random pause."""
        number = {(task.id, 1 + jobs[:index].count(task)): index for index, task in enumerate(jobs)}
        answered: list[int] = []
        lock = threading.Lock()

        class Random(InProcessAgent):
            def run(self, request: AgentRequest) -> Reply:
                index = number[(request.task_id, request.trial)]
                time.sleep(draw.random() / 500)  # finished in any order, the later jobs often first
                if index == at and cut == "bug":
                    raise RuntimeError("a bug")
                with lock:
                    answered.append(index)
                if index == at and cut == "key":
                    return Reply.failed(BackendError("reply:key-rejected", "401"))
                return Reply(text=str(index))

        handed: list[int] = []

        def on_result(result: Result) -> None:
            handed.append(int(result.reply.text) if result.reply.text else at)  # the rejected key's has no text
            if cut == "ctrl-c" and len(handed) == at + 1:
                raise KeyboardInterrupt

        return run_jobs(Random(), jobs, concurrency=concurrency, on_result=on_result), handed, answered


class PlantedBugs(TempDirTestCase):
    """A copy of the harness with a bug planted in one function: a bug is exit 4, and no results file claims a pass."""

    def plant(self, module: str, function: str) -> str:
        """Copy the harness into the temp folder, make `function` of `module` raise, and return the copy's script."""
        copy = os.path.join(self.tmp, "harness-copy")
        for name in ("harness", "backends"):
            shutil.copytree(
                os.path.join(ROOT, name), os.path.join(copy, name), ignore=shutil.ignore_patterns("__pycache__")
            )
        shutil.copy(os.path.join(ROOT, "eval_agent.py"), copy)
        path = os.path.join(copy, *module.split(".")) + ".py"
        with open(path, encoding="utf-8") as f:
            source = f.read()
        head = f"\ndef {function}("
        body = source.index(":\n", source.index(head)) + 2
        indent = " " * 4
        planted = source[:body] + f'{indent}raise RuntimeError("planted in {function}")\n' + source[body:]
        self.assertNotEqual(planted, source)
        with open(path, "w", encoding="utf-8") as f:
            f.write(planted)
        return os.path.join(copy, "eval_agent.py")

    def test_a_bug_in_scoring_exits_4_with_one_line_and_the_traceback_and_the_results_say_so(self) -> None:
        script = self.plant("harness.scoring", "score")
        stdout, stderr, code = run_cli("--out", "results.json", env=clean_env(), cwd=self.tmp, script=script)
        self.assertEqual(code, 4)
        lines = stderr.splitlines()
        self.assertEqual(lines[0], "eval_agent: internal error: RuntimeError: planted in score")
        self.assertEqual(lines[1], "Traceback (most recent call last):")
        self.assertIn("scoring.py", stderr)
        doc = self.read_json("results.json")
        self.assertEqual((doc["gatePassed"], doc["internalError"]), (False, "RuntimeError: planted in score"))
        self.assertIn("internal-error", doc["gateFailedBecause"])
        self.assertIn("gate not met: ", stdout.splitlines()[-1])
        self.assertIn("internal error", stdout.splitlines()[-1])

    def test_a_bug_in_a_report_exits_4_and_leaves_no_results_file(self) -> None:
        script = self.plant("harness.reporters.junit", "junit_xml")
        _, stderr, code = run_cli(
            "--out", "results.json", "--junit", "junit.xml", env=clean_env(), cwd=self.tmp, script=script
        )
        self.assertEqual(
            (code, stderr.splitlines()[0]), (4, "eval_agent: internal error: RuntimeError: planted in junit_xml")
        )
        self.assertEqual(
            sorted(os.listdir(self.tmp)),
            ["harness-copy"],
            "a report that failed must not leave a results file claiming a pass",
        )

    def test_a_bug_in_a_subcommand_exits_4_naming_it(self) -> None:
        script = self.plant("harness.subcommands.validate", "coverage")
        _, stderr, code = run_cli("validate", env=clean_env(), cwd=self.tmp, script=script)
        self.assertEqual(
            (code, stderr.splitlines()[0]),
            (4, "eval_agent validate: internal error: RuntimeError: planted in coverage"),
        )


if __name__ == "__main__":
    unittest.main()
