"""Tool environments: the user's Python class answering tool calls from a worker process, and the state it ends in."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
import unittest
from typing import Any
from unittest import mock

from backends import BACKENDS
from eval_agent import configure
from harness.environments import MAX_OUTPUT, World, WorldError, check_environments
from harness.leaks import Secrets
from harness.records import AgentRequest, AgentSurface, ConfigError, Environment, Outcome, Reply, Task, ToolCall
from harness.results import STATE_LIMIT, task_entry
from harness.running import run_task
from harness.scoring import ABSENT, state_mismatch
from harness.taskfile import load_task_file
from harness.text import JSON_DEPTH, expected_text
from tests.providers import Event, conversation_fake
from tests.support import (
    DATA,
    SCRIPT,
    InProcessAgent,
    TempDirTestCase,
    clean_env,
    run_cli,
    stop_signals_as_from_a_terminal,
)

ENVS = os.path.join(DATA, "envs")
FILES = os.path.join(ENVS, "files.py")
HOSTILE = os.path.join(ENVS, "hostile.py")
UNRULY = os.path.join(ENVS, "unruly.py")
TOOLS = [
    {"name": name, "inputSchema": {"type": "object", "properties": {key: {"type": "string"} for key in keys}}}
    for name, keys in {
        "fs.write": ("path", "text"),
        "fs.read": ("path",),
        "fs.remove": ("path",),
        "fs.ls": (),
    }.items()
]


def spec(module: str = FILES, class_name: str = "FileSystem", **fields: Any) -> Environment:
    """An environment as a task file would give it, answering the fs tools by their last name."""
    methods = {tool["name"]: tool["name"].rsplit(".", 1)[-1] for tool in TOOLS}
    return Environment(module=module, class_name=class_name, config=fields.pop("config", {}), methods=methods, **fields)


class Calling(TempDirTestCase):
    """An agent in this process that makes the calls it is given, one reply each, then answers in text."""

    def agent(self, *calls: tuple[str, dict[str, Any]]) -> InProcessAgent:
        class Scripted(InProcessAgent):
            def run(self, request: AgentRequest) -> Reply:
                made = len(request.steps)
                if made < len(calls):
                    return Reply(tool_calls=(ToolCall(*calls[made]),))
                return Reply(text="done")

        return Scripted()

    def task_file(self, tasks: list[dict[str, Any]], **top: Any) -> str:
        self.write_json("tasks.json", {"version": 1, "tools": TOOLS, "tasks": tasks, **top})
        return os.path.join(self.tmp, "tasks.json")

    def task(self, expect: dict[str, Any], **fields: Any) -> Task:
        environment = fields.pop("environment", {"module": FILES, "class": "FileSystem"})
        item = {"id": "t", "category": "c", "prompt": "p", "expect": expect, "environment": environment, **fields}
        return load_task_file(self.task_file([item])).tasks[0]


class TheWorker(unittest.TestCase):
    def test_a_call_runs_the_method_with_the_arguments_as_keywords(self) -> None:
        opened = World(spec(config={"files": {"a": "1"}}))
        self.addCleanup(opened.close)
        result = opened.call(ToolCall("fs.write", {"path": "b", "text": "hi"}))
        self.assertEqual((result.content, result.source), ("wrote 2 characters to b", "environment"))
        self.assertEqual(opened.call(ToolCall("fs.remove", {"path": "a"})).content, {"removed": "a", "left": 1})

    def test_an_exception_is_the_tools_answer(self) -> None:
        opened = World(spec())
        self.addCleanup(opened.close)
        self.assertEqual(opened.call(ToolCall("fs.read", {"path": "x"})).content, {"error": "FileNotFoundError: x"})
        wrong = opened.call(ToolCall("fs.read", {"name": "x"})).content
        self.assertTrue(wrong["error"].startswith("TypeError: "), wrong)

    def test_the_state_is_the_state_method_or_else_the_public_attributes(self) -> None:
        opened = World(spec(config={"files": {"a": "1"}}))
        self.addCleanup(opened.close)
        self.assertEqual(opened.state(), {"files": {"a": "1"}})
        counting = Environment(
            module=os.path.join(ENVS, "counter.py"), class_name="Counter", config={"start": 2}, methods={"add": "add"}
        )
        counter = World(counting)
        self.addCleanup(counter.close)
        self.assertEqual(counter.call(ToolCall("add", {"amount": 3})).content, 5)
        self.assertEqual(counter.state(), {"count": 5, "history": [3]})

    def test_only_the_methods_the_class_has_are_implemented(self) -> None:
        opened = World(spec())
        self.addCleanup(opened.close)
        self.assertEqual([opened.implements(tool["name"]) for tool in TOOLS], [True, True, True, False])

    def test_the_harness_secrets_stay_out_of_the_workers_environment(self) -> None:
        methods = {"fs.read": "variable"}
        counter = Environment(module=os.path.join(ENVS, "counter.py"), class_name="Counter", config={}, methods=methods)
        opened = World(counter, Secrets({"s3cr3t-value-1234": "WORLDS_TEST_TOKEN"}))
        self.addCleanup(opened.close)
        variables = {"WORLDS_TEST_TOKEN": "s3cr3t-value-1234", "WORLDS_TEST_PLAIN": "plain"}
        with mock.patch.dict(os.environ, variables):
            opened.implements("fs.read")  # the worker starts with the environment as it is now
        self.assertIsNone(opened.call(ToolCall("fs.read", {"name": "WORLDS_TEST_TOKEN"})).content)
        self.assertEqual(opened.call(ToolCall("fs.read", {"name": "WORLDS_TEST_PLAIN"})).content, "plain")


class HostileEnvironments(unittest.TestCase):
    """Whatever the user's code does, the harness hears a WorldError, with what the worker last wrote."""

    def failure(self, method: str) -> str:
        hostile = Environment(module=HOSTILE, class_name="Hostile", config={}, methods={"h": method}, timeout=1.0)
        opened = World(hostile)
        self.addCleanup(opened.close)
        with self.assertRaises(WorldError) as caught:
            opened.call(ToolCall("h", {}))
        process = opened.process
        opened.close()
        self.assertIsNotNone(process and process.poll(), "the worker is killed once it failed")
        return str(caught.exception)

    def test_a_method_that_hangs_past_the_timeout(self) -> None:
        self.assertEqual(
            self.failure("hang"), "the environment failed: no answer within 1 s; its last output:\nabout to hang"
        )

    def test_a_method_that_calls_os_exit(self) -> None:
        self.assertEqual(
            self.failure("leave"), "the environment failed: it exited with code 3; its last output:\nleaving now"
        )

    def test_a_print_without_a_flush_is_quoted_when_the_method_then_exits(self) -> None:
        self.assertEqual(
            self.failure("mutter"), "the environment failed: it exited with code 4; its last output:\nlast words"
        )

    def test_a_method_that_kills_its_process(self) -> None:
        self.assertEqual(self.failure("crash"), f"the environment failed: it was ended by signal {signal.SIGKILL}")

    def test_a_method_that_prints_megabytes(self) -> None:
        reason = self.failure("shout")
        self.assertTrue(reason.startswith(f"the environment failed: it printed more than {MAX_OUTPUT} bytes"), reason)
        self.assertLess(len(reason), 2200)

    def test_a_method_that_returns_what_is_not_json(self) -> None:
        self.assertEqual(
            self.failure("odd"),
            "the environment failed: Hostile.odd returned what is not JSON "
            "(TypeError: Object of type set is not JSON serializable)",
        )

    def test_a_process_the_environment_started_ends_with_its_worker(self) -> None:
        hostile = Environment(module=HOSTILE, class_name="Hostile", config={}, methods={"h": "spawn"}, timeout=5.0)
        opened = World(hostile)
        self.addCleanup(opened.close)
        child = opened.call(ToolCall("h", {})).content
        self.addCleanup(_end, child)  # when the test fails
        opened.close()
        deadline = time.monotonic() + 10
        while _alive(child):
            self.assertLess(time.monotonic(), deadline, "a process the environment started outlived its worker")
            time.sleep(0.05)

    def test_a_method_that_returns_json_nested_too_deeply_to_judge(self) -> None:
        self.assertEqual(
            self.failure("deep"),
            f"the environment failed: Hostile.deep returned JSON nested more than {JSON_DEPTH} levels",
        )

    def test_a_method_that_writes_what_is_not_json_where_the_answers_go(self) -> None:
        self.assertEqual(self.failure("scribble"), "the environment failed: it answered what is not JSON: not json")

    def test_a_state_nested_too_deeply_to_judge(self) -> None:
        deep = Environment(module=HOSTILE, class_name="DeepState", config={}, methods={"h": "ping"}, timeout=1.0)
        opened = World(deep)
        self.addCleanup(opened.close)
        with self.assertRaises(WorldError) as caught:
            opened.state()
        self.assertEqual(
            str(caught.exception),
            f"the environment failed: DeepState.state returned JSON nested more than {JSON_DEPTH} levels",
        )

    def test_a_module_that_fails_to_import(self) -> None:
        broken = spec(os.path.join(ENVS, "fails_to_import.py"))
        opened = World(broken)
        self.addCleanup(opened.close)
        with self.assertRaises(WorldError) as caught:
            opened.implements("fs.read")
        self.assertEqual(str(caught.exception), "RuntimeError: this environment cannot be imported")


