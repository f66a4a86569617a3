"""--runs auto end to end: the real CLI against a loopback agent scripted per task and trial; the trials each task
spent, why it stopped, the gate, and the same trials at any concurrency, on a replay, in a merge and in compare."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from backends.contract import parse_reply
from backends.stub import StubBackend
from harness.adaptive import Auto, sequential_test
from harness.records import AgentRequest, BackendError, Reply, Result, Task, replace
from harness.running import RATE_LIMITED, Ending
from harness.settling import InTaskOrderSettled, run_until_settled
from harness.taskfile import load_task_file
from tests.providers import openai_error
from tests.support import (
    CANNED,
    CANONICAL_TASKS,
    CLI_TIMEOUT,
    SCRIPT,
    InProcessAgent,
    LoopbackAgent,
    Received,
    TempDirTestCase,
    canonical_task_data,
    clean_env,
    run_cli,
    send_json,
    stop_signals_as_from_a_terminal,
)

RELIABLE, BROKEN, FLAKY = "asset-get-details", "asset-search-by-tag", "transform-bg-remove"
WRONG = {"toolCall": {"name": "imageman.asset.list", "args": {"path": "/"}}}  # no task of these three asks for it


def scripted(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """RELIABLE always right, BROKEN always wrong, FLAKY wrong on its 1st and 6th trials (of every 5th from 1): it
    passes 8 in 10, and no prefix of its trials settles the test before the 10th."""
    body = received.json
    wrong = body["taskId"] == BROKEN or (body["taskId"] == FLAKY and body["trial"] % 5 == 1)
    send_json(handler, WRONG if wrong else CANNED[body["prompt"]])


def trials(document: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Each task's trials as the results say them: statuses in order, and the adaptive entry."""
    return {
        entry["id"]: (tuple(trial["status"] for trial in entry["trialResults"]), entry["adaptive"])
        for entry in document["results"]
    }


