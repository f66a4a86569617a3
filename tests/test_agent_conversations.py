"""Conversations with agents that run their own tools (http, command): one request per user turn, carrying the
conversation's id, the turn and the messages so far, so a stateless agent answers from the body and a stateful one from
the id."""

from __future__ import annotations

import os
import sys
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support import (
    DATA,
    Received,
    TempDirTestCase,
    canonical_task_data,
    clean_env,
    on_served_tools,
    run_cli,
    send_json,
)

QUESTION = "What should the banner show?"
ANSWER = "A lighthouse at dawn."
GENERATE = "imageman.ai.image.generate"
BANNER = {
    "id": "banner",
    "category": "ai.image.generate",
    "prompt": "Make us a banner.",
    "turns": [ANSWER],
    "toolResults": {GENERATE: {"id": "ast_g1"}},
    "expect": {"trajectory": [{"tool": GENERATE, "turn": 2}], "order": "exact"},
}
SINGLE = {
    "id": "single",
    "category": "asset.search",
    "prompt": "Find the launch photos.",
    "toolResults": {"imageman.asset.search": {"assets": []}},
    "expect": {"tool": "imageman.asset.search"},
}


def generate(prompt: str) -> dict[str, Any]:
    return {"toolCall": {"name": GENERATE, "args": {"prompt": prompt}}}


def stateless(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """An agent that keeps nothing: the conversation so far comes in `messages`; it calls the tools it is served."""
    body = received.json
    if body["taskId"] == "single":
        send_json(
            handler, on_served_tools(body, {"toolCall": {"name": "imageman.asset.search", "args": {"query": "launch"}}})
        )
        return
    messages = body["messages"]
    if len(messages) == 1:
        send_json(handler, {"text": QUESTION})
    elif messages[1] == {"role": "assistant", "content": QUESTION, "toolCalls": []}:
        send_json(handler, on_served_tools(body, generate(messages[-1]["content"])))
    else:
        send_json(handler, {"text": "I have no idea what we said."})


class StatefulAgent:
    """An agent that remembers each conversation by its id and reads nothing but the newest message."""

    def __init__(self) -> None:
        self.asked: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, received: Received, handler: BaseHTTPRequestHandler) -> None:
        body = received.json
        with self.lock:
            first = body["conversationId"] not in self.asked
            self.asked.add(body["conversationId"])
        send_json(handler, {"text": QUESTION} if first else on_served_tools(body, generate(body["prompt"])))


class AgentConversations(TempDirTestCase):
    def run_http(self, respond: Any, *args: str) -> tuple[str, str, int]:
        data = canonical_task_data()
        data["tasks"] = [BANNER, SINGLE]
        tasks = self.write_json("tasks.json", data)
        agent = self.serve(respond)
        self.received = agent.received
        return run_cli(*args, env=clean_env(EVAL_AGENT_URL=agent.url(), EVAL_TASKS=tasks), cwd=self.tmp)

    def test_a_stateless_agent_answers_the_second_turn_from_messages_alone(self) -> None:
        stdout, stderr, code = self.run_http(stateless)
        self.assertEqual((stderr, code), ("", 0), stdout)
        banner = [r.json for r in self.received if r.json["taskId"] == "banner"]
        self.assertEqual(len(banner), 2, "one request per turn: the agent runs its own tools")
        first, second = banner
        self.assertEqual(
            set(second),
            {
                "prompt",
                "taskId",
                "runId",
                "trialId",
                "trial",
                "attempt",
                "conversationId",
                "turn",
                "messages",
                "toolServer",
            },
        )
        self.assertEqual((first["turn"], second["turn"], second["prompt"]), (1, 2, ANSWER))
        self.assertEqual(first["conversationId"], second["conversationId"])
        self.assertEqual(
            second["messages"],
            [
                {"role": "user", "content": "Make us a banner."},
                {"role": "assistant", "content": QUESTION, "toolCalls": []},
                {"role": "user", "content": ANSWER},
            ],
        )
        self.assertNotIn("toolResults", str(second), "an agent that runs its own tools gets no scripted results")
        self.assertIn("turn 1: (no call) | turn 2: imageman.ai.image.generate(prompt)  (2 steps, 2 turns)", stdout)

    def test_a_task_without_turns_has_no_conversation_in_its_body(self) -> None:
        self.run_http(stateless)
        (single,) = [r.json for r in self.received if r.json["taskId"] == "single"]
        self.assertEqual(set(single), {"prompt", "taskId", "runId", "trialId", "trial", "attempt", "toolServer"})

    def test_a_stateful_agent_answers_from_the_conversation_id_one_per_trial(self) -> None:
        agent = StatefulAgent()
        stdout, stderr, code = self.run_http(agent, "--runs", "3", "--concurrency", "3", "--task", "banner")
        self.assertEqual((stderr, code), ("", 0), stdout)
        self.assertEqual(len(agent.asked), 3, "each trial is a conversation of its own")
        entry = self.read_json("eval-results.json")["results"][0]
        ids = {trial["conversationId"] for trial in entry["trialResults"]}
        self.assertEqual(ids, agent.asked)

    def test_the_command_backend_runs_one_process_per_turn_with_the_same_body(self) -> None:
        data = canonical_task_data()
        data["tasks"] = [BANNER]
        tasks = self.write_json("tasks.json", data)
        command = f"{sys.executable} {os.path.join(DATA, 'agents', 'script_agent.py')} converse"
        stdout, stderr, code = run_cli(env=clean_env(EVAL_AGENT_CMD=command, EVAL_TASKS=tasks), cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0), stdout)
        trial = self.read_json("eval-results.json")["results"][0]["trialResults"][0]
        self.assertEqual((trial["turns"], trial["steps"]), (2, 2))
        self.assertEqual(trial["toolCalls"], [{"name": GENERATE, "args": {"prompt": ANSWER}}])