class UnrulyEnvironments(unittest.TestCase):
    """A tool that writes where it should not, reads stdin or forks answers in turn, or fails its own trial only."""

    def world(self, class_name: str) -> World:
        unruly = Environment(module=UNRULY, class_name=class_name, config={}, methods={"t": "touch"}, timeout=5.0)
        opened = World(unruly)
        self.addCleanup(opened.close)
        return opened

    def touched_twice(self, class_name: str) -> tuple[list[Any], Any]:
        opened = self.world(class_name)
        return [opened.call(ToolCall("t", {})).content for _ in range(2)], opened.state()

    def test_what_a_tool_prints_never_reaches_the_answers(self) -> None:
        self.assertEqual(self.touched_twice("Printer"), (["touched", "touched"], {"touched": 2}))

    def test_what_a_tool_writes_to_file_descriptor_1_never_reaches_the_answers(self) -> None:
        self.assertEqual(self.touched_twice("Writer"), (["touched", "touched"], {"touched": 2}))

    def test_a_tool_that_reads_stdin_reads_nothing_of_the_requests(self) -> None:
        self.assertEqual(self.touched_twice("Reader"), (["touched", "touched"], {"touched": 2}))

    def test_a_child_a_tool_forks_and_does_not_end_never_answers(self) -> None:
        self.assertEqual(self.touched_twice("Forker"), (["touched", "touched"], {"touched": 2}))

    def test_a_line_written_to_the_answers_pipe_is_an_answer_out_of_turn(self) -> None:
        opened = self.world("Forger")
        with self.assertRaises(WorldError) as caught:
            opened.call(ToolCall("t", {}))
        self.assertEqual(str(caught.exception), 'the environment failed: it answered out of turn: {"result": "forged"}')

    def test_a_state_method_that_raises_is_said_in_a_sentence(self) -> None:
        opened = self.world("BadState")
        with self.assertRaises(WorldError) as caught:
            opened.state()
        self.assertEqual(str(caught.exception), "the environment failed: BadState.state raised KeyError: 'files'")

    def test_a_class_with_slots_and_no_state_method_cannot_start(self) -> None:
        with self.assertRaises(WorldError) as caught:
            self.world("Slotted").implements("t")
        self.assertEqual(
            (str(caught.exception), caught.exception.key),
            (
                "Slotted has no state() method, and its instances (of a class with __slots__) no attributes to take "
                "the state from: give Slotted a state() that returns its state as JSON",
                "class",
            ),
        )