class AutoRuns(TempDirTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.agent = self.serve(scripted)

    def run_auto(self, *args: str, out: str = "r.json", agent: LoopbackAgent | None = None) -> tuple[str, str, int]:
        url = (agent or self.agent).url()
        env = clean_env(EVAL_AGENT_URL=url)
        selected = ("--task", RELIABLE, "--task", BROKEN, "--task", FLAKY)
        return run_cli("--runs", "auto", *selected, "--out", os.path.join(self.tmp, out), *args, env=env)

    def test_each_task_stops_when_its_verdict_is_settled_and_says_why(self) -> None:
        stdout, stderr, code = self.run_auto("--gate", "0")
        self.assertEqual(code, 0, stderr)
        document = self.read_json("r.json")
        self.assertEqual(
            trials(document),
            {
                BROKEN: (("fail", "fail"), {"trials": 2, "stoppedBecause": "unreliable"}),
                RELIABLE: (("pass",) * 6, {"trials": 6, "stoppedBecause": "reliable"}),
                FLAKY: (("fail",) + ("pass",) * 4 + ("fail",) + ("pass",) * 4, {"trials": 10, "stoppedBecause": "max"}),
            },
        )
        self.assertEqual(
            document["adaptive"],
            {"max": 10, "confidence": 95.0, "reliability": 90.0, "trials": 18, "fixedTrials": 30, "saved": 12},
        )
        self.assertEqual(document["runs"], 10)
        self.assertEqual(len(self.agent.received), 18, "no trial sent that the test did not need")
        self.assertIn("14/18 trials PASS", stdout)
        self.assertIn("18 trials of --runs 10's 30 (40% saved)", stdout)
        self.assertIn("× auto runs (at most 10)", stdout)

    def test_an_early_stopped_failing_task_fails_the_gate_on_trials_and_on_pass_all(self) -> None:
        env = clean_env(EVAL_AGENT_URL=self.agent.url())
        two = ("--runs", "auto", "--task", RELIABLE, "--task", BROKEN)
        out = os.path.join(self.tmp, "p.json")
        stdout, stderr, code = run_cli(*two, "--gate-on", "pass-all", "--gate", "60", "--out", out, env=env)
        self.assertEqual(code, 1, stderr)
        document = self.read_json("p.json")
        self.assertEqual((document["passAll"], document["gateFailedBecause"]), (50.0, ["below-gate"]))
        self.assertIn("pass-all 50% (gate 60%)", stdout)
        stdout, stderr, code = run_cli(*two, "--gate", "80", "--out", os.path.join(self.tmp, "t.json"), env=env)
        self.assertEqual(code, 1, stderr)
        self.assertEqual(self.read_json("t.json")["gateFailedBecause"], ["below-gate"])  # 6 of 8 trials passed

    def test_a_categorys_rate_weighs_its_tasks_alike_in_every_report(self) -> None:
        data = canonical_task_data()
        for task in data["tasks"]:
            task["category"] = "assets"
        tasks = self.write_json("one-category.json", data)
        _, stderr, code = self.run_auto(
            "--tasks", tasks, "--gate", "0", "--summary-md", os.path.join(self.tmp, "s.md"),
            "--html", os.path.join(self.tmp, "r.html"),
        )  # fmt: skip
        self.assertEqual(code, 0, stderr)
        # 0/2, 6/6 and 8/10: 14 of 18 trials passed, the tasks at 60% on average, as the run's own rate
        document = self.read_json("r.json")
        self.assertEqual(
            (document["passRate"], document["byCategory"]),
            (60.0, {"assets": {"passed": 14, "total": 18, "passRate": 60.0}}),
        )
        with open(os.path.join(self.tmp, "s.md"), encoding="utf-8") as f:
            self.assertIn("| assets | 14 | 18 | 60% |", f.read())
        with open(os.path.join(self.tmp, "r.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn("14/18 trials passed, the tasks at 60% on average (gate 0%)", page)
        self.assertIn("14/18 trials (60% on average)</text>", page)
        self.assertNotIn("77.8%", page)
        _, stderr, code = run_cli(
            "report", os.path.join(self.tmp, "r.json"), "-o", os.path.join(self.tmp, "again.html")
        )
        self.assertEqual(code, 0, stderr)
        with open(os.path.join(self.tmp, "again.html"), encoding="utf-8") as f:
            self.assertIn("14/18 trials (60% on average)</text>", f.read())

    def test_settings_under_which_the_test_cannot_settle_a_task_within_max_are_warned_of(self) -> None:
        table = [
            (
                ("--reliability", "99.5"),
                "eval_agent: warning: --runs auto:10 at 99.5% reliability and 95% confidence cannot settle a task"
                " reliable within 10 trials: a task that passes runs all 10\n",
            ),
            (
                ("--runs", "auto:1"),
                "eval_agent: warning: --runs auto:1 at 90% reliability and 95% confidence cannot settle a task reliable"
                " within 1 trial: a task that passes runs all 1\n"
                "eval_agent: warning: --runs auto:1 at 90% reliability and 95% confidence cannot settle a task"
                " unreliable within 1 trial: a task that fails runs all 1\n",
            ),
            ((), ""),
        ]
        for args, warned in table:
            with self.subTest(args=args):
                _, stderr, code = self.run_auto("--task", RELIABLE, "--dry-run", *args)
                self.assertEqual((stderr, code), (warned, 0))

    def test_the_same_trials_and_verdicts_at_any_concurrency(self) -> None:
        _, stderr, _ = self.run_auto("--concurrency", "1", out="one.json")
        self.assertEqual(stderr.count("error"), 0, stderr)
        one = sorted((r.json["taskId"], r.json["trial"]) for r in self.agent.received)
        other = self.serve(scripted)
        self.run_auto("--concurrency", "8", out="eight.json", agent=other)
        eight = sorted((r.json["taskId"], r.json["trial"]) for r in other.received)
        self.assertEqual(one, eight)
        self.assertEqual(trials(self.read_json("one.json")), trials(self.read_json("eight.json")))
        self.assertGreater(other.peak_in_flight, 1, "the tasks ran side by side")

    def test_a_replay_of_a_recorded_run_spends_the_same_trials_to_the_same_verdicts(self) -> None:
        cassette = os.path.join(self.tmp, "c.jsonl")
        _, stderr, code = self.run_auto("--record", cassette, "--gate", "0", out="recorded.json")
        self.assertEqual(code, 0, stderr)
        sent = len(self.agent.received)
        _, stderr, code = self.run_auto("--replay", cassette, "--gate", "0", "--concurrency", "8", out="replayed.json")
        self.assertEqual(code, 0, stderr)
        self.assertEqual(len(self.agent.received), sent, "nothing sent on a replay")
        recorded, replayed = self.read_json("recorded.json"), self.read_json("replayed.json")
        self.assertEqual(trials(recorded), trials(replayed))
        self.assertEqual(recorded["adaptive"], replayed["adaptive"])
        self.assertEqual(replayed["replayMissed"], [])

    def test_auto_shards_merge_to_the_unsharded_runs_verdict(self) -> None:
        self.run_auto("--gate-on", "pass-all", "--gate", "30", out="whole.json")
        for k in (1, 2):
            self.run_auto("--gate-on", "pass-all", "--gate", "30", "--shard", f"{k}/2", out=f"s{k}.json")
        shards = [os.path.join(self.tmp, f"s{k}.json") for k in (1, 2)]
        merged = os.path.join(self.tmp, "merged.json")
        _, stderr, code = run_cli("merge", *shards, "--out", merged)
        self.assertEqual(code, 0, stderr)
        whole, document = self.read_json("whole.json"), self.read_json("merged.json")
        keys = ("passAll", "passRate", "passAllK", "byCategory", "adaptive", "flaky", "gatePassed", "gateFailedBecause")
        for key in (*keys, "passed", "total", "runs"):
            with self.subTest(key=key):
                self.assertEqual(document[key], whole[key])
        self.assertEqual(trials(document), trials(whole))

    def test_shards_of_different_auto_settings_are_not_merged(self) -> None:
        self.run_auto("--shard", "1/2", out="s1.json")
        self.run_auto("--shard", "2/2", "--confidence", "99", out="s2.json")
        shards = [os.path.join(self.tmp, f"s{k}.json") for k in (1, 2)]
        _, stderr, code = run_cli("merge", *shards, "--out", os.path.join(self.tmp, "m.json"))
        self.assertEqual(code, 2, stderr)
        self.assertIn(
            "its --runs auto (max 10, confidence 99, reliability 90) differs from "
            f"{shards[0]}'s (max 10, confidence 95, reliability 90): not shards of one run",
            stderr,
        )

    def test_compare_reads_whatever_trials_each_side_ran(self) -> None:
        env = clean_env(EVAL_AGENT_URL=self.agent.url())
        baseline = os.path.join(self.tmp, "fixed.json")
        selected = ("--task", RELIABLE, "--task", BROKEN, "--task", FLAKY)
        run_cli("--runs", "3", *selected, "--out", baseline, env=env)
        _, stderr, code = self.run_auto("--baseline", baseline, "--gate", "0", out="auto.json")
        self.assertEqual(code, 0, stderr)
        document = self.read_json("auto.json")
        self.assertEqual(document["regressed"], [])
        out = os.path.join(self.tmp, "compared.json")
        stdout, stderr, code = run_cli("compare", baseline, os.path.join(self.tmp, "auto.json"), "--out", out)
        self.assertEqual(code, 0, stderr)
        # no one drop of 3 then and 10 now is the rule: each task ran its own trials
        self.assertEqual(self.read_json("compared.json")["runs"], {"then": 3, "now": 10, "significantDrop": None})
        self.assertIn("setting changed: runs 3 → auto:10 (95% confidence, 90% reliability)", stdout)
        self.assertRegex(stdout, rf"{BROKEN}\s+0/3 → 0/2")
        self.assertRegex(stdout, rf"{FLAKY}\s+2/3 → 8/10")
        self.assertIn("significance: each task's drop weighed on the trials it ran", stdout)
        # Calls per run: per task, a fixed side's runs; an auto side's mean trials per task (18 over 3: 6)
        self.assertRegex(stdout, r"imageman\.transform\.bgRemove\s+2 → 8\s+0\.67 → 1\.33\s+0\.22 → 0\.44")

    def test_a_task_settled_reliable_in_the_baseline_and_unreliable_now_regressed(self) -> None:
        def half(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.json["taskId"] == RELIABLE and received.json["trial"] % 2 == 0:
                send_json(handler, WRONG)  # passes every other trial now: 3/6 settles it unreliable
            else:
                scripted(received, handler)

        self.run_auto("--gate", "0", out="base.json")
        baseline = os.path.join(self.tmp, "base.json")
        stdout, stderr, code = self.run_auto("--gate", "0", "--baseline", baseline, agent=self.serve(half))
        self.assertEqual(code, 1, stderr)
        document = self.read_json("r.json")
        self.assertEqual(trials(document)[RELIABLE][1], {"trials": 6, "stoppedBecause": "unreliable"})
        self.assertEqual((document["regressed"], document["gateFailedBecause"]), ([RELIABLE], ["regression"]))
        self.assertRegex(stdout, rf"REGRESSED\s+{RELIABLE}\s+6/6 → 3/6 \(settled reliable, now unreliable\)")

    def test_a_fixed_runs_trials_are_settled_by_the_auto_sides_test_either_way_round(self) -> None:
        def last_wrong(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.json["taskId"] == RELIABLE and received.json["trial"] == 10:
                send_json(handler, WRONG)
            else:
                scripted(received, handler)

        def half(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.json["taskId"] == RELIABLE and received.json["trial"] in (3, 5, 6):
                send_json(handler, WRONG)
            else:
                scripted(received, handler)

        # a fixed baseline's 9/10, its first 6 settling it reliable, against 3/6 now: p = 0.12 by Fisher's test
        env = clean_env(EVAL_AGENT_URL=self.serve(last_wrong).url())
        fixed = os.path.join(self.tmp, "fixed.json")
        run_cli("--runs", "10", "--task", RELIABLE, "--out", fixed, env=env)
        stdout, stderr, code = self.run_auto("--task", RELIABLE, "--baseline", fixed, agent=self.serve(half))
        self.assertEqual(code, 1, stderr)
        self.assertEqual(self.read_json("r.json")["regressed"], [RELIABLE])
        self.assertRegex(stdout, rf"REGRESSED\s+{RELIABLE}\s+9/10 → 3/6 \(settled reliable, now unreliable\)")
        # an auto baseline's 6/6 against a fixed run's 7/10, whose first 6 settle it unreliable
        self.run_auto("--task", RELIABLE, out="auto.json")
        env = clean_env(EVAL_AGENT_URL=self.serve(half).url())
        baseline, out = os.path.join(self.tmp, "auto.json"), os.path.join(self.tmp, "now.json")
        stdout, stderr, code = run_cli(
            "--runs", "10", "--task", RELIABLE, "--baseline", baseline, "--out", out, env=env
        )
        self.assertEqual(code, 1, stderr)
        self.assertRegex(stdout, rf"REGRESSED\s+{RELIABLE}\s+6/6 → 7/10 \(settled reliable, now unreliable\)")

    def started(self, agent: LoopbackAgent, *args: str) -> subprocess.Popen[str]:
        """A run of --runs auto against the agent, started as from a terminal, writing cut.json: for a test to stop."""
        proc = subprocess.Popen(
            [sys.executable, "-S", SCRIPT, "--runs", "auto", *args, "--out", os.path.join(self.tmp, "cut.json")],
            env=clean_env(EVAL_AGENT_URL=agent.url()),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=stop_signals_as_from_a_terminal,
        )
        self.addCleanup(proc.kill)
        return proc

    def test_ctrl_c_writes_the_trials_so_far_and_says_the_task_was_cut_short(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.json["trial"] == 4:
                held.release.wait(CLI_TIMEOUT)  # hold the 4th trial until the test ends
            scripted(received, handler)

        held = self.serve(respond)
        proc = self.started(held, "--task", RELIABLE, "--concurrency", "1")
        held.wait_for_requests(4)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=CLI_TIMEOUT)
        self.assertEqual(proc.returncode, 130, stderr)
        self.assertIn("interrupted after 3 of at most 10 trials", stderr)
        document = self.read_json("cut.json")
        self.assertTrue(document["interrupted"])
        self.assertEqual(trials(document), {RELIABLE: (("pass",) * 3, {"trials": 3, "stoppedBecause": "cut-short"})})
        self.assertEqual(document["adaptive"]["saved"], 0, "the run cut the task short, not its test")
        self.assertIn("3 trials of --runs 10's 10 (0% saved)", stdout)

    def test_sigterm_mid_run_at_concurrency_8_writes_the_trials_so_far_each_cut_short_task_marked(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.json["trial"] >= 3:
                held.release.wait(CLI_TIMEOUT)  # every task's 3rd trial on is held until the test ends
            scripted(received, handler)

        held = self.serve(respond)
        proc = self.started(held, "--task", RELIABLE, "--task", FLAKY, "--concurrency", "8")
        # Each task's first 2 trials, taken before what follows them was sent: RELIABLE's next 3 (after 2 passes, 3
        # fails would settle it), FLAKY's next 2 (after a fail and a pass, 2 fails would)
        held.wait_for_requests(9)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=CLI_TIMEOUT)
        self.assertEqual(proc.returncode, 130, stderr)
        self.assertIn("interrupted after 4 of at most 20 trials", stderr)
        document = self.read_json("cut.json")
        self.assertTrue(document["interrupted"])
        self.assertEqual(
            trials(document),
            {
                RELIABLE: (("pass", "pass"), {"trials": 2, "stoppedBecause": "cut-short"}),
                FLAKY: (("fail", "pass"), {"trials": 2, "stoppedBecause": "cut-short"}),
            },
        )
        self.assertEqual(document["adaptive"]["saved"], 0)

    def test_a_rejected_key_stops_the_run_as_in_a_fixed_run(self) -> None:
        def rejecting(received: Received, handler: BaseHTTPRequestHandler) -> None:
            status, error = openai_error(401, "Incorrect API key provided")
            send_json(handler, error, status)

        fake = self.serve(rejecting)
        env = clean_env(
            OPENAI_BASE_URL=fake.url("/v1"), EVAL_MODEL="fake-model", OPENAI_API_KEY="sk-GHIJKLMNOPQRSTUVWX"
        )
        out = os.path.join(self.tmp, "rejected.json")
        _, stderr, code = run_cli("--runs", "auto", "--concurrency", "1", "--out", out, env=env)
        self.assertEqual(code, 3, stderr)
        self.assertEqual(len(fake.received), 1, "no trial sent after the key was rejected")
        document = self.read_json("rejected.json")
        (entry,) = document["results"]
        self.assertEqual(entry["adaptive"], {"trials": 1, "stoppedBecause": "cut-short"})
        self.assertEqual(len(document["notRun"]), 9)


class Progress(TempDirTestCase):
    def test_a_terminal_is_shown_the_trials_so_far_of_the_most_there_may_be(self) -> None:
        leader, follower = pty.openpty()
        self.addCleanup(os.close, leader)
        proc = subprocess.Popen(
            [sys.executable, "-S", SCRIPT, "--runs", "auto", "--out", os.path.join(self.tmp, "r.json")],
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=follower,
        )
        os.close(follower)
        proc.communicate(timeout=CLI_TIMEOUT)
        terminal = b""
        while chunk := _read(leader):
            terminal += chunk
        self.assertEqual(proc.returncode, 0)
        # the stub passes every task: 6 trials each settle it, of the 10 each might have had
        self.assertIn("\r\x1b[K[60/≤100] 60 pass · 0 fail · 0 error · 0:00 elapsed".encode(), terminal)
        self.assertNotIn(b"left", terminal)


def _read(fd: int) -> bytes:
    """What a pseudo-terminal's leader has, b"" once its follower is closed."""
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""


class RateLimited(InProcessAgent):
    """An agent whose every request ends rate-limited, unsent."""

    def run(self, request: AgentRequest) -> Reply:
        raise BackendError(RATE_LIMITED, "the rate limit lets the next request go in 900s", attempts=0)


class Waves(TempDirTestCase):
    def test_a_wave_of_rate_limited_endings_stops_an_auto_run_as_a_fixed_one(self) -> None:
        tasks = load_task_file(CANONICAL_TASKS).tasks
        handed: list[Result] = []
        ending = run_until_settled(RateLimited(), tasks, sequential_test(Auto()), 3, handed.append)
        self.assertEqual((ending.cut, ending.rate_limited), (None, True))
        self.assertGreaterEqual(len(handed), 3, "the wave's endings are handed on")
        self.assertLess(len(handed), 2 * len(tasks), "and the rest not sent")

    def test_a_wave_is_as_many_endings_in_a_row_as_may_be_in_flight_fewer_than_the_concurrency_for_few_tasks(
        self,
    ) -> None:
        # One task at concurrency 8 has 2 trials in flight at the start: it was settled unreliable by its 2 rate-limited
        # endings, and the run never saw 8 in a row, so nothing said the rate limits had stopped it
        (task,) = [task for task in load_task_file(CANONICAL_TASKS).tasks if task.id == RELIABLE]
        handed: list[Result] = []
        ending = run_until_settled(RateLimited(), [task], sequential_test(Auto()), 8, handed.append)
        self.assertEqual((ending.cut, ending.rate_limited, ending.wave, len(handed)), (None, True, 2, 2))

    def test_a_run_of_few_tasks_says_the_rate_limits_stopped_it(self) -> None:
        spent = {"Retry-After": "1", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "15m0s"}
        agent = self.serve(lambda received, handler: send_json(handler, {"error": "slow down"}, 429, spent))
        env = clean_env(EVAL_AGENT_URL=agent.url(), EVAL_TIMEOUT="5")
        out = os.path.join(self.tmp, "r.json")
        stdout, stderr, code = run_cli(
            "--runs", "auto", "--task", RELIABLE, "--concurrency", "8", "--out", out, env=env
        )
        self.assertEqual(code, 1, stdout + stderr)
        self.assertEqual(self.read_json("r.json")["gateFailedBecause"], ["below-gate", "rate-limited"])
        self.assertIn(
            "stopped after 2 of at most 10 trials: 2 requests in a row ended rate-limited (reply:rate-limited)", stderr
        )


class Mixed(InProcessAgent):
    """The stub's answers, but wrong for every third task and on every fifth trial of the next: tasks settled
    reliable, unreliable and at MAX; counts the requests it was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.stub = StubBackend()
        self.sent: Counter[str] = Counter()
        self.lock = threading.Lock()

    def run(self, request: AgentRequest) -> Reply:
        with self.lock:
            self.sent[request.task_id] += 1
        kind = int(request.task_id.rsplit("-", 1)[1]) % 3
        if kind == 1 or (kind == 2 and request.trial % 5 == 1):
            return parse_reply(WRONG)
        return self.stub.run(request)


class Scheduling(TempDirTestCase):
    def settle(self, tasks: list[Task], concurrency: int) -> tuple[Counter[str], dict[str, tuple[str, ...]]]:
        """The requests each task was sent and its trials' statuses, run in a thread waited for within a bound."""
        agent, handed, test = Mixed(), {}, sequential_test(Auto())

        def on_task(task: Task, trials: Sequence[Result]) -> None:
            handed[task.id] = tuple(trial.outcome.status for trial in trials)

        in_order = InTaskOrderSettled(tasks, test, on_task)
        endings: list[Ending] = []
        run = threading.Thread(
            target=lambda: endings.append(run_until_settled(agent, tasks, test, concurrency, in_order.add)), daemon=True
        )
        run.start()
        run.join(CLI_TIMEOUT)
        self.assertFalse(run.is_alive(), f"the run at concurrency {concurrency} stalled")
        self.assertEqual((endings[0].cut, in_order.finish()), (None, []))
        return agent.sent, handed

    def test_thousands_of_tasks_at_concurrency_8_settle_as_at_1_sent_no_trial_their_tests_did_not_need(self) -> None:
        canonical = load_task_file(CANONICAL_TASKS).tasks
        tasks = [replace(canonical[n % len(canonical)], id=f"task-{n}") for n in range(2000)]
        settled = {}
        for concurrency in (1, 8):
            sent, settled[concurrency] = self.settle(tasks, concurrency)
            self.assertEqual(sent, Counter({task_id: len(trials) for task_id, trials in settled[concurrency].items()}))
        self.assertEqual(settled[1], settled[8])
        self.assertEqual({len(trials) for trials in settled[8].values()}, {2, 6, 10})
