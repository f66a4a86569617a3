"""A cassette of an agent that runs its own tools holds the calls the tool server answered with each reply; a replay,
with the agent stopped, plays them back to a fresh world and judges them as recorded, state included."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support import DATA, ROOT, Received, Respond, TempDirTestCase, call_served, clean_env, run_cli, send_json
from tests.test_cassette import cassette_lines, comparable
from tests.test_docs import CAREFUL, CARELESS, WORLDS
from tests.test_served_tools import WORLD_TASKS, McpAgent, first_user_message, verdicts

TOKEN = "tok-ghijklmnopqrstuvwx"  # letters no hash or run id holds


class ReplayedWorlds(TempDirTestCase):
    """examples/worlds on an in-app agent using the MCP SDK's client, recorded, then replayed with the agent gone."""

    maxDiff = None

    def env(self, agent_url: str, tasks: str = WORLD_TASKS, **environ: str) -> dict[str, str]:
        return clean_env(EVAL_AGENT_URL=agent_url, EVAL_TASKS=tasks, EVAL_TOOL_NAMES="safe", **environ)

    def record(self, agent: Respond, *args: str, tasks: str = WORLD_TASKS) -> tuple[dict[str, Any], int]:
        """The agent's run recorded to c.jsonl, the agent stopped once it is; its results and exit code."""
        served = self.serve(agent)
        argv = ("--record", "c.jsonl", "--out", "recorded.json", *args)
        stdout, stderr, code = run_cli(*argv, env=self.env(served.url(), tasks), cwd=self.tmp)
        self.assertEqual(stderr, "", stdout)
        served.__exit__()
        self.agent_url = served.url()
        return self.read_json("recorded.json"), code

    def replay(self, *args: str, tasks: str = WORLD_TASKS) -> tuple[str, str, int]:
        """c.jsonl replayed, with the agent stopped."""
        argv = ("--replay", "c.jsonl", "--out", "replayed.json", *args)
        return run_cli(*argv, env=self.env(self.agent_url, tasks), cwd=self.tmp)

    def record_and_replay(self, agent: McpAgent, *args: str, tasks: str = WORLD_TASKS) -> None:
        """The replay's results are the recorded run's, but for timing, and so is its exit code."""
        recorded, code = self.record(agent, *args, tasks=tasks)
        stdout, stderr, replay_code = self.replay(*args, tasks=tasks)
        self.assertEqual((stderr, replay_code), ("", code), stdout)
        self.assertEqual(comparable(self.read_json("replayed.json")), comparable(recorded))

    def test_the_careful_agent_replayed_with_it_stopped_passes_every_task_in_the_same_end_states(self) -> None:
        self.record_and_replay(McpAgent(CAREFUL))
        replayed = self.read_json("replayed.json")
        self.assertEqual({status for status, _, _ in verdicts(replayed).values()}, {"pass"})
        trial = replayed["results"][1]["trialResults"][0]
        self.assertEqual(trial["finalState"]["shared"], {"notes.txt": ["ana@example.com"]})

    def test_the_careless_agent_replayed_fails_as_it_did_live_the_wrong_address_on_the_state(self) -> None:
        self.record_and_replay(McpAgent(CARELESS))
        share = verdicts(self.read_json("replayed.json"))["share-with-ana"]
        self.assertEqual(share[:2], ("fail", "state:mismatch"))

    def test_record_missing_sends_only_the_missing_tasks_to_the_agent_and_records_their_served_calls(self) -> None:
        self.record(McpAgent(CAREFUL), "--task", "share-with-ana")
        agent = McpAgent(CAREFUL)
        served = self.serve(agent)
        argv = ("--replay", "c.jsonl", "--record-missing", "--out", "filled.json")
        stdout, stderr, code = run_cli(*argv, env=self.env(served.url()), cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0), stdout)
        self.assertEqual(
            sorted({first_user_message(body) for body in agent.bodies}),
            ["Rename draft.txt to final.txt and delete old-notes.txt.", "What's in my folder?"],
        )
        served.__exit__()
        self.agent_url = served.url()
        stdout, stderr, code = self.replay()
        self.assertEqual((stderr, code), ("", 0), stdout)
        self.assertEqual(comparable(self.read_json("replayed.json")), comparable(self.read_json("filled.json")))

    def test_the_cassette_holds_each_exchange_s_served_calls_in_order(self) -> None:
        self.record(McpAgent(CARELESS), "--task", "share-with-ana")
        (entry,) = cassette_lines(os.path.join(self.tmp, "c.jsonl"))[1:]
        self.assertEqual(
            entry["served"],
            [
                {
                    "name": "contacts.find",
                    "calledAs": "contacts_find",
                    "args": {"name": "Anna"},
                    "result": {"error": "no contact by that name"},
                    "source": "default",
                },
                {
                    "name": "fs.share",
                    "calledAs": "fs_share",
                    "args": {"path": "notes.txt", "email": "anna@example.com"},
                    "result": "shared notes.txt with anna@example.com",
                    "source": "environment",
                },
            ],
        )

    def test_calls_the_agent_left_unreported_or_reported_but_never_made_replay_as_they_were_judged(self) -> None:
        self.record_and_replay(McpAgent(CAREFUL, report=False), "--task", "share-with-ana")
        self.record_and_replay(McpAgent(CAREFUL, make=False), "--task", "share-with-ana")
        self.assertEqual(verdicts(self.read_json("replayed.json"))["share-with-ana"][1], "tool:unobserved")

    def test_a_tool_that_failed_first_replays_its_injected_error_and_the_recovery(self) -> None:
        with open(WORLD_TASKS, encoding="utf-8") as f:
            data = json.load(f)
        shutil.copy(os.path.join(ROOT, WORLDS, "files.py"), self.tmp)
        (task,) = [task for task in data["tasks"] if task["id"] == "share-with-ana"]
        task["toolResults"] = {"fs.share": {"failFirst": 1}}
        data["tasks"] = [task]
        tasks = self.write_json("tasks.json", data)
        self.record_and_replay(McpAgent(CAREFUL, tries=2), tasks=tasks)
        (step,) = self.read_json("replayed.json")["results"][0]["trialResults"][0]["conversation"][0]["steps"]
        self.assertEqual([result["source"] for result in step["results"]], ["case", "injected", "environment"])

    def test_a_served_result_that_differs_on_replay_is_a_miss_naming_the_call_and_what_differs(self) -> None:
        self.record(McpAgent(CAREFUL), "--task", "share-with-ana")
        path = os.path.join(self.tmp, "c.jsonl")
        head, entry = cassette_lines(path)
        entry["served"][1]["result"] = "shared notes.txt with bo@example.com"  # the world answered otherwise then
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(line) + "\n" for line in (head, entry)))
        stdout, stderr, code = self.replay("--task", "share-with-ana")
        self.assertEqual((stderr, code), ("", 1), stdout)
        status, code_, reason = verdicts(self.read_json("replayed.json"))["share-with-ana"]
        self.assertEqual((status, code_), ("error", "replay:miss"))
        self.assertEqual(
            reason,
            "the tool server's answers for task share-with-ana, turn 1, step 1 differ from the recorded ones: "
            'served[1], fs.share({"path": "notes.txt", "email": "ana@example.com"}): its result differs',
        )

    def test_a_cassette_recorded_before_served_calls_were_kept_is_refused_for_a_state_task_a_miss_otherwise(
        self,
    ) -> None:
        self.record(McpAgent(CAREFUL), "--task", "share-with-ana")
        path = os.path.join(self.tmp, "c.jsonl")
        head, entry = cassette_lines(path)
        del entry["served"]
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(line) + "\n" for line in (head, entry)))
        stdout, stderr, code = self.replay("--task", "share-with-ana")
        self.assertEqual((stdout, code), ("", 2))
        self.assertEqual(
            stderr,
            f"eval_agent: error: {WORLD_TASKS}: tasks[1].expect.state: a replay of the http backend's agent, which "
            "runs its own tools, has no served calls to judge a state by; run state checks live (the harness serves "
            "the agent its tools) or on a provider backend\n",
        )
        with open(WORLD_TASKS, encoding="utf-8") as f:
            data = json.load(f)
        shutil.copy(os.path.join(ROOT, WORLDS, "files.py"), self.tmp)
        for task in data["tasks"]:
            del task["expect"]["state"]
        stdout, stderr, code = self.replay("--task", "share-with-ana", tasks=self.write_json("tasks.json", data))
        self.assertEqual((stderr, code), ("", 1), stdout)
        status, code_, reason = verdicts(self.read_json("replayed.json"))["share-with-ana"]
        self.assertEqual(
            (status, code_, reason),
            (
                "error",
                "replay:miss",
                "no recorded reply for task share-with-ana, turn 1, step 1: recorded without its tools served",
            ),
        )

    def test_no_secret_nor_trial_path_is_recorded_even_when_the_agent_says_them_back(self) -> None:
        paths: list[str] = []

        def echoes(received: Received, handler: BaseHTTPRequestHandler) -> None:
            server = received.json["toolServer"]
            paths.append(server["url"].split("/", 3)[3].rsplit("/", 1)[0])
            call_served(server["callUrl"], "fs_read", {"path": f"{server['url']} {TOKEN}"})
            reply = {"toolCall": {"name": "fs_read", "args": {"path": f"{server['url']} {TOKEN}"}}}
            send_json(handler, {**reply, "text": f"I used {server['url']} with {TOKEN}"})

        agent = self.serve(echoes)
        env = self.env(agent.url(), EVAL_AGENT_TOKEN=TOKEN)
        _, stderr, _ = run_cli("--task", "tidy-up", "--record", "c.jsonl", env=env, cwd=self.tmp)
        self.assertEqual(stderr, "")
        with open(os.path.join(self.tmp, "c.jsonl"), encoding="utf-8") as f:
            written = f.read()
        self.assertEqual(len(paths), 1)
        self.assertIn("I used http://", written)
        self.assertIn('"served":[{"name":"fs.read"', written)
        for secret in (paths[0], TOKEN):
            self.assertNotIn(secret, written)

    def test_a_trial_path_the_agent_said_back_replays_masked_as_it_was_live(self) -> None:
        def echoes(received: Received, handler: BaseHTTPRequestHandler) -> None:
            server = received.json["toolServer"]
            call_served(server["callUrl"], "fs_read", {"path": server["callUrl"]})
            send_json(
                handler, {"toolCall": {"name": "fs_read", "args": {"path": server["url"]}}, "text": server["url"]}
            )

        recorded, code = self.record(echoes, "--task", "tidy-up")
        stdout, stderr, replay_code = self.replay("--task", "tidy-up")
        self.assertEqual((stderr, replay_code), ("", code), stdout)
        replayed = self.read_json("replayed.json")
        self.assertEqual(comparable(replayed), comparable(recorded))
        self.assertRegex(replayed["results"][0]["trialResults"][0]["text"], r"^http://127\.0\.0\.1:\d+\*\*\*$")

    def test_a_secret_sent_in_a_served_call_the_reply_leaves_out_is_a_leak_replayed_as_it_was_live(self) -> None:
        def leaks(received: Received, handler: BaseHTTPRequestHandler) -> None:
            call_served(received.json["toolServer"]["callUrl"], "fs_read", {"path": TOKEN})
            send_json(handler, {"text": "Done."})

        agent = self.serve(leaks)
        env = self.env(agent.url(), EVAL_AGENT_TOKEN=TOKEN)
        argv = ("--task", "tidy-up", "--record", "c.jsonl", "--out", "recorded.json")
        _, stderr, code = run_cli(*argv, env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 1))
        agent.__exit__()
        argv = ("--task", "tidy-up", "--replay", "c.jsonl", "--out", "replayed.json")
        stdout, stderr, code = run_cli(*argv, env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 1), stdout)
        replayed = self.read_json("replayed.json")
        self.assertEqual(comparable(replayed), comparable(self.read_json("recorded.json")))
        self.assertEqual(verdicts(replayed)["tidy-up"][1], "leak:secret")

    def test_a_served_call_with_a_nan_argument_replays_as_it_was_judged_live(self) -> None:
        def computes(received: Received, handler: BaseHTTPRequestHandler) -> None:
            args = {"name": "Ana", "score": float("nan")}  # json.dumps writes NaN: a Python agent's 0/0
            call_served(received.json["toolServer"]["callUrl"], "contacts_find", args)
            send_json(handler, {"toolCalls": [{"name": "contacts_find", "args": {"name": "Ana"}}], "text": "Done."})

        recorded, code = self.record(computes, "--task", "share-with-ana")
        stdout, stderr, replay_code = self.replay("--task", "share-with-ana")
        self.assertEqual((stderr, replay_code), ("", code), stdout)
        self.assertNotIn("replay:miss", stdout)
        self.assertEqual(comparable(self.read_json("replayed.json")), comparable(recorded))