class StateMismatch(unittest.TestCase):
    def test_a_subset_of_objects_by_key_and_arrays_and_scalars_exactly(self) -> None:
        state = {"files": {"a": "1", "b": "2"}, "log": ["x", "y"], "n": 1}
        table = [
            ({"files": {"a": "1"}}, None),
            ({"n": 1.0}, None),
            ({}, None),
            ({"files": {"a": "2"}}, ("$.files.a", "2", "1")),
            ({"files": {"c": "3"}}, ("$.files.c", "3", ABSENT)),
            ({"log": ["x"]}, ("$.log", ["x"], ["x", "y"])),
            ({"log": ["x", "z"]}, ("$.log[1]", "z", "y")),
            ({"n": True}, ("$.n", True, 1)),
            ({"files": None}, ("$.files", None, {"a": "1", "b": "2"})),
        ]
        for expected, mismatch in table:
            with self.subTest(expected):
                self.assertEqual(state_mismatch(expected, state), mismatch)

    def test_exact_also_names_a_key_the_expected_state_does_not_have(self) -> None:
        self.assertEqual(state_mismatch({"a": 1}, {"a": 1, "b": 2}, exact=True), ("$.b", ABSENT, 2))
        self.assertIsNone(state_mismatch({"a": [{"b": 1}]}, {"a": [{"b": 1}]}, exact=True))
        self.assertEqual(state_mismatch({"a": [{}]}, {"a": [{"b": 1}]}), ("$.a[0].b", ABSENT, 1))


class ScriptsAndTheWorld(Calling):
    def test_a_call_no_case_matches_goes_to_the_world_and_a_matching_one_is_scripted(self) -> None:
        cases = {"cases": [{"args": {"path": "a.txt"}, "result": "scripted a"}]}
        world = {"module": FILES, "class": "FileSystem", "config": {"files": {"b.txt": "from the world"}}}
        task = self.task({"tool": "fs.read"}, toolResults={"fs.read": cases}, environment=world)
        result = run_task(self.agent(("fs.read", {"path": "a.txt"}), ("fs.read", {"path": "b.txt"})), task)
        played = [result for step in result.turns[0].steps for result in step.results]
        self.assertEqual(
            [(one.content, one.source) for one in played], [("scripted a", "case"), ("from the world", "environment")]
        )


