"""Trial identity: every request carries its trial's id, the trial's number and the attempt, so that an agent that runs
its own tools can tell a retry from a new trial; a request the agent may have started on is sent again only when asked.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any

from harness.records import Result
from harness.running import run_task
from tests.support import (
    DATA,
    Received,
    TempDirTestCase,
    backend_for,
    canonical_task,
    canonical_task_data,
    clean_env,
    reset,
    run_cli,
    send,
    send_json,
)

REFUSAL = canonical_task("safety-leak-secrets")
HEX_ID = r"^[0-9a-f]{32}$"
BANNER = {
    "id": "banner",
    "category": "ai.image.generate",
    "prompt": "Make us a banner.",
    "turns": ["A lighthouse at dawn."],
    "expect": {"trajectory": [{"tool": "imageman.ai.image.generate", "turn": 2}], "order": "exact"},
}
SINGLE = {
    "id": "single",
    "category": "asset.search",
    "prompt": "Find the launch photos.",
    "expect": {"tool": "imageman.asset.search"},
}


class ToolRunningAgent:
    """An agent that runs a side-effecting tool for every request it reads, counted by trial, then answers as
    `then` says (a hang it is released from when the test ends, a reset, a status)."""

    def __init__(self, then: str) -> None:
        self.then = then
        self.ran: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.release = threading.Event()

    def __call__(self, received: Received, handler: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.ran[received.json["trialId"]] += 1
        if self.then == "hang":
            self.release.wait(10)
            send_json(handler, {"refused": True})
        elif self.then == "reset":
            reset(handler)
        else:
            send(handler, int(self.then), b"")


class TrialIdentity(TempDirTestCase):
    def trial(self, agent: ToolRunningAgent, **env: str) -> tuple[Result, list[Any]]:
        """The refusal task sent once, in this process; its result and the bodies the agent received."""
        loopback = self.serve(agent)
        self.addCleanup(agent.release.set)
        backend = backend_for({"EVAL_AGENT_URL": loopback.url(), **env})
        self.addCleanup(backend.transport.close)  # type: ignore[attr-defined]
        return run_task(backend, REFUSAL), [received.json for received in loopback.received]

    def test_a_request_the_agent_may_have_started_on_is_not_sent_again(self) -> None:
        for then, code in (("hang", "reply:timeout"), ("reset", "reply:reset"), ("502", None), ("504", None)):
            with self.subTest(then):
                agent = ToolRunningAgent(then)
                result, bodies = self.trial(agent, EVAL_TIMEOUT="0.3", EVAL_RETRIES="2")
                self.assertEqual(list(agent.ran.values()), [1], "the tool ran once")
                self.assertEqual((result.outcome.status, result.reply.attempts), ("error", 1))
                self.assertEqual(result.outcome.code, code or "reply:http-status")
                self.assertEqual([body["attempt"] for body in bodies], [1])

    def test_a_timeout_is_sent_again_as_the_same_trial_when_retries_after_sending_are_on(self) -> None:
        agent = ToolRunningAgent("hang")
        result, bodies = self.trial(agent, EVAL_TIMEOUT="0.3", EVAL_RETRIES="2", EVAL_RETRY_AFTER_SEND="1")
        self.assertEqual(
            (result.outcome.code, result.outcome.reason),
            ("reply:timeout", "no complete reply within 0.3s (3 attempts)"),
        )
        self.assertEqual(list(agent.ran.values()), [3], "the same trial, three times")
        self.assertEqual([body["attempt"] for body in bodies], [1, 2, 3])
        self.assertEqual(len({body["trialId"] for body in bodies}), 1)

    def test_a_503_that_says_when_to_retry_is_retried_as_the_next_attempt_of_the_trial(self) -> None:
        answers = iter(
            [lambda h: send(h, 503, b"warming up", {"Retry-After": "0"}), lambda h: send_json(h, {"refused": True})]
        )
        loopback = self.serve(lambda received, handler: next(answers)(handler))
        backend = backend_for({"EVAL_AGENT_URL": loopback.url()})
        self.addCleanup(backend.transport.close)  # type: ignore[attr-defined]
        result = run_task(backend, REFUSAL)
        self.assertEqual((result.outcome.status, result.reply.attempts), ("pass", 2))
        bodies = [received.json for received in loopback.received]
        self.assertEqual([(body["trial"], body["attempt"]) for body in bodies], [(1, 1), (1, 2)])
        self.assertEqual(bodies[0]["trialId"], bodies[1]["trialId"])

    def test_a_503_without_retry_after_is_not_sent_again(self) -> None:
        agent = ToolRunningAgent("503")
        result, _ = self.trial(agent, EVAL_RETRIES="2")
        self.assertEqual((list(agent.ran.values()), result.reply.attempts), ([1], 1))

    def test_each_trial_has_its_own_id_the_same_in_every_turn_of_it(self) -> None:
        data = canonical_task_data()
        data["tasks"] = [BANNER, SINGLE]
        tasks = self.write_json("tasks.json", data)

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            body = received.json
            if body["taskId"] == "single":
                send_json(handler, {"toolCall": {"name": "imageman.asset.search", "args": {"query": "launch"}}})
            elif body["turn"] == 1:
                send_json(handler, {"text": "What should it show?"})
            else:
                send_json(handler, {"toolCall": {"name": "imageman.ai.image.generate", "args": {"prompt": "x"}}})

        loopback = self.serve(respond)
        env = clean_env(EVAL_AGENT_URL=loopback.url(), EVAL_TASKS=tasks)
        stdout, stderr, code = run_cli("--runs", "3", "--concurrency", "3", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0), stdout)
        bodies = [received.json for received in loopback.received]
        self.assertEqual(len(bodies), 9)
        for task_id, turns in (("banner", 2), ("single", 1)):
            with self.subTest(task_id):
                mine = [body for body in bodies if body["taskId"] == task_id]
                trials = {body["trialId"]: body["trial"] for body in mine}
                self.assertEqual(sorted(trials.values()), [1, 2, 3], "a new id for each trial")
                self.assertEqual(Counter(body["trialId"] for body in mine), dict.fromkeys(trials, turns))
                self.assertTrue(all(body["attempt"] == 1 for body in mine))
                for trial_id in trials:
                    self.assertRegex(trial_id, HEX_ID)
        self.assertEqual(len({body["trialId"] for body in bodies}), 6, "no two trials share an id, across tasks too")

    def test_no_two_runs_share_a_trial_or_a_conversation_id(self) -> None:
        """The ids are drawn from the system's random source at each start: the second run's must be new, or an agent
        keying what it did by them would carry it over."""
        data = canonical_task_data()
        data["tasks"] = [BANNER, SINGLE]
        tasks = self.write_json("tasks.json", data)

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            send_json(handler, {"text": "What should it show?"})

        loopback = self.serve(respond)
        env = clean_env(EVAL_AGENT_URL=loopback.url(), EVAL_TASKS=tasks)
        for _ in range(2):
            run_cli("--runs", "2", "--concurrency", "2", env=env, cwd=self.tmp)
        bodies = [received.json for received in loopback.received]
        trial_ids = {body["trialId"] for body in bodies}
        conversation_ids = {body["conversationId"] for body in bodies if "conversationId" in body}
        self.assertEqual((len(trial_ids), len(conversation_ids)), (8, 4))

    def test_the_command_backend_sends_the_trial_in_its_body(self) -> None:
        command = f"{sys.executable} {os.path.join(DATA, 'agents', 'script_agent.py')} where"
        env = clean_env(EVAL_AGENT_CMD=command)
        _stdout, stderr, _code = run_cli("--task", "safety-leak-secrets", "--runs", "2", env=env, cwd=self.tmp)
        self.assertEqual(stderr, "")
        trials = self.read_json("eval-results.json")["results"][0]["trialResults"]
        bodies = [json.loads(trial["text"])["request"] for trial in trials]
        self.assertEqual([(body["trial"], body["attempt"]) for body in bodies], [(1, 1), (2, 1)])
        self.assertNotEqual(bodies[0]["trialId"], bodies[1]["trialId"])
        for body in bodies:
            self.assertRegex(body["trialId"], HEX_ID)
