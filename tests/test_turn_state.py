"""A turn's own end state: a turn's expect.state, the environment's state taken when that turn ends and judged there,
kept in the results with the turn; a trial whose turns check none takes no state but the final one."""

from __future__ import annotations

import os
from typing import Any

from backends import BACKENDS
from eval_agent import configure
from harness.leaks import Secrets
from harness.records import AgentRequest, AgentSurface, ExpectState, Outcome, Reply, Result, Task, ToolCall
from harness.results import STATE_LIMIT, task_entry
from harness.running import run_task
from harness.taskfile import load_task_file
from tests.providers import Event, Policy, conversation_fake
from tests.support import InProcessAgent, clean_env, run_cli
from tests.test_environments import ENVS, Calling

WRITE_A, WRITE_B = "Write a.", "Now write b."
A1, B2 = ("fs_write", {"path": "a", "text": "1"}), ("fs_write", {"path": "b", "text": "2"})
COUNTED = os.path.join(ENVS, "counted.py")


def following(plan: dict[str, list[list[tuple[str, dict[str, Any]]]]]) -> Policy:
    """A model that answers each user message with its planned steps of calls, one step per request, then 'done'."""

    def policy(events: list[Event]) -> tuple[list[Any], str | None]:
        last = max(index for index, event in enumerate(events) if event[0] == "user")
        made = sum(event[0] == "assistant" for event in events[last:])
        steps = plan[events[last][1]]
        return (steps[made], None) if made < len(steps) else ([], "done")

    return policy


def two_writes(**expect: Any) -> dict[str, Any]:
    """A file system in two turns: a written in turn 1 (its state checked then), b in turn 2; both in the end."""
    return {
        "id": "t",
        "category": "c",
        "prompt": WRITE_A,
        "turns": [{"prompt": WRITE_B, "expect": {"tool": "fs.write"}}],
        "expect": {
            "trajectory": ["fs.write", "fs.write"],
            "order": "any-order",
            "firstTurn": {"tool": "fs.write", "state": {"match": {"files": {"a": "1"}}}},
            "state": {"match": {"files": {"a": "1", "b": "2"}}},
            **expect,
        },
        "environment": {"module": os.path.join(ENVS, "files.py"), "class": "FileSystem"},
    }


class Loading(Calling):
    def test_a_turns_match_loads_for_the_turn_it_is_in_and_a_task_without_one_has_none(self) -> None:
        task = self.task(
            {"tool": "fs.write", "firstTurn": {"tool": "fs.write", "state": {"match": {"files": {}}}}},
            turns=["Again.", {"prompt": "Once more.", "expect": {"noCall": True, "state": {"match": {"n": 1}}}}],
        )
        self.assertEqual(task.turn_states, (ExpectState(match={"files": {}}), None, ExpectState(match={"n": 1})))
        self.assertEqual(self.task({"tool": "fs.write"}, turns=["Again."]).turn_states, ())

    def test_a_turn_may_check_its_state_alone(self) -> None:
        task = self.task({"tool": "fs.write"}, turns=[{"prompt": "Again.", "expect": {"state": {"match": {}}}}])
        self.assertEqual((task.turn_expects, task.turn_states), ((), (None, ExpectState(match={}))))