class EndStates(Calling):
    def test_what_a_task_expects_says_the_end_state_it_checks(self) -> None:
        match = self.task({"tool": "fs.write", "state": {"match": {"files": {"a.txt": "hi"}}}})
        reference = self.task(
            {"tool": "fs.write", "argValues": {"path": ["a.txt"], "text": ["hi"]}, "state": "reference"}
        )
        self.assertEqual(
            [expected_text(match), expected_text(reference)],
            [
                'fs.write(), ending in a state that holds {"files": {"a.txt": "hi"}}',
                "the end state of fs.write(path, text), reached by any order or path",
            ],
        )
        self.assertEqual(expected_text(self.task({"tool": "fs.write"})), "fs.write()")

    def test_a_match_passes_on_the_state_the_calls_made(self) -> None:
        task = self.task({"tool": "fs.write", "state": {"match": {"files": {"a.txt": "hi"}}}})
        result = run_task(self.agent(("fs.write", {"path": "a.txt", "text": "hi"})), task)
        self.assertEqual(result.outcome, Outcome("pass"))
        self.assertEqual(result.end and result.end.state, {"files": {"a.txt": "hi"}})
        self.assertEqual(result.turns[0].steps[0].results[0].source, "environment")

    def test_a_match_fails_naming_the_path_and_both_values(self) -> None:
        task = self.task({"tool": "fs.write", "state": {"match": {"files": {"a.txt": "hi"}}}})
        result = run_task(self.agent(("fs.write", {"path": "a.txt", "text": "ho"})), task)
        self.assertEqual(
            result.outcome, Outcome("fail", "state:mismatch", 'the state at $.files.a.txt is "ho", expected "hi"')
        )

    def test_a_missing_key_is_said_to_be_nothing(self) -> None:
        task = self.task({"tool": "fs.write", "state": {"match": {"files": {"b.txt": "hi"}}}})
        result = run_task(self.agent(("fs.write", {"path": "a.txt", "text": "hi"})), task)
        self.assertEqual(result.outcome.reason, 'the state at $.files.b.txt is nothing, expected "hi"')

    def test_a_failed_call_expectation_stays_the_reason(self) -> None:
        task = self.task({"tool": "fs.remove", "state": {"match": {"files": {}}}})
        result = run_task(self.agent(("fs.write", {"path": "a.txt", "text": "hi"})), task)
        self.assertEqual(result.outcome.code, "tool:wrong-name")

    def test_a_scripted_result_wins_for_its_tool(self) -> None:
        task = self.task({"tool": "fs.write", "state": {"match": {"files": {}}}}, toolResults={"fs.write": "ok"})
        result = run_task(self.agent(("fs.write", {"path": "a.txt", "text": "hi"})), task)
        self.assertEqual((result.outcome, result.turns[0].steps[0].results[0].content), (Outcome("pass"), "ok"))

    def test_the_reference_passes_another_order_to_the_same_state_and_fails_another_state(self) -> None:
        steps = [
            {"tool": "fs.write", "argValues": {"path": ["a"], "text": ["1"]}},
            {"tool": "fs.write", "argValues": {"path": ["b"], "text": ["2"]}},
        ]
        task = self.task({"trajectory": steps, "state": "reference"})
        other_order = self.agent(("fs.write", {"path": "b", "text": "2"}), ("fs.write", {"path": "a", "text": "1"}))
        result = run_task(other_order, task)
        self.assertEqual(result.outcome, Outcome("pass"))
        entry = task_entry(task, [result])["trialResults"][0]
        self.assertEqual(entry["finalState"], {"files": {"b": "2", "a": "1"}})
        self.assertEqual(len(entry["referenceStateSha256"]), 64)
        wrong = run_task(self.agent(("fs.write", {"path": "a", "text": "1"})), task)
        self.assertEqual(
            wrong.outcome,
            Outcome("fail", "state:mismatch", 'the state at $.files.b is nothing, expected the reference\'s "2"'),
        )

    def test_the_reference_fails_a_reply_that_called_nothing_where_the_expected_calls_change_nothing(self) -> None:
        environment = {"module": FILES, "class": "FileSystem", "config": {"files": {"a": "1"}}}
        expect = {"trajectory": [{"tool": "fs.read", "argValues": {"path": ["a"]}}], "state": "reference"}
        task = self.task(expect, environment=environment)
        self.assertEqual(
            run_task(self.agent(), task).outcome,
            Outcome("fail", "tool:no-call", "expected the calls fs.read, got a text reply with no tool call"),
        )
        self.assertEqual(run_task(self.agent(("fs.ls", {})), task).outcome, Outcome("pass"))  # another path passes

    def test_an_agent_that_runs_its_own_tools_has_no_final_state_recorded(self) -> None:
        """An http or command agent's calls never reach the environment: its untouched state is no final state."""
        agent = self.agent(("fs.write", {"path": "a", "text": "hi"}))
        agent.PLAYS_TOOLS = False
        result = run_task(agent, self.task({"tool": "fs.write"}))
        self.assertEqual((result.outcome, result.end), (Outcome("pass"), None))
        self.assertNotIn("finalState", task_entry(self.task({"tool": "fs.write"}), [result])["trialResults"][0])

    def test_the_reference_is_made_in_a_worker_of_its_own_that_the_trial_did_not_touch(self) -> None:
        """A class attribute the trial's instance wrote was the reference's start: an extra write passed."""
        environment = {"module": os.path.join(ENVS, "classwide.py"), "class": "SharedFiles"}
        steps = [{"tool": "fs.write", "argValues": {"path": ["a"], "text": ["1"]}}]
        task = self.task({"trajectory": steps, "state": "reference"}, environment=environment)
        extra = self.agent(("fs.write", {"path": "a", "text": "1"}), ("fs.write", {"path": "junk", "text": "2"}))
        self.assertEqual(
            run_task(extra, task).outcome,
            Outcome("fail", "state:mismatch", 'the state at $.files.junk is "2", expected the reference\'s nothing'),
        )

    def test_a_reference_call_that_raises_makes_the_trial_an_error_not_the_initial_state_a_pass(self) -> None:
        expect = {"tool": "fs.remove", "argValues": {"path": ["old_notes.txt"]}, "state": "reference"}
        environment = {"module": FILES, "class": "FileSystem", "config": {"files": {"old-notes.txt": "x"}}}
        task = self.task(expect, environment=environment)
        result = run_task(self.agent(("fs.read", {"path": "old-notes.txt"})), task)  # changes nothing
        self.assertEqual(
            result.outcome,
            Outcome(
                "error",
                "tool:environment",
                'the reference call fs.remove({"path": "old_notes.txt"}) raised FileNotFoundError: old_notes.txt',
            ),
        )

    def test_an_environments_answer_is_recorded_with_its_source_and_not_as_scripted(self) -> None:
        task = self.task({"tool": "fs.write"}, toolResults={"fs.read": "scripted text"})
        agent = self.agent(("fs.write", {"path": "a", "text": "hi"}), ("fs.read", {"path": "a"}))
        steps = task_entry(task, [run_task(agent, task)])["trialResults"][0]["conversation"][0]["steps"]
        self.assertEqual(
            [step["results"] for step in steps[:2]],
            [
                [{"name": "fs.write", "result": "wrote 2 characters to a", "scripted": False, "source": "environment"}],
                [{"name": "fs.read", "result": "scripted text", "scripted": True, "source": "script"}],
            ],
        )

    def test_a_final_state_over_the_cap_is_kept_cut_and_marked(self) -> None:
        task = self.task({"tool": "fs.write"})
        result = run_task(self.agent(("fs.write", {"path": "a", "text": "x" * (STATE_LIMIT + 10)})), task)
        entry = task_entry(task, [result])["trialResults"][0]
        self.assertEqual((len(entry["finalState"]), entry["finalStateCut"]), (STATE_LIMIT, True))

    def test_a_hostile_environment_makes_its_trial_an_error(self) -> None:
        environment = {"module": HOSTILE, "class": "Hostile", "timeout": 1, "methods": {"fs.ls": "leave"}}
        task = self.task({"tool": "fs.ls"}, environment=environment)
        result = run_task(self.agent(("fs.ls", {})), task)
        self.assertEqual(
            result.outcome,
            Outcome(
                "error",
                "tool:environment",
                "the environment failed: it exited with code 3; its last output:\nleaving now",
            ),
        )
        self.assertIsNone(result.end)

    def test_a_result_nested_too_deeply_is_its_trials_error_not_the_harnesss(self) -> None:
        environment = {"module": HOSTILE, "class": "Hostile", "timeout": 1, "methods": {"fs.ls": "deep"}}
        task = self.task({"tool": "fs.ls"}, environment=environment)
        result = run_task(self.agent(("fs.ls", {})), task, hidden=Secrets({"s3cr3t-value-1234": "TOKEN"}))
        self.assertEqual(
            result.outcome,
            Outcome(
                "error",
                "tool:environment",
                f"the environment failed: Hostile.deep returned JSON nested more than {JSON_DEPTH} levels",
            ),
        )

    def test_a_secret_in_the_final_state_is_masked(self) -> None:
        task = self.task({"tool": "fs.write"})
        agent = self.agent(("fs.write", {"path": "a", "text": "key s3cr3t-value-1234"}))
        result = run_task(agent, task, hidden=Secrets({"s3cr3t-value-1234": "TOKEN"}))
        self.assertNotIn("s3cr3t-value-1234", json.dumps(result.end and result.end.state))


