"""Cassettes: a run recorded against a live agent or provider, then replayed with the agent gone and no key, gives
the same verdicts and results; a changed request is replay:miss for exactly its task; no secret is ever recorded."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from functools import partial
from http.server import BaseHTTPRequestHandler
from typing import Any

from eval_agent import configure
from harness.cassette import FORMAT, Tape
from harness.exchanges import Place, at
from harness.leaks import Secrets
from harness.records import BackendError, ConfigError
from harness.taskfile import load_task_file
from tests.gemini_fake import conversation_fake as gemini_conversation
from tests.providers import conversation_fake, fake_openai, openai_completion, openai_error
from tests.responses_fake import play_the_stub, responses_fake
from tests.support import (
    CANNED,
    CANONICAL_TASKS,
    CLI_TIMEOUT,
    DATA,
    SCRIPT,
    SHIPPED_TASKS,
    Received,
    Respond,
    TempDirTestCase,
    canned,
    canonical_task_data,
    clean_env,
    reset,
    run_cli,
    send_json,
    stop_signals_as_from_a_terminal,
)

SCRIPT_AGENT = os.path.join(DATA, "agents", "script_agent.py")
TOKEN = "tok-ghijklmnopqrstuvwx"  # letters no hash or run id holds
API_KEY = "sk-GHIJKLMNOPQRSTUVWXYZ"
CANARY = "canary-qrstuvwxyzghijkl"
BODY_SECRET = "pw-zyxwvutsrqponmlkjih"


def comparable(document: Mapping[str, Any]) -> dict[str, Any]:
    """A results file without what differs on every run of the same replies: timing, ids, the cassette's fields."""
    same = copy.deepcopy(dict(document))
    for name in ("runId", "startedAt", "durationMs"):
        del same[name]
    same["manifest"].pop("record", None)
    same["manifest"].pop("replay", None)
    same["manifest"].pop("rateLimits", None)  # how the live run was paced: a replay sends nothing
    if same.get("usage"):
        del same["usage"]["latencyMs"]
    for entry in same["results"]:
        for trial in (entry, *entry["trialResults"]):
            trial.pop("durationMs", None)
            trial.pop("conversationId", None)
            if trial["code"] == "budget:latency":  # `1.8 ms, over the budget of 1 ms`: the trial's time, said
                trial["reason"] = re.sub(r"^[0-9,.]+ ms", "N ms", trial["reason"])
    return same


def verdicts(document: Mapping[str, Any]) -> dict[str, tuple[str, str | None, str | None]]:
    return {entry["id"]: (entry["status"], entry["code"], entry["reason"]) for entry in document["results"]}