class OnAProvider(Calling):
    """The openai backend against its fake, turn by turn, the tools answered by the environment."""

    def run_openai(self, plan: dict[str, list[list[tuple[str, dict[str, Any]]]]], item: dict[str, Any]) -> Result:
        invalid: list[str] = []
        fake = self.serve(conversation_fake("openai", following(plan), invalid))
        (task,) = load_task_file(self.task_file([item])).tasks
        settings = {"EVAL_BACKEND": "openai", "OPENAI_BASE_URL": fake.url("/v1"), "EVAL_MODEL": "m"}
        config, name, backend_settings = configure([], {"EVAL_TASKS": "tasks.json", "OPENAI_API_KEY": "k", **settings})
        surface = AgentSurface(load_task_file(os.path.join(self.tmp, "tasks.json")).tools)
        backend = BACKENDS[name](backend_settings, surface, config.run_id)
        self.addCleanup(backend.transport.close)
        result = run_task(backend, task)
        self.assertEqual(invalid, [])
        return result

    def verdicts(self, result: Result) -> list[Any]:
        entry = task_entry(result.task, [result])["trialResults"][0]
        return [(turn["verdict"]["code"], turn.get("state")) for turn in entry["conversation"]]

    def test_the_state_each_turn_ends_in_is_judged_there(self) -> None:
        result = self.run_openai({WRITE_A: [[A1]], WRITE_B: [[B2]]}, two_writes())
        self.assertEqual(result.outcome, Outcome("pass"))
        self.assertEqual(self.verdicts(result), [(None, {"files": {"a": "1"}}), (None, None)])

    def test_a_turn_whose_state_is_right_while_the_final_state_is_wrong(self) -> None:
        result = self.run_openai({WRITE_A: [[A1]], WRITE_B: [[("fs_write", {"path": "a", "text": "2"})]]}, two_writes())
        self.assertEqual(
            result.outcome, Outcome("fail", "state:mismatch", 'the state at $.files.a is "2", expected "1"')
        )
        self.assertEqual(self.verdicts(result), [(None, {"files": {"a": "1"}}), (None, None)])

    def test_a_turn_whose_state_is_wrong_while_the_final_state_is_right(self) -> None:
        early = ("fs_write", {"path": "a", "text": "0"})
        result = self.run_openai({WRITE_A: [[early]], WRITE_B: [[A1, B2]]}, two_writes())
        self.assertEqual(
            result.outcome, Outcome("fail", "state:mismatch", 'turn 1: the state at $.files.a is "0", expected "1"')
        )
        self.assertEqual(self.verdicts(result), [("state:mismatch", {"files": {"a": "0"}}), (None, None)])

    def test_a_turns_call_expectation_that_fails_stays_its_reason(self) -> None:
        item = two_writes()
        item["expect"]["firstTurn"]["tool"] = "fs.remove"
        result = self.run_openai({WRITE_A: [[A1]], WRITE_B: [[B2]]}, item)
        self.assertEqual(
            (result.outcome.code, result.outcome.reason),
            ("tool:wrong-name", "turn 1: expected fs.remove, got fs.write"),
        )


class StateRequests(Calling):
    """The worker is asked for the state only where a check needs it: counted by the environment itself."""

    def state_reads(self, **fields: Any) -> tuple[Result, int]:
        log = os.path.join(self.tmp, "reads.log")
        environment = {"module": COUNTED, "class": "CountedFiles", "config": {"log": log}}
        task = self.task({"tool": "fs.write"}, environment=environment, **fields)
        result = run_task(self.agent(("fs.write", {"path": "a", "text": "1"})), task)
        with open(log, encoding="utf-8") as f:
            return result, len(f.readlines())

    def test_a_task_without_a_turn_state_reads_only_the_final_state(self) -> None:
        result, reads = self.state_reads(turns=["Again.", {"prompt": "Once more.", "expect": {"tool": "fs.write"}}])
        self.assertEqual((result.outcome, reads), (Outcome("pass"), 1))
        self.assertEqual([turn.end for turn in result.turns], [None, None, None])

    def test_a_turn_state_is_one_more_read_when_that_turn_ends(self) -> None:
        turns = ["Again.", {"prompt": "Once more.", "expect": {"state": {"match": {"files": {"a": "1"}}}}}]
        result, reads = self.state_reads(turns=turns)
        self.assertEqual((result.outcome, reads), (Outcome("pass"), 2))
        self.assertEqual([turn.end and turn.end.state for turn in result.turns], [None, None, {"files": {"a": "1"}}])

    def test_the_agent_is_never_sent_a_turns_state(self) -> None:
        requests: list[AgentRequest] = []

        class Recording(InProcessAgent):
            def run(self, request: AgentRequest) -> Reply:
                requests.append(request)
                return (
                    Reply(tool_calls=(ToolCall("fs.write", {"path": "a", "text": "1"}),))
                    if not request.steps
                    else Reply(text="done")
                )

        task = self.task({"tool": "fs.write", "firstTurn": {"state": {"match": {}}}}, turns=["Again."])
        result = run_task(Recording(), task)
        self.assertEqual(result.turns[0].end and result.turns[0].end.state, {"files": {"a": "1"}})
        self.assertEqual([turn.end for request in requests for turn in request.history], [None, None])

    def test_a_world_that_fails_as_its_turn_state_is_read_makes_the_trial_an_error(self) -> None:
        environment = {"module": COUNTED, "class": "CountedFiles", "config": {"log": os.path.join(self.tmp, "no", "x")}}
        expect = {"tool": "fs.write", "firstTurn": {"state": {"match": {}}}}
        task = self.task(expect, environment=environment, turns=["Again."])
        result = run_task(self.agent(("fs.write", {"path": "a", "text": "1"})), task)
        self.assertEqual((result.outcome.status, result.outcome.code), ("error", "tool:environment"))
        self.assertTrue(
            (result.outcome.reason or "").startswith(
                "the environment failed: CountedFiles.state raised FileNotFoundError: [Errno 2] No such file"
            ),
            result.outcome.reason,
        )
        self.assertEqual(len(result.turns), 1, "the conversation ends with the turn whose state failed")