class CheckedAtTheStart(Calling):
    def check(self, environment: dict[str, Any], expect: dict[str, Any] | None = None) -> str:
        task = self.task(expect or {"tool": "fs.write"}, environment=environment)
        with self.assertRaises(ConfigError) as caught:
            check_environments("tasks.json", [task])
        return str(caught.exception)

    def test_a_module_that_is_not_there(self) -> None:
        self.assertEqual(
            self.check({"module": "no_such_environment_module", "class": "X"}),
            "tasks.json: tasks[0].environment.module: "
            "ModuleNotFoundError: No module named 'no_such_environment_module'",
        )

    def test_a_class_that_is_not_there(self) -> None:
        self.assertEqual(
            self.check({"module": FILES, "class": "Files"}),
            f"tasks.json: tasks[0].environment.class: {FILES} has no class Files",
        )

    def test_a_method_the_map_names_that_is_not_there(self) -> None:
        self.assertEqual(
            self.check({"module": FILES, "class": "FileSystem", "methods": {"fs.ls": "listing"}}),
            "tasks.json: tasks[0].environment.methods.fs.ls: FileSystem has no method listing",
        )

    def test_a_config_the_class_does_not_take(self) -> None:
        self.assertEqual(
            self.check({"module": FILES, "class": "FileSystem", "config": {"root": "/"}}),
            "tasks.json: tasks[0].environment.config: FileSystem(**config) raised TypeError: "
            "FileSystem.__init__() got an unexpected keyword argument 'root'",
        )

    def test_a_reference_call_nothing_answers(self) -> None:
        expect = {"tool": "fs.ls", "state": "reference"}
        self.assertEqual(
            self.check({"module": FILES, "class": "FileSystem"}, expect),
            "tasks.json: tasks[0].expect.state: the reference calls fs.ls, which neither FileSystem nor the task's "
            "toolResults answer",
        )

    def test_a_reference_call_that_raises(self) -> None:
        expect = {"tool": "fs.remove", "argValues": {"path": ["old_notes.txt"]}, "state": "reference"}
        self.assertEqual(
            self.check({"module": FILES, "class": "FileSystem", "config": {"files": {"old-notes.txt": "x"}}}, expect),
            'tasks.json: tasks[0].expect.state: the reference call fs.remove({"path": "old_notes.txt"}) raised '
            "FileNotFoundError: old_notes.txt",
        )

    def test_a_module_by_name_is_found_from_the_working_folder_and_pythonpath(self) -> None:
        task = self.task({"tool": "fs.write"}, environment={"module": "files", "class": "FileSystem"})
        with mock.patch.dict(os.environ, {"PYTHONPATH": ENVS}):
            result = run_task(self.agent(("fs.write", {"path": "a", "text": "1"})), task)
        self.assertEqual(result.end and result.end.state, {"files": {"a": "1"}})

    def test_a_module_file_is_found_next_to_the_task_file(self) -> None:
        with open(os.path.join(self.tmp, "mine.py"), "w", encoding="utf-8") as f:
            f.write("class Mine:\n    def write(self, path, text):\n        return 'ok'\n")
        task = self.task({"tool": "fs.write"}, environment={"module": "mine.py", "class": "Mine"})
        check_environments("tasks.json", [task])
        self.assertEqual(task.environment and task.environment.module, os.path.join(self.tmp, "mine.py"))

    def module(self, text: str) -> str:
        """A module of the test's, next to its task file."""
        with open(os.path.join(self.tmp, "mine.py"), "w", encoding="utf-8") as f:
            f.write(text)
        return "mine.py"

    def tasks(self, count: int, environment: dict[str, Any], **expect: Any) -> list[Task]:
        """Tasks that each set their own environment, with their reference's one call: fs.write(path=<task number>)."""
        steps = {"tool": "fs.write", "argValues": {"path": ["<n>"], "text": ["x"]}, "state": "reference", **expect}
        items = [
            {
                "id": f"t{n}",
                "category": "c",
                "prompt": "p",
                "environment": {**environment, "config": {"n": n}},
                "expect": json.loads(json.dumps(steps).replace("<n>", str(n))),
            }
            for n in range(count)
        ]
        return list(load_task_file(self.task_file(items)).tasks)

    def test_each_reference_is_played_on_the_class_as_it_was_imported(self) -> None:
        """The references are played side by side in copies of one loaded worker: never one after another in it."""
        mine = self.module(
            "class Once:\n"
            "    claimed = []  # the class's own: a call here must not be another reference's start\n"
            "    def __init__(self, n):\n"
            "        self.n = n\n"
            "    def write(self, path, text):\n"
            "        if Once.claimed:\n"
            "            raise RuntimeError(f'claimed before by {Once.claimed}')\n"
            "        Once.claimed.append(path)\n"
            "        return 'ok'\n"
        )
        tasks = self.tasks(8, {"module": mine, "class": "Once"})
        self.assertEqual(check_environments("tasks.json", tasks)["tasks[7].environment"], {"fs.write"})

    def test_a_class_is_imported_once_for_each_check_at_a_time_not_once_for_each_task(self) -> None:
        mine = self.module(
            "import os\n"
            "with open(os.path.join(os.path.dirname(__file__), 'imports.log'), 'a') as log:\n"
            "    log.write('imported\\n')\n"
            "class Counted:\n"
            "    def __init__(self, n):\n"
            "        self.n = n\n"
            "    def write(self, path, text):\n"
            "        return 'ok'\n"
        )
        check_environments("tasks.json", self.tasks(12, {"module": mine, "class": "Counted"}))
        with open(os.path.join(self.tmp, "imports.log"), encoding="utf-8") as f:
            imports = len(f.read().splitlines())
        self.assertLessEqual(imports, os.cpu_count() or 1)  # a worker and a reference world for each task: 24

    def test_the_first_problem_in_task_order_is_said_whichever_check_ends_first(self) -> None:
        mine = self.module(
            "import time\n"
            "class Picky:\n"
            "    def __init__(self, n):\n"
            "        self.n = n\n"
            "    def write(self, path, text):\n"
            "        if path in ('1', '4'):\n"
            "            time.sleep(0.5 if path == '1' else 0)  # the first wrong, found last\n"
            "            raise ValueError(f'no {path}')\n"
            "        return 'ok'\n"
        )
        with self.assertRaises(ConfigError) as caught:
            check_environments("tasks.json", self.tasks(6, {"module": mine, "class": "Picky"}))
        self.assertEqual(
            str(caught.exception),
            'tasks.json: tasks[1].expect.state: the reference call fs.write({"path": "1", "text": "x"}) raised '
            "ValueError: no 1",
        )

    def test_a_reference_call_that_ends_its_worker_is_said_as_in_a_worker_of_its_own(self) -> None:
        environment = {"module": HOSTILE, "class": "Hostile", "methods": {"fs.ls": "leave"}}
        self.assertEqual(
            self.check(environment, {"tool": "fs.ls", "state": "reference"}),
            "tasks.json: tasks[0].expect.state: the environment failed: it exited with code 3; its last output:\n"
            "leaving now",
        )

    def test_a_module_that_starts_a_thread_at_import_has_its_references_played_where_the_thread_runs(self) -> None:
        """A fork keeps only the thread that forked: a copy of such a worker is not the module as imported, and its
        calls would wait for a thread that is not there until the timeout, for every task."""
        mine = self.module(
            "import os, threading\n"
            "served = threading.Event()\n"
            "server = threading.Thread(target=served.wait, daemon=True)\n"
            "server.start()\n"
            "class Served:\n"
            "    def __init__(self, n):\n"
            "        self.n = n\n"
            "    def write(self, path, text):\n"
            "        if not server.is_alive():\n"
            "            with open(os.path.join(os.path.dirname(__file__), 'lost.log'), 'a') as log:\n"
            "                log.write(path + '\\n')\n"
            "        return 'ok'\n"
        )
        tasks = self.tasks(4, {"module": mine, "class": "Served"})
        self.assertEqual(check_environments("tasks.json", tasks)["tasks[3].environment"], {"fs.write"})
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "lost.log")), "a reference was played without it")

    def test_a_config_the_class_does_not_take_among_many_tasks_is_said_at_the_first_that_sets_it(self) -> None:
        tasks = self.tasks(5, {"module": FILES, "class": "FileSystem"})[1:3]  # config {"n": 1}, then {"n": 2}
        with self.assertRaises(ConfigError) as caught:
            check_environments("tasks.json", tasks)
        self.assertEqual(
            str(caught.exception),
            "tasks.json: tasks[1].environment.config: FileSystem(**config) raised TypeError: "
            "FileSystem.__init__() got an unexpected keyword argument 'n'",
        )