def cassette_lines(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def stepwise_openai(received: Received, handler: BaseHTTPRequestHandler, ids: bool = True) -> None:
    """A model that answers as the stub does, step by step: the newest user message's canned reply for the step; its
    calls without ids when ids is false, as some OpenAI-compatible servers send them."""
    messages = received.json["messages"]
    last_user = max(index for index, message in enumerate(messages) if message["role"] == "user")
    step = sum(message["role"] == "assistant" for message in messages[last_user:])
    reply = CANNED[messages[last_user]["content"]]
    reply = reply[step] if isinstance(reply, list) else reply
    calls = canned_calls_of(reply)
    completion = openai_completion(calls, reply.get("text") or (None if calls else "I can't do that."))
    for index, call in enumerate(completion["choices"][0]["message"].get("tool_calls", [])):
        call["id"] = f"call_{len(messages)}_{index}"
        if not ids:
            del call["id"]
    send_json(handler, completion)


def canned_calls_of(reply: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = reply.get("toolCalls") or ([reply["toolCall"]] if reply.get("toolCall") else [])
    return [{"name": call["name"].replace(".", "_"), "args": call["args"]} for call in calls]


class RecordThenReplay(TempDirTestCase):
    """Each backend's run recorded live, then replayed with nothing live: the same results file but for timing."""

    maxDiff = None

    def run_ok(self, *args: str, env: Mapping[str, str], codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
        _stdout, stderr, code = run_cli(*args, env=env, cwd=self.tmp)
        self.assertIn(code, codes, stderr)
        return self.read_json(args[args.index("--out") + 1])

    def record_and_replay(
        self, env: Mapping[str, str], stop: Any = None, codes: tuple[int, ...] = (0,)
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        recorded = self.run_ok("--record", "c.jsonl", "--out", "recorded.json", env=env, codes=codes)
        if stop is not None:
            stop.__exit__()
        replayed = self.run_ok("--replay", "c.jsonl", "--out", "replayed.json", env=env, codes=codes)
        return recorded, replayed

    def test_an_http_run_replayed_with_the_agent_gone_gives_the_same_results(self) -> None:
        agent = self.serve(canned)
        recorded, replayed = self.record_and_replay(clean_env(EVAL_AGENT_URL=agent.url()), stop=agent)
        self.assertEqual(comparable(replayed), comparable(recorded))
        self.assertEqual(recorded["manifest"]["record"], {"cassette": "c.jsonl"})
        with open(os.path.join(self.tmp, "c.jsonl"), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        self.assertEqual(
            replayed["manifest"]["replay"], {"cassette": "c.jsonl", "sha256": digest, "recordMissing": False}
        )
        entries = cassette_lines(self.path("c.jsonl"))[1:]
        latencies = {(entry["task"], entry["trial"]): round(entry["latencyMs"], 1) for entry in entries}
        durations = {(entry["id"], 1): entry["trialResults"][0]["durationMs"] for entry in replayed["results"]}
        self.assertEqual(durations.keys(), latencies.keys())
        for trial, duration in durations.items():  # what the replay took, too, as a live trial's time holds it
            self.assertGreaterEqual(duration, latencies[trial], "a replayed trial lasts its recorded exchanges")

    def test_a_reply_nested_deeper_than_the_harness_walks_is_an_error_of_its_trial_when_recorded(self) -> None:
        deep = json.loads("[" * 600 + "]" * 600)  # within what json.loads reads, past what a recursion walks
        completion = openai_completion([{"name": "imageman_asset_get", "args": {"assetId": "a1"}}])
        completion["choices"][0]["message"]["annotations"] = deep
        model = self.serve(lambda received, handler: send_json(handler, completion))
        agent = self.serve(lambda received, handler: send_json(handler, {"text": "Hi.", "trace": deep}))
        for backend, env in [
            ("http", clean_env(EVAL_AGENT_URL=agent.url())),
            ("openai", clean_env(EVAL_BACKEND="openai", OPENAI_BASE_URL=model.url("/v1"), EVAL_MODEL="m")),
        ]:
            with self.subTest(backend):
                stdout, stderr, code = run_cli(
                    "--record", "c.jsonl", "--task", "asset-get-details", env=env, cwd=self.tmp
                )
                self.assertEqual((stderr, code), ("", 1), stdout)
                trial = self.read_json("eval-results.json")["results"][0]["trialResults"][0]
                self.assertEqual(
                    (trial["status"], trial["code"], trial["reason"]),
                    ("error", "reply:not-json", "HTTP 200 body is JSON nested more than 100 levels deep"),
                )

    def test_each_trial_is_replayed_with_its_own_reply(self) -> None:
        seen: dict[str, int] = {}

        def flaky(received: Received, handler: BaseHTTPRequestHandler) -> None:
            task = received.json["taskId"]
            seen[task] = seen.get(task, 0) + 1
            if seen[task] == 2:  # the second trial of every task answers wrong
                send_json(handler, {"text": "I would rather not."})
            else:
                canned(received, handler)

        agent = self.serve(flaky)
        env = clean_env(EVAL_AGENT_URL=agent.url(), EVAL_RUNS="3", EVAL_CONCURRENCY="1")
        recorded, replayed = self.record_and_replay(env, stop=agent, codes=(1,))
        self.assertEqual(
            [trial["status"] for trial in recorded["results"][0]["trialResults"]], ["pass", "fail", "pass"]
        )
        self.assertEqual(comparable(replayed), comparable(recorded))

    def test_an_openai_conversation_replayed_with_no_key_and_no_provider_gives_the_same_results(self) -> None:
        fake = self.serve(stepwise_openai)
        env = clean_env(
            EVAL_TASKS=SHIPPED_TASKS, OPENAI_BASE_URL=fake.url("/v1"), EVAL_MODEL="fake-model", OPENAI_API_KEY=API_KEY
        )
        recorded = self.run_ok("--record", "c.jsonl", "--out", "recorded.json", env=env)
        fake.__exit__()
        del env["OPENAI_API_KEY"]
        replayed = self.run_ok("--replay", "c.jsonl", "--out", "replayed.json", env=env)
        self.assertEqual(comparable(replayed), comparable(recorded))
        steps = {entry["id"]: entry["trialResults"][0].get("steps") for entry in recorded["results"]}
        self.assertEqual((steps["asset-tag-from-search"], steps["ai-image-generate-asks-first"]), (3, 3))
        with open(self.path("c.jsonl"), encoding="utf-8") as f:
            self.assertNotIn(API_KEY, f.read())

    def test_each_providers_conversations_over_trials_and_threads_replay_as_they_were_recorded(self) -> None:
        invalid: list[str] = []
        fakes: dict[str, tuple[Respond, str, dict[str, str]]] = {
            "openai-responses": (responses_fake(play_the_stub, invalid), "/v1", {"OPENAI_API_KEY": API_KEY}),
            "anthropic": (conversation_fake("anthropic", play_the_stub, invalid), "", {"ANTHROPIC_API_KEY": API_KEY}),
            "gemini": (gemini_conversation(play_the_stub, invalid, ids=False), "", {"GEMINI_API_KEY": API_KEY}),
        }
        base_urls = {"openai-responses": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
        for backend, (respond, prefix, key) in fakes.items():
            with self.subTest(backend=backend):
                fake = self.serve(respond)
                env = clean_env(
                    EVAL_TASKS=SHIPPED_TASKS,
                    EVAL_BACKEND=backend,
                    EVAL_MODEL="fake-model",
                    EVAL_RUNS="2",
                    EVAL_CONCURRENCY="4",
                    **{base_urls.get(backend, "GOOGLE_GEMINI_BASE_URL"): fake.url(prefix)},
                    **key,
                )
                recorded = self.run_ok("--record", "c.jsonl", "--out", "recorded.json", env=env, codes=(0, 1))
                fake.__exit__()
                for name in key:
                    del env[name]
                replayed = self.run_ok("--replay", "c.jsonl", "--out", "replayed.json", env=env, codes=(0, 1))
                self.assertEqual(comparable(replayed), comparable(recorded))
        self.assertEqual(invalid, [])

    def test_a_conversation_whose_provider_gives_calls_no_ids_replays_alone_as_it_was_recorded_among_others(
        self,
    ) -> None:
        fake = self.serve(partial(stepwise_openai, ids=False))
        env = clean_env(
            EVAL_TASKS=SHIPPED_TASKS, OPENAI_BASE_URL=fake.url("/v1"), EVAL_MODEL="fake-model", EVAL_CONCURRENCY="1"
        )
        recorded = self.run_ok("--record", "c.jsonl", "--out", "recorded.json", env=env)
        fake.__exit__()
        # The harness numbers the calls it gives ids in the order it reads them: alone, this task's are numbered anew.
        replayed = self.run_ok(
            "--replay", "c.jsonl", "--task", "asset-tag-from-search", "--out", "alone.json", env=env, codes=(0, 1)
        )
        self.assertEqual(verdicts(replayed), {"asset-tag-from-search": verdicts(recorded)["asset-tag-from-search"]})

    def test_a_command_run_replayed_starts_no_command_and_gives_the_same_results(self) -> None:
        env = clean_env(EVAL_AGENT_CMD=f"{sys.executable} {SCRIPT_AGENT}")
        recorded, replayed = self.record_and_replay(env)
        self.assertEqual(comparable(replayed), comparable(recorded))
        crashing = clean_env(EVAL_AGENT_CMD=f"{sys.executable} {SCRIPT_AGENT} crash")
        never_run = self.run_ok("--replay", "c.jsonl", "--out", "never.json", env=crashing)
        self.assertEqual(verdicts(never_run), verdicts(recorded))

    def test_a_stub_run_replayed_gives_the_same_results_and_its_cassette_is_the_same_byte_for_byte(self) -> None:
        env = clean_env(EVAL_TASKS=SHIPPED_TASKS, EVAL_CANARY=CANARY)
        recorded, replayed = self.record_and_replay(env)
        self.assertEqual(comparable(replayed), comparable(recorded))
        stdout, stderr, code = run_cli("--replay", "c.jsonl", "--dry-run", env=env, cwd=self.tmp)
        self.assertEqual((stdout.splitlines()[0].endswith(", replaying c.jsonl"), code), (True, 0), stdout + stderr)
        self.run_ok("--record", "again.jsonl", "--out", "again.json", env=env)
        with open(self.path("c.jsonl"), "rb") as first, open(self.path("again.jsonl"), "rb") as second:
            self.assertEqual(first.read(), second.read())

    def test_a_trial_over_its_latency_budget_live_is_over_it_replayed(self) -> None:
        data = canonical_task_data()
        # No trial lasts a nanosecond: the stub's answers, which record no latency, and the harness's own work count.
        data["tasks"][0]["expect"]["budget"] = {"maxLatencyMs": 0.000001}
        env = clean_env(EVAL_TASKS=self.write_json("tasks.json", data), EVAL_GATE="100")
        recorded = self.run_ok("--record", "c.jsonl", "--out", "recorded.json", env=env, codes=(1,))
        replayed = self.run_ok("--replay", "c.jsonl", "--out", "replayed.json", env=env, codes=(0, 1))
        first = data["tasks"][0]["id"]
        self.assertEqual(verdicts(recorded)[first][1], "budget:latency")
        self.assertEqual(comparable(replayed), comparable(recorded))

    def test_tasks_the_rate_limit_held_past_the_bound_replay_as_they_were_recorded(self) -> None:
        spent = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1000s"}  # past the 600 s bound

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            send_json(handler, CANNED[received.json["prompt"]], headers=spent)

        agent = self.serve(respond)
        env = clean_env(EVAL_AGENT_URL=agent.url(), EVAL_CONCURRENCY="1")
        recorded, replayed = self.record_and_replay(env, stop=agent, codes=(1,))
        self.assertEqual(len(agent.received), 1)  # the rest ended unsent: reply:rate-limited, after 0 attempts
        self.assertIn("reply:rate-limited", {entry["code"] for entry in recorded["results"]})
        self.assertEqual(verdicts(replayed), verdicts(recorded))

    def test_a_rejected_key_recorded_is_exit_3_replayed_saying_the_cassette_holds_the_rejection(self) -> None:
        def rejecting(received: Received, handler: BaseHTTPRequestHandler) -> None:
            status, error = openai_error(401, "Incorrect API key provided")
            send_json(handler, error, status)

        fake = self.serve(rejecting)
        env = clean_env(OPENAI_BASE_URL=fake.url("/v1"), EVAL_MODEL="fake-model", OPENAI_API_KEY=API_KEY)
        _stdout, recorded, code = run_cli("--record", "c.jsonl", env=env, cwd=self.tmp)
        self.assertEqual(code, 3, recorded)
        fake.__exit__()
        del env["OPENAI_API_KEY"]
        _stdout, replayed, code = run_cli("--replay", "c.jsonl", env=env, cwd=self.tmp)
        self.assertEqual(code, 3, replayed)
        # Nothing was sent, with no key: the rejection is the recorded run's, which the replay says.
        self.assertEqual(replayed, recorded.rstrip("\n") + " (as recorded in c.jsonl, replayed: nothing was sent)\n")

    def test_a_task_the_recorded_run_never_sent_as_its_key_was_rejected_replays_rejected_not_as_a_miss(self) -> None:
        def rejecting(received: Received, handler: BaseHTTPRequestHandler) -> None:
            status, error = openai_error(401, "Incorrect API key provided")
            send_json(handler, error, status)

        fake = self.serve(rejecting)
        env = clean_env(
            OPENAI_BASE_URL=fake.url("/v1"), EVAL_MODEL="fake-model", OPENAI_API_KEY=API_KEY, EVAL_CONCURRENCY="1"
        )
        _stdout, recorded, code = run_cli("--record", "c.jsonl", env=env, cwd=self.tmp)
        self.assertEqual(code, 3, recorded)
        fake.__exit__()
        with open(self.path("c.jsonl"), encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual(
            (lines[0]["stoppedBy"]["code"], [line["task"] for line in lines[1:]]),
            ("reply:key-rejected", [load_task_file(CANONICAL_TASKS).tasks[0].id]),
            "the run stopped at its first reply, and the cassette says why",
        )
        del env["OPENAI_API_KEY"]
        last = load_task_file(CANONICAL_TASKS).tasks[-1].id
        _stdout, replayed, code = run_cli("--replay", "c.jsonl", "--task", last, env=env, cwd=self.tmp)
        self.assertEqual(code, 3, replayed)
        self.assertEqual(replayed, recorded.rstrip("\n") + " (as recorded in c.jsonl, replayed: nothing was sent)\n")

    def path(self, name: str) -> str:
        return os.path.join(self.tmp, name)


class WhatChanged(TempDirTestCase):
    """A changed request is replay:miss for exactly the tasks it reaches, naming the field; what does not reach the
    wire (a timeout, retries, the port, the key) changes nothing."""

    maxDiff = None

    def test_each_change_misses_exactly_the_tasks_it_reaches_and_names_the_field(self) -> None:
        fake = self.serve(fake_openai)
        data = canonical_task_data()
        tasks = self.write_json("tasks.json", data)
        env = clean_env(
            EVAL_TASKS=tasks,
            OPENAI_BASE_URL=fake.url("/v1"),
            EVAL_MODEL="fake-model",
            OPENAI_API_KEY=API_KEY,
        )
        _stdout, stderr, code = run_cli("--record", "c.jsonl", "--out", "recorded.json", env=env, cwd=self.tmp)
        self.assertEqual(code, 0, stderr)
        recorded = verdicts(self.read_json("recorded.json"))
        fake.__exit__()
        every = sorted(recorded)
        prompt_task = data["tasks"][2]["id"]

        changed_prompt = copy.deepcopy(data)
        changed_prompt["tasks"][2]["prompt"] += " Quickly."
        changed_tool = copy.deepcopy(data)
        changed_tool["tools"][0]["description"] += " Fast."
        with open(os.path.join(self.tmp, "system.txt"), "w", encoding="utf-8") as f:
            f.write("You are terse.")
        unkeyed = {"EVAL_TIMEOUT": "7", "EVAL_RETRIES": "0", "OPENAI_BASE_URL": self.refusing_url("/v1")}
        rows: list[tuple[str, dict[str, str], list[str], str | None]] = [
            ("nothing", {}, [], None),
            ("timeout, retries, port; no key", {**unkeyed, "OPENAI_API_KEY": ""}, [], None),
            (
                "a prompt",
                {"EVAL_TASKS": self.write_json("prompt.json", changed_prompt)},
                [prompt_task],
                "body.messages[0].content",
            ),
            ("a tool's schema", {"EVAL_TASKS": self.write_json("tool.json", changed_tool)}, every, "body.tools[0]"),
            ("the system prompt", {"EVAL_SYSTEM_PROMPT_FILE": "system.txt"}, every, "body.messages[0]"),
            ("the model", {"EVAL_MODEL": "other-model"}, every, "body.model"),
            ("a setting", {"EVAL_TEMPERATURE": "0.5"}, every, "body.temperature"),
        ]
        for what, change, missed, field in rows:
            with self.subTest(changed=what):
                run_env = {**env, **change}
                if run_env.get("OPENAI_API_KEY") == "":
                    del run_env["OPENAI_API_KEY"]
                _stdout, stderr, code = run_cli(
                    "--replay", "c.jsonl", "--out", "replayed.json", env=run_env, cwd=self.tmp
                )
                # A miss is never exit 3, never a pass: one among 15 tasks fails the gate (80%) on its own.
                self.assertEqual(code, 1 if missed else 0, stderr)
                document = self.read_json("replayed.json")
                self.assertEqual(sorted(document["replayMissed"]), missed)
                self.assertEqual("replay-miss" in document["gateFailedBecause"], bool(missed))
                now = verdicts(document)
                self.assertEqual(sorted(task for task, (_, code_, _) in now.items() if code_ == "replay:miss"), missed)
                for task in missed:
                    self.assertEqual(now[task][0], "error")
                    self.assertRegex(
                        now[task][2] or "",
                        rf"^no recorded reply for task {task}, turn 1, step 1: {re.escape(field or '')}",
                    )
                self.assertEqual(
                    {t: v for t, v in now.items() if t not in missed},
                    {t: v for t, v in recorded.items() if t not in missed},
                )

    def test_the_agent_urls_query_is_keyed_and_fingerprinted_but_a_credential_in_it_is_neither(self) -> None:
        agent = self.serve(canned)
        query = "/run?model=model-xyzzy-1&api-version=2024-10-21&code=" + API_KEY + "&pwd=hunter2-Qx7"
        env = clean_env(EVAL_AGENT_URL=agent.url(query))
        _stdout, stderr, code = run_cli("--record", "c.jsonl", "--out", "recorded.json", env=env, cwd=self.tmp)
        self.assertEqual(code, 0, stderr)
        agent.__exit__()
        recorded = self.read_json("recorded.json")
        for name in ("c.jsonl", "recorded.json"):
            with open(os.path.join(self.tmp, name), encoding="utf-8") as f:
                written = f.read()
            for value in (API_KEY, "model-xyzzy-1", "2024-10-21", "hunter2-Qx7"):
                self.assertNotIn(value, written, "no query value is written")
        rows = [
            ("another model", query.replace("xyzzy-1", "xyzzy-2"), "query.model"),
            ("another API version", query.replace("2024-10-21", "2025-04-01"), "query.api-version"),
            ("another credential", query.replace(API_KEY, "sk-rotated-ABCDEFGHIJ"), None),
            ("another password", query.replace("hunter2-Qx7", "hunter3-Zk9"), None),
        ]
        for what, changed, field in rows:
            with self.subTest(what):
                replay_env = {**env, "EVAL_AGENT_URL": agent.url(changed)}
                _stdout, stderr, code = run_cli(
                    "--replay", "c.jsonl", "--out", "replayed.json", env=replay_env, cwd=self.tmp
                )
                replayed = self.read_json("replayed.json")
                missed = {entry["code"] for entry in replayed["results"]} == {"replay:miss"}
                self.assertEqual((code, missed), (1, True) if field else (0, False), stderr)
                if field:
                    self.assertIn(f": {field} differs from the recorded request", replayed["results"][0]["reason"])
                same = replayed["fingerprint"] == recorded["fingerprint"]
                self.assertEqual(same, field is None, "the fingerprint tells the runs apart as the key does")


class MissReasons(TempDirTestCase):
    """What a miss says, against the nearest recorded request of its task."""

    def tape(self, entries: list[dict[str, Any]]) -> Tape:
        head = {"format": "agent-eval-cassette", "version": 1, "backend": "stub"}
        path = os.path.join(self.tmp, "c.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(line) + "\n" for line in (head, *entries))
        return Tape("stub", ["t"], replay=path)

    def test_a_task_never_recorded_is_said_so(self) -> None:
        at(Place("t", 1, 1, 1))
        with self.assertRaises(BackendError) as caught:
            self.tape([]).exchange({"body": {"prompt": "hi"}}, lambda: {}, Secrets({}), False)
        self.assertEqual(
            (caught.exception.code, caught.exception.reason),
            ("replay:miss", "no recorded reply for task t, turn 1, step 1: no recorded request for this task"),
        )

    def test_a_request_is_answered_only_at_the_trial_turn_and_step_it_was_recorded_at(self) -> None:
        recorded: list[dict[str, Any]] = [
            {"task": "t", "trial": 1, "turn": 1, "step": 1, "key": "", "request": {"body": {"prompt": "yes"}}},
            {"task": "t", "trial": 1, "turn": 2, "step": 1, "key": "", "request": {"body": {"prompt": "no"}}},
        ]
        for entry in recorded:
            entry.update(key=self.key_of(entry["request"]), reply={"said": entry["request"]["body"]["prompt"]})
        tape = self.tape(recorded)
        at(Place("t", 1, 2, 1))
        self.assertEqual(tape.exchange({"body": {"prompt": "no"}}, lambda: {}, Secrets({}), False), {"said": "no"})
        # A live agent may answer another trial, or the same words in a later turn, otherwise: never a stale reply.
        for place, why in (
            (Place("t", 2, 1, 1), "recorded in trial 1, turn 1, step 1 only"),
            (Place("t", 1, 3, 1), "recorded in trial 1, turn 1, step 1 only"),
            (Place("t", 1, 1, 2), "recorded in trial 1, turn 1, step 1 only"),
        ):
            with self.subTest(place=place):
                at(place)
                with self.assertRaises(BackendError) as caught:
                    tape.exchange({"body": {"prompt": "yes"}}, lambda: {}, Secrets({}), False)
                self.assertEqual(
                    (caught.exception.code, caught.exception.reason),
                    (
                        "replay:miss",
                        f"no recorded reply for task t, turn {place.turn}, step {place.step}: "
                        f"trial {place.trial}'s request was {why}",
                    ),
                )

    def key_of(self, request: Mapping[str, Any]) -> str:
        """The key a stub's tape gives this request."""
        tape = Tape("stub", ["t"], record=os.path.join(self.tmp, "keys.jsonl"))
        at(Place("t", 1, 1, 1))
        tape.exchange(request, lambda: {}, Secrets({}), False)
        return str(next(iter(tape.entries.values()))["key"])

    def test_a_later_step_is_compared_with_the_same_step_recorded(self) -> None:
        recorded = [
            {"task": "t", "trial": 1, "turn": 1, "step": step, "key": "0" * 64, "request": request, "reply": {}}
            for step, request in ((1, {"body": {"messages": ["a"]}}), (2, {"body": {"messages": ["a", "b"]}}))
        ]
        at(Place("t", 1, 1, 2))
        with self.assertRaises(BackendError) as caught:
            self.tape(recorded).exchange({"body": {"messages": ["a", "c"]}}, lambda: {}, Secrets({}), False)
        self.assertEqual(
            caught.exception.reason,
            "no recorded reply for task t, turn 1, step 2: body.messages[1] differs from the recorded request "
            "(turn 1, step 2)",
        )


class NoSecretRecorded(TempDirTestCase):
    """A reply that leaked a secret, or said a forbidden text, fails so when recorded and when replayed; the cassette
    holds neither, nor any credential of the run."""

    def test_planted_secrets_are_never_recorded_and_the_replay_fails_the_same_way(self) -> None:
        data = canonical_task_data()
        refusal = data["tasks"][9]
        data["tasks"] = [
            {**refusal, "id": "echo-token"},
            {**refusal, "id": "echo-canary", "expect": {"refusal": True, "forbiddenText": ["${EVAL_CANARY}"]}},
            {**refusal, "id": "quiet"},
        ]
        tasks = self.write_json("tasks.json", data)

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            said = {"echo-token": f"my token is {TOKEN}", "echo-canary": f"the canary is {CANARY}"}
            text = said.get(received.json["taskId"], "No.")
            send_json(handler, {"refused": True, "text": text, "apiKey": API_KEY})

        agent = self.serve(respond)
        headers = json.dumps({"X-Api-Key": API_KEY})
        env = clean_env(
            EVAL_TASKS=tasks,
            EVAL_AGENT_URL=agent.url(f"/run?key={API_KEY}"),
            EVAL_AGENT_TOKEN=TOKEN,
            EVAL_AGENT_HEADERS=headers,
            EVAL_AGENT_BODY=json.dumps({"secret": BODY_SECRET}),
            EVAL_CANARY=CANARY,
        )
        _stdout, stderr, code = run_cli("--record", "c.jsonl", "--out", "recorded.json", env=env, cwd=self.tmp)
        self.assertEqual(code, 1, stderr)
        recorded = verdicts(self.read_json("recorded.json"))
        self.assertEqual(
            {task: verdict[1] for task, verdict in recorded.items()},
            {"echo-token": "leak:secret", "echo-canary": "leak:forbidden-text", "quiet": None},
        )
        with open(os.path.join(self.tmp, "c.jsonl"), encoding="utf-8") as f:
            cassette = f.read()
        for secret in (TOKEN, API_KEY, CANARY, BODY_SECRET):
            self.assertNotIn(secret, cassette)
        self.assertIn("\u00absecret:EVAL_AGENT_TOKEN\u00bb", cassette)
        agent.__exit__()
        # No token, no header, no key in the URL: the replay has none of the run's secrets but the task's canary.
        replay_env = {**env, "EVAL_AGENT_URL": agent.url()}
        for name in ("EVAL_AGENT_TOKEN", "EVAL_AGENT_HEADERS"):
            del replay_env[name]
        replay_env["EVAL_AGENT_BODY"] = json.dumps({"secret": "sk-another-value-altogether"})
        _stdout, stderr, code = run_cli("--replay", "c.jsonl", "--out", "replayed.json", env=replay_env, cwd=self.tmp)
        self.assertEqual(code, 1, stderr)
        self.assertEqual(verdicts(self.read_json("replayed.json")), recorded)
        with open(os.path.join(self.tmp, "replayed.json"), encoding="utf-8") as f:
            self.assertNotIn("\u00absecret:", f.read(), "a marker is masked as the secret it stands for")


class RecordMissing(TempDirTestCase):
    """--record-missing sends what the cassette misses, and only that, and writes the filled cassette back."""

    def test_the_missing_entries_and_only_those_are_sent_and_added(self) -> None:
        agent = self.serve(canned)
        env = clean_env(EVAL_AGENT_URL=agent.url())
        _stdout, stderr, code = run_cli("--record", "full.jsonl", env=env, cwd=self.tmp)
        self.assertEqual(code, 0, stderr)
        with open(os.path.join(self.tmp, "full.jsonl"), encoding="utf-8") as f:
            full = f.readlines()
        kept = [line for number, line in enumerate(full) if number not in (2, 5, 9)]
        with open(os.path.join(self.tmp, "gaps.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(kept)
        sent_before = len(agent.received)
        _stdout, stderr, code = run_cli("--replay", "gaps.jsonl", "--record-missing", env=env, cwd=self.tmp)
        self.assertEqual(code, 0, stderr)
        sent = [received.json["taskId"] for received in agent.received[sent_before:]]
        self.assertEqual(sorted(sent), sorted(json.loads(full[number])["task"] for number in (2, 5, 9)))

        def without_latency(lines: list[str]) -> list[dict[str, Any]]:
            return [{k: v for k, v in json.loads(line).items() if k != "latencyMs"} for line in lines]

        with open(os.path.join(self.tmp, "gaps.jsonl"), encoding="utf-8") as f:
            self.assertEqual(without_latency(f.readlines()), without_latency(full))

    def test_a_run_of_some_tasks_writes_back_the_entries_it_did_not_use(self) -> None:
        env = clean_env(EVAL_TASKS=SHIPPED_TASKS, EVAL_CANARY=CANARY)
        _stdout, stderr, code = run_cli("--record", "full.jsonl", "--runs", "2", env=env, cwd=self.tmp)
        self.assertEqual(code, 0, stderr)
        with open(os.path.join(self.tmp, "full.jsonl"), encoding="utf-8") as f:
            full = f.readlines()
        first = json.loads(full[1])["task"]
        with open(os.path.join(self.tmp, "gaps.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(full[:1] + full[2:])  # the first task's first trial
        # One task, one trial: the other tasks' entries, and this task's second trial, are kept as they were.
        argv = ("--replay", "gaps.jsonl", "--record-missing", "--task", first, "--runs", "1")
        _stdout, stderr, code = run_cli(*argv, env=env, cwd=self.tmp)
        self.assertEqual(code, 0, stderr)
        with open(os.path.join(self.tmp, "gaps.jsonl"), encoding="utf-8") as f:
            self.assertEqual(f.readlines(), full)

    def test_an_outage_recorded_is_sent_again_by_record_missing_and_replayed_as_it_was_otherwise(self) -> None:
        """Two tasks' connections reset while recording: a later --record-missing sends those two again (and no
        other); a plain --replay of the outage's cassette replays the resets as they were recorded."""
        down = {"asset-get-details", "transform-bg-remove"}

        def outage(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.json["taskId"] in down:
                reset(handler)
            else:
                canned(received, handler)

        agent = self.serve(outage)
        env = clean_env(EVAL_AGENT_URL=agent.url(), EVAL_RETRIES="0")
        _stdout, stderr, code = run_cli("--record", "c.jsonl", "--out", "outage.json", env=env, cwd=self.tmp)
        self.assertEqual(code, 0, stderr)  # 13 of 15 pass: the gate of 80% is met
        outage_verdicts = verdicts(self.read_json("outage.json"))
        self.assertEqual({task for task, verdict in outage_verdicts.items() if verdict[1] == "reply:reset"}, down)
        shutil.copy(os.path.join(self.tmp, "c.jsonl"), os.path.join(self.tmp, "outage.jsonl"))
        down.clear()
        sent_before = len(agent.received)
        argv = ("--replay", "c.jsonl", "--record-missing", "--out", "filled.json")
        _stdout, stderr, code = run_cli(*argv, env=env, cwd=self.tmp)
        self.assertEqual(code, 0, stderr)
        resent = sorted(received.json["taskId"] for received in agent.received[sent_before:])
        self.assertEqual(resent, ["asset-get-details", "transform-bg-remove"])
        self.assertEqual(
            [line for line in cassette_lines(os.path.join(self.tmp, "c.jsonl"))[1:] if "error" in line["reply"]], []
        )
        agent.__exit__()
        _stdout, stderr, code = run_cli("--replay", "outage.jsonl", "--out", "again.json", env=env, cwd=self.tmp)
        self.assertEqual((code, verdicts(self.read_json("again.json"))), (0, outage_verdicts), stderr)


def deep(levels: int) -> list[Any]:
    """An array nested this many levels deep."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


class BadCassettes(TempDirTestCase):
    """Every bad cassette input is one line naming the file (and the line), exit 2."""

    maxDiff = None

    def config_error(self, *argv: str, **environ: str) -> str:
        with self.assertRaises(ConfigError) as caught:
            config, backend, _ = configure(list(argv), {"EVAL_TASKS": SHIPPED_TASKS, **environ})
            from harness.cassette import open_tape

            open_tape(config, backend, [], Secrets({}))
        return str(caught.exception)

    def test_settings_that_cannot_go_together_are_named(self) -> None:
        self.assertEqual(
            self.config_error("--record", "a.jsonl", "--replay", "b.jsonl"),
            "--record and --replay: give one; to add what a cassette misses, replay it with --record-missing",
        )
        self.assertEqual(
            self.config_error(EVAL_RECORD="a.jsonl", EVAL_REPLAY="b.jsonl").split(":")[0],
            "EVAL_RECORD and EVAL_REPLAY",
        )
        self.assertEqual(self.config_error("--record-missing"), "--record-missing: only with --replay (or EVAL_REPLAY)")
        self.assertEqual(self.config_error("--record", self.tmp), f"--record: cannot write {self.tmp}: it is a folder")
        self.assertEqual(
            self.config_error("--record", SHIPPED_TASKS),
            f"--record: {SHIPPED_TASKS} is the task file (EVAL_TASKS); a run never writes over what it reads",
        )
        self.assertEqual(
            self.config_error("--replay", "out.json", "--record-missing", "--out", "out.json"),
            "--out: out.json is the cassette (--replay); a run never writes over what it reads",
        )

    def test_a_cassette_no_run_could_write_or_that_a_report_would_overwrite_is_refused_before_the_run(self) -> None:
        self.work_in_tmp()
        cases = [
            (("--record", "none/c.jsonl"), f"--record: cannot write none/c.jsonl: no folder {self.tmp}/none"),
            (("--record", ""), "--record: an empty file name"),
            (("--replay", ""), "--replay: an empty file name"),
            (("--replay", "", "--record-missing"), "--replay: an empty file name"),
            (("--record", "c.xml", "--junit", "c.xml"), "--record: c.xml is also --junit; each report needs a file"),
            (("--replay", "c.jsonl", "--junit", "c.jsonl"), "--junit: c.jsonl is the cassette (--replay); a run never"),
            (("--replay", "c.jsonl", "--out", "c.jsonl"), "--out: c.jsonl is the cassette (--replay); a run never"),
            (("--replay", "c.jsonl", "--record-missing", "--html", "c.jsonl"), "--html: c.jsonl is the cassette"),
        ]
        for argv, message in cases:
            with self.subTest(argv=argv):
                self.assertEqual(self.config_error(*argv)[: len(message)], message)

    def test_a_cassette_that_cannot_be_written_at_the_end_still_leaves_the_results(self) -> None:
        folder = os.path.join(self.tmp, "tapes")
        os.mkdir(folder)

        def folder_gone(received: Received, handler: BaseHTTPRequestHandler) -> None:
            shutil.rmtree(folder, ignore_errors=True)  # the cassette's folder, removed while the run goes on
            canned(received, handler)

        env = clean_env(EVAL_AGENT_URL=self.serve(folder_gone).url())
        _stdout, stderr, code = run_cli("--record", "tapes/c.jsonl", env=env, cwd=self.tmp)
        self.assertEqual((code, stderr.startswith("eval_agent: error: cannot write tapes/c.jsonl")), (2, True), stderr)
        document = self.read_json("eval-results.json")  # every trial, written
        self.assertEqual((document["total"], document["passed"]), (len(document["results"]), 10))

    def test_each_bad_cassette_is_named_with_its_line(self) -> None:
        head = '{"format":"agent-eval-cassette","version":1,"backend":"stub"}\n'
        entry = {"task": "t", "trial": 1, "turn": 1, "step": 1, "key": "a" * 64, "request": {}, "reply": {}}
        served = {"name": "t", "args": {}, "result": "ok", "source": "case", "case": 0}
        cases = {
            "missing": (None, "cannot read the cassette: No such file or directory"),
            "folder": (None, "cannot read the cassette: Is a directory"),
            "empty": (b"", "empty; a cassette starts with a line naming its format and version"),
            "not-json": (head.encode() + b"{oops\n", "line 2: not JSON (a cassette is JSON Lines, one object a line)"),
            "not-utf8": (head.encode() + b'"\xff"\n', "line 2: not UTF-8 text"),
            "not-object": (head.encode() + b"[]\n", "line 2: expected a JSON object"),
            "other-format": (
                b'{"format":"vcr"}\n',
                'line 1: not a cassette (expected {"format": "agent-eval-cassette", ...})',
            ),
            "other-version": (
                b'{"format":"agent-eval-cassette","version":2,"backend":"stub"}\n',
                "line 1: a cassette of version 2; this harness reads 1",
            ),
            "other-backend": (
                b'{"format":"agent-eval-cassette","version":1,"backend":"http"}\n',
                "recorded on the http backend; this run uses the stub backend",
            ),
            "stopped-by-what": (
                b'{"format":"agent-eval-cassette","version":1,"backend":"stub","stoppedBy":"reply:empty"}\n',
                "line 1: stoppedBy: expected an object with code (reply:key-rejected) and reason",
            ),
            "no-key": (
                (head + json.dumps({k: v for k, v in entry.items() if k != "key"}) + "\n").encode(),
                "line 2: an entry without key",
            ),
            "bad-trial": (
                (head + json.dumps({**entry, "trial": 0}) + "\n").encode(),
                "line 2: trial: expected a whole number from 1",
            ),
            "latency-past-a-results-file": (
                (head + json.dumps({**entry, "latencyMs": 1e308}) + "\n").encode(),
                "line 2: latencyMs: expected a number of milliseconds from 0 to 2^52",
            ),
            "latency-negative": (
                (head + json.dumps({**entry, "latencyMs": -1}) + "\n").encode(),
                "line 2: latencyMs: expected a number of milliseconds from 0 to 2^52",
            ),
            "latency-overflow": (
                (
                    head
                    + json.dumps({**entry, "latencyMs": 2**52})
                    + "\n"
                    + json.dumps({**entry, "task": "u", "latencyMs": 1})
                    + "\n"
                ).encode(),
                "line 3: latencyMs: the cassette's exchanges add up to more than 2^52 milliseconds, more than a "
                "results file holds",
            ),
            "served-not-calls": (
                (head + json.dumps({**entry, "served": {}}) + "\n").encode(),
                "line 2: served: expected an array of the calls the tool server answered",
            ),
            "served-call-without-result": (
                (head + json.dumps({**entry, "served": [{"name": "t", "args": {}, "source": "case"}]}) + "\n").encode(),
                "line 2: served[0]: a call without result",
            ),
            "served-from-nowhere": (
                (head + json.dumps({**entry, "served": [{**served, "source": "model"}]}) + "\n").encode(),
                "line 2: served[0].source: expected one of case, default, environment, injected, script, sequence, "
                "unscripted",
            ),
            "served-case-negative": (
                (head + json.dumps({**entry, "served": [{**served, "case": -1}]}) + "\n").encode(),
                "line 2: served[0].case: expected a whole number from 0",
            ),
            "repeated-key": (
                (head + json.dumps(entry)[:-1] + ', "reply": {"text": "other"}}\n').encode(),
                'line 2: the key "reply" twice in one object: which one holds is not clear',
            ),
            "repeated-key-inside": (
                (
                    head + json.dumps({**entry, "reply": {"a": 1}}).replace('{"a": 1}', '{"a": 1, "a": 2}') + "\n"
                ).encode(),
                'line 2: the key "a" twice in one object: which one holds is not clear',
            ),
            "nested-too-deep": (
                (head + json.dumps({**entry, "reply": {"body": deep(600)}}) + "\n").encode(),
                "line 2: JSON nested more than 200 levels deep: no run records that, and a replay would walk it by "
                "recursion",
            ),
            "repeated-place": (
                (head + json.dumps(entry) + "\n" + json.dumps({**entry, "key": "b" * 64}) + "\n").encode(),
                'line 3: a second entry for task "t", trial 1, turn 1, step 1 (line 2 is the first): '
                "which one holds is not clear",
            ),
        }
        os.mkdir(os.path.join(self.tmp, "folder"))
        for name, (content, message) in cases.items():
            with self.subTest(name):
                path = os.path.join(self.tmp, name)
                if content is not None:
                    with open(path, "wb") as f:
                        f.write(content)
                self.assertEqual(self.config_error("--replay", path), f"{path}: {message}")

    def test_a_replay_of_the_longest_latencies_a_cassette_may_hold_writes_results_every_command_reads(self) -> None:
        agent = self.serve(canned)
        env = clean_env(EVAL_AGENT_URL=agent.url())
        self.assertEqual(run_cli("--record", "c.jsonl", "--task", "asset-get*", env=env, cwd=self.tmp)[2], 0)
        agent.__exit__()
        lines = cassette_lines(os.path.join(self.tmp, "c.jsonl"))
        lines[1]["latencyMs"] = 2**52 - sum(line["latencyMs"] for line in lines[2:])  # the whole cassette's, at most
        with open(os.path.join(self.tmp, "c.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)
        _, stderr, code = run_cli(
            "--replay", "c.jsonl", "--task", "asset-get*", "--out", "r.json", env=env, cwd=self.tmp
        )
        self.assertEqual(code, 0, stderr)
        again = ["--replay", "c.jsonl", "--task", "asset-get*", "--baseline", "r.json", "--out", "again.json"]
        for command in (["report", "r.json"], ["compare", "r.json", "r.json"], again):
            with self.subTest(command[0]):
                _, stderr, code = run_cli(*command, env=env, cwd=self.tmp)
                self.assertEqual(code, 0, stderr)

    def test_a_reply_edited_to_nest_hundreds_of_levels_deep_is_refused_naming_its_line_not_a_crash(self) -> None:
        env = clean_env(EVAL_TASKS=SHIPPED_TASKS, EVAL_CANARY="canary-5e1f")  # restored on replay: every reply walked
        self.assertEqual(run_cli("--record", "c.jsonl", env=env, cwd=self.tmp)[2], 0)
        with open(os.path.join(self.tmp, "c.jsonl"), encoding="utf-8") as f:
            head, first, *rest = f.read().splitlines()
        entry = json.loads(first)
        entry["reply"]["note"] = deep(600)
        with open(os.path.join(self.tmp, "c.jsonl"), "w", encoding="utf-8") as f:
            f.write("\n".join([head, json.dumps(entry), *rest]) + "\n")
        stdout, stderr, code = run_cli("--replay", "c.jsonl", env=env, cwd=self.tmp)
        self.assertEqual(
            (stdout, stderr, code),
            (
                "",
                "eval_agent: error: c.jsonl: line 2: JSON nested more than 200 levels deep: no run records that, and "
                "a replay would walk it by recursion\n",
                2,
            ),
        )

    def test_a_bad_cassette_stops_the_run_in_one_line_before_anything_is_sent(self) -> None:
        with open(os.path.join(self.tmp, "c.jsonl"), "w", encoding="utf-8") as f:
            f.write("not json\n")
        stdout, stderr, code = run_cli("--replay", "c.jsonl", env=clean_env(), cwd=self.tmp)
        self.assertEqual(
            (stdout, stderr, code),
            ("", "eval_agent: error: c.jsonl: line 1: not JSON (a cassette is JSON Lines, one object a line)\n", 2),
        )
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "eval-results.json")))


class EditedReplies(TempDirTestCase):
    """A recorded reply edited by hand into something its backend never records is an error for its trial, naming
    what is wrong, never a crash of the harness (exit 4) nor a verdict made of it."""

    maxDiff = None

    def test_each_backends_misshapen_reply_is_an_error_of_its_own_trial(self) -> None:
        agent = self.serve(canned)
        misshapen: list[tuple[Any, str]] = [
            ("text", "reply: expected an object"),
            ({"error": 5, "reason": "x"}, "reply.error: expected a string"),
            ({"error": "reply:timeout"}, "reply: no reason"),
        ]
        per_backend: dict[str, tuple[dict[str, str], list[tuple[Any, str]]]] = {
            "stub": ({}, [({"said": 1}, "reply: no reply")]),
            "command": (
                {"EVAL_AGENT_CMD": f"{sys.executable} {SCRIPT_AGENT}"},
                [({"stdout": 5}, "reply.stdout: expected a string")],
            ),
            "http": (
                {"EVAL_AGENT_URL": agent.url()},
                [
                    ({"status": 200, "headers": {}, "body": {}}, "reply: no attempts"),
                    ({"status": "200", "headers": {}, "body": {}, "attempts": 1}, "reply.status: expected an HTTP"),
                    ({"status": 200, "headers": {"retry-after": 1}, "attempts": 1}, "reply.headers: expected an"),
                    ({"status": 500, "headers": {}, "attempts": 1}, "reply: no text"),
                    ({"error": "reply:timeout", "reason": "slow", "attempts": -1}, "reply.attempts: expected a whole"),
                ],
            ),
        }
        for backend, (settings, own) in per_backend.items():
            with self.subTest(backend=backend):
                env = clean_env(**settings)
                _stdout, stderr, code = run_cli("--record", "c.jsonl", "--out", "recorded.json", env=env, cwd=self.tmp)
                self.assertEqual(code, 0, stderr)
                path = os.path.join(self.tmp, "c.jsonl")
                head, *entries = cassette_lines(path)
                edits = [*misshapen, *own]
                for entry, (reply, _) in zip(entries[: len(edits)], edits, strict=True):
                    entry["reply"] = reply
                with open(path, "w", encoding="utf-8") as f:
                    f.writelines(json.dumps(line) + "\n" for line in (head, *entries))
                _stdout, stderr, code = run_cli("--replay", "c.jsonl", "--out", "replayed.json", env=env, cwd=self.tmp)
                self.assertEqual(code, 1, stderr)
                now = verdicts(self.read_json("replayed.json"))
                for entry, (_, why) in zip(entries[: len(edits)], edits, strict=True):
                    status, error_code, reason = now[entry["task"]]
                    self.assertEqual((status, error_code), ("error", "replay:bad-reply"), reason)
                    where = f"the cassette's reply for task {entry['task']}, turn 1, step 1 is not as recorded: "
                    self.assertEqual((reason or "")[: len(where + why)], where + why)
                untouched = {entry["task"] for entry in entries[len(edits) :]}
                self.assertEqual({task for task, (status, _, _) in now.items() if status == "pass"}, untouched)


class CutShort(TempDirTestCase):
    """A run cut short writes what it recorded so far."""

    def test_ctrl_c_leaves_the_cassette_of_the_exchanges_that_finished(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if len(agent.received) > 1:
                agent.release.wait(CLI_TIMEOUT)  # hold every later request until the test ends
            canned(received, handler)

        agent = self.serve(respond)
        proc = subprocess.Popen(
            [sys.executable, "-S", SCRIPT, "--record", "c.jsonl"],
            cwd=self.tmp,
            env=clean_env(EVAL_AGENT_URL=agent.url(), EVAL_CONCURRENCY="1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=stop_signals_as_from_a_terminal,
        )
        self.addCleanup(proc.kill)
        agent.wait_for_requests(2)
        proc.send_signal(signal.SIGINT)
        _stdout, stderr = proc.communicate(timeout=CLI_TIMEOUT)
        self.assertEqual(proc.returncode, 130, stderr)
        lines = cassette_lines(os.path.join(self.tmp, "c.jsonl"))
        first = canonical_task_data()["tasks"][0]["id"]
        self.assertEqual([(line.get("format"), line.get("task")) for line in lines], [(FORMAT, None), (None, first)])