class ReplayedCommand(TempDirTestCase):
    """A command agent served its tools at EVAL_TOOL_SERVER_URL, recorded, then replayed without running it."""

    def test_a_command_agent_s_served_calls_replay_without_the_command(self) -> None:
        decisions = {
            "Share notes.txt with Ana.": [
                [["contacts.find", {"name": "Ana"}], ["fs.share", {"path": "notes.txt", "email": "ana@example.com"}]]
            ]
        }
        agent = os.path.join(DATA, "agents", "mcp_agent.py")
        command = f"{sys.executable} {agent} {self.write_json('decisions.json', decisions)}"
        env = clean_env(EVAL_AGENT_CMD=command, EVAL_TASKS=WORLD_TASKS)
        args = ("--task", "share-with-ana")
        _, stderr, code = run_cli(*args, "--record", "c.jsonl", "--out", "recorded.json", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        os.remove(os.path.join(self.tmp, "decisions.json"))  # the agent cannot run: a replay starts no command
        _, stderr, code = run_cli(*args, "--replay", "c.jsonl", "--out", "replayed.json", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        recorded: Mapping[str, Any] = self.read_json("recorded.json")
        self.assertEqual(comparable(self.read_json("replayed.json")), comparable(recorded))
        self.assertEqual(
            recorded["results"][0]["trialResults"][0]["finalState"]["shared"], {"notes.txt": ["ana@example.com"]}
        )