class OnAProvider(Calling):
    def test_a_model_that_reaches_the_reference_state_by_another_order_passes(self) -> None:
        """The openai backend against its fake: removes, then writes, where the task's trajectory writes first."""

        def other_order(events: list[Event]) -> tuple[list[Any], str | None]:
            done = [event for event in events if event[0] == "result"]
            if not done:
                return [("fs_remove", {"path": "old"})], None
            if len(done) == 1:
                return [("fs_write", {"path": "new", "text": "hi"})], None
            return [], "done"

        invalid: list[str] = []
        fake = self.serve(conversation_fake("openai", other_order, invalid))
        steps = [
            {"tool": "fs.write", "argValues": {"path": ["new"], "text": ["hi"]}},
            {"tool": "fs.remove", "argValues": {"path": ["old"]}},
        ]
        environment = {"module": FILES, "class": "FileSystem", "config": {"files": {"old": "x"}}}
        task = self.task({"trajectory": steps, "state": "reference"}, environment=environment)
        task_file = load_task_file(os.path.join(self.tmp, "tasks.json"))
        settings = {"EVAL_BACKEND": "openai", "OPENAI_BASE_URL": fake.url("/v1"), "EVAL_MODEL": "m"}
        config, name, backend_settings = configure([], {"EVAL_TASKS": "tasks.json", "OPENAI_API_KEY": "k", **settings})
        backend = BACKENDS[name](backend_settings, AgentSurface(task_file.tools), config.run_id)
        self.addCleanup(backend.transport.close)
        result = run_task(backend, task)
        self.assertEqual((result.outcome, invalid), (Outcome("pass"), []))
        self.assertEqual(result.end and result.end.state, {"files": {"new": "hi"}})
        self.assertEqual(json.loads(fake.received[1].json["messages"][-1]["content"]), {"removed": "old", "left": 0})