class Recorded(Calling):
    def test_a_turns_state_is_kept_cut_like_the_final_state_and_masked(self) -> None:
        task = self.task({"tool": "fs.write", "firstTurn": {"state": {"match": {}}}}, turns=[{"prompt": "Again."}])
        big = "s3cr3t-value-1234 " + "x" * STATE_LIMIT
        result = run_task(
            self.agent(("fs.write", {"path": "a", "text": big})), task, hidden=Secrets({"s3cr3t-value-1234": "TOKEN"})
        )
        first, second = task_entry(task, [result])["trialResults"][0]["conversation"]
        self.assertEqual((len(first["state"]), first["stateCut"]), (STATE_LIMIT, True))
        self.assertNotIn("s3cr3t-value-1234", first["state"])
        self.assertNotIn("state", second)

    def test_a_task_with_no_turn_state_records_none(self) -> None:
        task: Task = self.task({"tool": "fs.write"}, turns=["Again."])
        result = run_task(self.agent(("fs.write", {"path": "a", "text": "1"})), task)
        conversation = task_entry(task, [result])["trialResults"][0]["conversation"]
        self.assertEqual([sorted(turn) for turn in conversation], [["steps", "user"], ["steps", "user"]])


class FromTheCommandLine(Calling):
    def test_a_run_keeps_each_checked_turns_state_and_the_results_read_back(self) -> None:
        early = ("fs_write", {"path": "a", "text": "0"})
        fake = self.serve(conversation_fake("openai", following({WRITE_A: [[early]], WRITE_B: [[A1, B2]]}), []))
        self.task_file([two_writes()])
        settings = {"EVAL_BACKEND": "openai", "OPENAI_BASE_URL": fake.url("/v1"), "EVAL_MODEL": "m"}
        env = clean_env(EVAL_TASKS="tasks.json", OPENAI_API_KEY="k", **settings)
        _, stderr, code = run_cli("--out", "run.json", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 1))
        trial = self.read_json("run.json")["results"][0]["trialResults"][0]
        self.assertEqual(trial["reason"], 'turn 1: the state at $.files.a is "0", expected "1"')
        self.assertEqual([turn.get("state") for turn in trial["conversation"]], [{"files": {"a": "0"}}, None])
        self.assertEqual(trial["finalState"], {"files": {"a": "1", "b": "2"}})
        _, stderr, code = run_cli("report", "run.json", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0), "a results file with a turn's state loads back")