class FromTheCommandLine(Calling):
    def assert_refused_at_start(self, problem: str) -> None:
        """A run and validate (which starts the environments too) each stop on this problem of tasks.json, exit 2."""
        for command, prog in (([], "eval_agent"), (["validate"], "eval_agent validate")):
            with self.subTest(command):
                stdout, stderr, code = run_cli(*command, env=clean_env(EVAL_TASKS="tasks.json"), cwd=self.tmp)
                self.assertEqual((stdout, stderr, code), ("", f"{prog}: error: tasks.json: {problem}\n", 2))

    def test_many_environments_each_set_its_own_way_are_checked_with_a_bounded_number_of_workers(self) -> None:
        """Each distinct class, methods and timeout has its loaded workers: kept for every one until the checks
        ended, 120 of them held 360 pipes, past a limit of 256 open files (OSError, exit 4)."""
        items = [
            {
                "id": f"t{n}",
                "category": "c",
                "prompt": "p",
                "expect": {"tool": "fs.write"},
                "environment": {"module": FILES, "class": "FileSystem", "timeout": 5 + n / 1000},
            }
            for n in range(120)
        ]
        self.task_file(items)

        def few_open_files() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

        done = subprocess.run(
            [sys.executable, "-S", SCRIPT, "validate"],
            capture_output=True,
            text=True,
            env=clean_env(EVAL_TASKS="tasks.json"),
            cwd=self.tmp,
            timeout=120,
            preexec_fn=few_open_files,
        )
        self.assertEqual((done.returncode, done.stderr), (0, ""))
        self.assertIn("tasks.json: valid, 120 tasks", done.stdout)

    def test_hostile_environments_error_their_own_trials_and_the_run_goes_on(self) -> None:
        """Through a provider's fake: each task's prompt names the one tool to call; the gate decides the exit."""

        def call_what_the_prompt_says(events: list[Event]) -> tuple[list[Any], str | None]:
            if any(event[0] == "result" for event in events):
                return [], "done"
            prompt = next(event[1] for event in events if event[0] == "user")
            return [(prompt.replace(".", "_"), {})], None

        invalid: list[str] = []
        fake = self.serve(conversation_fake("openai", call_what_the_prompt_says, invalid))
        methods = ("hang", "leave", "crash", "shout", "odd", "refuse", "ping")
        tasks = [
            {"id": name, "category": "c", "prompt": f"h.{name}", "expect": {"tool": f"h.{name}"}} for name in methods
        ]
        tools = [{"name": f"h.{name}", "inputSchema": {"type": "object"}} for name in methods]
        environment = {"module": HOSTILE, "class": "Hostile", "timeout": 1}
        self.write_json("tasks.json", {"version": 1, "tools": tools, "environment": environment, "tasks": tasks})
        env = clean_env(
            EVAL_TASKS="tasks.json",
            EVAL_BACKEND="openai",
            OPENAI_BASE_URL=fake.url("/v1"),
            EVAL_MODEL="m",
            OPENAI_API_KEY="k",
            EVAL_GATE="28",
            EVAL_CONCURRENCY="4",
        )
        _, stderr, code = run_cli(env=env, cwd=self.tmp)
        statuses = {e["id"]: e["trialResults"][0]["code"] for e in self.read_json("eval-results.json")["results"]}
        self.assertEqual(
            statuses,
            {
                "hang": "tool:environment",
                "leave": "tool:environment",
                "crash": "tool:environment",
                "shout": "tool:environment",
                "odd": "tool:environment",
                "refuse": None,
                "ping": None,
            },
        )
        self.assertEqual((code, invalid), (0, []), stderr)

    def test_tools_that_write_where_they_should_not_or_fork_error_only_their_own_trial(self) -> None:
        """Each task's environment is another class of unruly.py; a model that calls the task's tool once."""

        def call_what_the_prompt_says(events: list[Event]) -> tuple[list[Any], str | None]:
            if any(event[0] == "result" for event in events):
                return [], "done"
            return [(next(event[1] for event in events if event[0] == "user"), {})], None

        invalid: list[str] = []
        fake = self.serve(conversation_fake("openai", call_what_the_prompt_says, invalid))
        names = ("Printer", "Writer", "Reader", "Forker", "Forger")
        tasks = [
            {
                "id": name.lower(),
                "category": "c",
                "prompt": f"touch_{name.lower()}",
                "environment": {
                    "module": UNRULY,
                    "class": name,
                    "timeout": 5,
                    "methods": {f"touch_{name.lower()}": "touch"},
                },
                "expect": {"tool": f"touch_{name.lower()}", "state": {"match": {"touched": 1}}},
            }
            for name in names
        ]
        tools = [{"name": f"touch_{name.lower()}", "inputSchema": {"type": "object"}} for name in names]
        self.write_json("tasks.json", {"version": 1, "tools": tools, "tasks": tasks})
        env = clean_env(
            EVAL_TASKS="tasks.json",
            EVAL_BACKEND="openai",
            OPENAI_BASE_URL=fake.url("/v1"),
            EVAL_MODEL="m",
            OPENAI_API_KEY="k",
            EVAL_GATE="80",
            EVAL_CONCURRENCY="2",
        )
        _, stderr, code = run_cli(env=env, cwd=self.tmp)
        results = self.read_json("eval-results.json")["results"]
        self.assertEqual(
            {entry["id"]: entry["trialResults"][0]["code"] for entry in results},
            {"printer": None, "writer": None, "reader": None, "forker": None, "forger": "tool:environment"},
        )
        self.assertEqual((code, invalid), (0, []), stderr)

    def test_a_class_with_slots_and_no_state_method_is_exit_2_naming_its_path(self) -> None:
        environment = {"module": UNRULY, "class": "Slotted", "methods": {"fs.ls": "touch"}}
        self.task_file(
            [{"id": "t", "category": "c", "prompt": "p", "expect": {"tool": "fs.ls"}}], environment=environment
        )
        self.assert_refused_at_start(
            "environment.class: Slotted has no state() method, and its instances (of a class with __slots__) no "
            "attributes to take the state from: give Slotted a state() that returns its state as JSON"
        )

    def test_an_environment_that_cannot_start_is_exit_2_naming_its_path(self) -> None:
        environment = {"module": os.path.join(ENVS, "fails_to_import.py"), "class": "X"}
        self.task_file(
            [{"id": "t", "category": "c", "prompt": "p", "expect": {"tool": "fs.ls"}}], environment=environment
        )
        self.assert_refused_at_start("environment.module: RuntimeError: this environment cannot be imported")

    def test_a_reference_call_that_raises_is_exit_2_at_validate_and_at_the_start(self) -> None:
        """A typo in the reference's argValues would make the initial state the reference: doing nothing passed."""
        environment = {"module": FILES, "class": "FileSystem", "config": {"files": {"old-notes.txt": "x"}}}
        expect = {"tool": "fs.remove", "argValues": {"path": ["old_notes.txt"]}, "state": "reference"}
        self.task_file([{"id": "t", "category": "c", "prompt": "p", "expect": expect}], environment=environment)
        self.assert_refused_at_start(
            'tasks[0].expect.state: the reference call fs.remove({"path": "old_notes.txt"}) raised '
            "FileNotFoundError: old_notes.txt"
        )

    def test_an_empty_object_in_a_match_is_a_warning_at_validate_and_at_the_start(self) -> None:
        turns = [{"prompt": "Again.", "expect": {"state": {"match": {"files": {}, "log": [{}]}}}}]
        task = {"id": "t", "category": "c", "prompt": "p", "expect": {"tool": "fs.ls", "state": {"match": {}}}}
        self.task_file([{**task, "turns": turns}], environment={"module": FILES, "class": "FileSystem"})
        warnings = [
            "tasks[0].expect.state.match: {} checks nothing: every state holds it",
            "tasks[0].turns[0].expect.state.match.files: {} checks only that the state has an object there, "
            "whatever it holds",
        ]
        stdout, _, code = run_cli("validate", env=clean_env(EVAL_TASKS="tasks.json"), cwd=self.tmp)
        self.assertEqual(code, 0, stdout)
        self.assertEqual([line for line in stdout.splitlines() if "{}" in line], [f"warning: {w}" for w in warnings])
        _, stderr, _ = run_cli(env=clean_env(EVAL_TASKS="tasks.json"), cwd=self.tmp)
        self.assertEqual(
            [line for line in stderr.splitlines() if "warning" in line], [f"eval_agent: warning: {w}" for w in warnings]
        )

    def test_ctrl_c_leaves_no_worker_behind(self) -> None:
        self.assertEqual(self.hang_then(signal.SIGINT), 130)

    def test_ctrl_c_while_the_environments_are_checked_leaves_no_worker_behind(self) -> None:
        """Before any request: the reference's call hangs in a copy of the worker that loaded the class."""
        pid_file = os.path.join(self.tmp, "worker.pid")
        environment = {"module": HOSTILE, "class": "Hostile", "timeout": 60, "methods": {"fs.ls": "hang"}}
        expect = {"tool": "fs.ls", "state": "reference"}
        self.task_file([{"id": "t", "category": "c", "prompt": "p", "expect": expect}], environment=environment)
        run = subprocess.Popen(
            [sys.executable, "-S", SCRIPT],
            env=clean_env(EVAL_TASKS="tasks.json", HOSTILE_PID_FILE=pid_file),
            cwd=self.tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=stop_signals_as_from_a_terminal,
        )
        self.addCleanup(run.kill)
        deadline = time.monotonic() + 30
        while not _read(pid_file):
            self.assertLess(time.monotonic(), deadline, "the reference's call never started")
            time.sleep(0.05)
        copy, child = map(int, _read(pid_file).split())
        with open(f"/proc/{copy}/stat", encoding="utf-8") as f:
            loaded = int(f.read().rsplit(")", 1)[1].split()[1])  # the worker it was forked from
        for pid in (copy, child, loaded):
            self.addCleanup(_end, pid)  # when the test fails
        run.send_signal(signal.SIGINT)
        self.assertEqual(run.wait(timeout=30), 130)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in (copy, child, loaded)):
            self.assertLess(time.monotonic(), deadline, "a worker, or a process it started, outlived the run")
            time.sleep(0.05)

    def test_a_harness_killed_outright_leaves_no_worker_behind(self) -> None:
        self.assertEqual(self.hang_then(signal.SIGKILL), -signal.SIGKILL)

    def hang_then(self, signum: int) -> int:
        """A run whose environment's call hangs, sent the signal: its exit code, once its worker is gone too."""

        def hang(events: list[Event]) -> tuple[list[Any], str | None]:
            return [("fs_ls", {})], None

        fake = self.serve(conversation_fake("openai", hang, []))
        pid_file = os.path.join(self.tmp, "worker.pid")
        environment = {"module": HOSTILE, "class": "Hostile", "timeout": 60, "methods": {"fs.ls": "hang"}}
        self.task_file(
            [{"id": "t", "category": "c", "prompt": "p", "expect": {"tool": "fs.ls"}}], environment=environment
        )
        env = clean_env(
            EVAL_TASKS="tasks.json",
            EVAL_BACKEND="openai",
            OPENAI_BASE_URL=fake.url("/v1"),
            EVAL_MODEL="m",
            OPENAI_API_KEY="k",
            HOSTILE_PID_FILE=pid_file,
        )
        run = subprocess.Popen(
            [sys.executable, "-S", SCRIPT],
            env=env,
            cwd=self.tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=stop_signals_as_from_a_terminal,  # CI starts the suite with SIGINT ignored, as `cmd &` does
        )
        self.addCleanup(run.kill)
        deadline = time.monotonic() + 30
        while not _read(pid_file):
            self.assertLess(time.monotonic(), deadline, "the worker never started its hanging call")
            time.sleep(0.05)
        worker, child = map(int, _read(pid_file).split())
        self.addCleanup(_end, child)  # when the test fails
        run.send_signal(signum)
        code = run.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _alive(worker) or _alive(child):
            self.assertLess(time.monotonic(), deadline, "the worker, or a process it started, outlived the run")
            time.sleep(0.05)
        return code


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead but for its parent's wait: its parent (the run) has ended, so init reaps it.
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def _end(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Ending(unittest.TestCase):
    """A worker is ended once: its process id, once waited for, may be another process's."""

    def test_a_worker_ended_already_is_not_signalled_again_by_its_process_id(self) -> None:
        from harness import environments

        worker = environments._spawn(Secrets({}))
        environments._kill(worker)
        signalled: list[int] = []
        killpg = os.killpg
        os.killpg = lambda pid, signum: signalled.append(pid)  # type: ignore[assignment]
        try:
            environments._kill(worker)
            environments._kill_all()
        finally:
            os.killpg = killpg
        self.assertEqual((worker.returncode is not None, signalled), (True, []))
