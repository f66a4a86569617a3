"""BFCL's multi-turn entries ported (bench/bfcl_multiturn.py) and run on environments over BFCL's own classes
(bench/bfcl_envs.py), held to BFCL's own executor and checker on a sample: the first entries of each category."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib.util
import os
import sys
import tempfile
import unittest
from typing import Any

from tests.support import ROOT

SAMPLE = 2  # entries of each category: GorillaFileSystem, TwitterAPI and TicketAPI, one missed function, long context


def bfcl() -> Any:
    """The bench module, with BFCL's package from the wheel BFCL_WHEEL names or from .venv (make test installs it);
    skip without it, but under CI=true fail."""
    wheel = os.environ.get("BFCL_WHEEL")
    if not wheel and importlib.util.find_spec("bfcl_eval") is None:
        why = "BFCL's tests need bfcl-eval: make test installs it (requirements-nodeps.txt), or set BFCL_WHEEL"
        if os.environ.get("CI") == "true":
            raise AssertionError(f"{why} (under CI=true a missing wheel is a failure)")
        raise unittest.SkipTest(why)
    sys.path.insert(0, ROOT)
    from bench import bfcl_multiturn

    if wheel:
        bfcl_multiturn.use_wheel(wheel)
    return bfcl_multiturn


class BfclMultiTurn(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.bench = bfcl()
        cls.entries = cls.bench.read_entries(SAMPLE)

    def test_the_environment_answers_and_ends_as_bfcls_own_execution_of_the_ground_truth(self) -> None:
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import _compare_instances
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

        for entry in self.entries:
            world = self.bench.world_of(entry)
            for number, (calls, text) in enumerate(zip(entry.truth, entry.truth_text, strict=True), 1):
                with self.subTest(entry.id, turn=number):
                    ours = [getattr(world, name)(**copy.deepcopy(args)) for name, args in calls]
                    theirs, instances = execute_multi_turn_func_call(
                        text,
                        entry.question["initial_config"],
                        entry.question["involved_classes"],
                        "testexec",
                        entry.id,
                        long_context="long_context" in entry.category,
                    )
                    self.assertEqual(ours, theirs)
                    for name, instance in instances.items():
                        self.assertEqual(_compare_instances(world.instances[name], instance), (True, {}))
        self.assertEqual({entry.category for entry in self.entries}, set(self.bench.CATEGORIES))

    def test_states_are_equal_exactly_when_bfcls_state_check_finds_no_difference(self) -> None:
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import _compare_instances

        verdicts = set()
        for entry in self.entries:
            for kind, replay in self.bench.mutations(entry):
                played, reference = self.bench.world_of(entry), self.bench.world_of(entry)
                for number, (steps, truth) in enumerate(zip(replay, entry.truth, strict=True), 1):
                    for name, args in [call for step in steps for call in step]:
                        with contextlib.suppress(Exception):  # BFCL's executor answers an exception too
                            getattr(played, name)(**copy.deepcopy(args))
                    for name, args in truth:
                        getattr(reference, name)(**copy.deepcopy(args))
                    same = all(
                        _compare_instances(played.instances[name], instance)[0]
                        for name, instance in reference.instances.items()
                    )
                    with self.subTest(entry.id, kind=kind, turn=number):
                        self.assertEqual(played.state() == reference.state(), same)
                    verdicts.add(same)
        self.assertEqual(verdicts, {True, False})  # the sample has states that differ, and ones that do not

    def test_bfcls_checker_passes_every_ground_truth_and_fails_a_turn_answered_without_calls(self) -> None:
        for number, entry in enumerate(self.entries):
            verdicts = {kind: self.bench.bfcl_verdict(entry, replay, f"t{number}") for kind, replay in
                        self.bench.mutations(entry)}  # fmt: skip
            with self.subTest(entry.id):
                self.assertEqual([verdicts[kind] for kind in self.bench.GROUND_TRUTH], ["pass", "pass"])
                if "a turn answered without calls" in verdicts:
                    self.assertEqual(verdicts["a turn answered without calls"], "multi_turn:empty_turn_model_response")
                self.assertEqual(verdicts["a state-changing call left out"][:11], "multi_turn:")

    def test_a_difference_is_counted_under_the_rule_its_replay_shows(self) -> None:
        entry = next(entry for entry in self.entries if entry.id == "multi_turn_base_1")
        replays = dict(self.bench.mutations(entry))
        swapped = replays["two calls swapped"]  # mv before cd: the expected calls, the move answering an error
        theirs = self.bench.bfcl_verdict(entry, swapped, "rules")
        self.assertEqual(theirs, "multi_turn:execution_response_mismatch")
        self.assertEqual(self.bench.rule(entry, swapped, theirs, ("pass", "")), self.bench.RESULTS_NOT_CALLS)
        # Verdicts as the two would give them where a call with another value, or one made a turn early, is judged.
        other = ("fail", "turn 2: a call with other values")
        self.assertEqual(self.bench.rule(entry, replays["a wrong value"], "pass", other), self.bench.CALLS_NOT_RESULTS)
        early = replays["a turn's calls made a turn early"]
        self.assertEqual(self.bench.rule(entry, early, "pass", other), self.bench.ACROSS_TURNS)
        # BFCL finding another state after a turn, the harness passing: the same state at the end, or no rule.
        mismatch = "multi_turn:instance_state_mismatch"
        self.assertEqual(self.bench.rule(entry, early, mismatch, ("pass", "")), self.bench.END_STATE_ONLY)
        self.assertEqual(
            self.bench.rule(entry, replays["a state-changing call left out"], mismatch, ("pass", "")),
            f"no rule: BFCL {mismatch}; the harness pass",
        )
        one_turn = dataclasses.replace(entry, truth=entry.truth[:1], truth_text=entry.truth_text[:1])
        first_left_out = (tuple((call,) for call in entry.truth[0][1:]),)
        self.assertEqual(
            self.bench.rule(one_turn, first_left_out, "multi_turn:execution_response_mismatch", ("pass", "")),
            self.bench.ONE_TURN_BY_STATE,
        )
        truth = replays[self.bench.GROUND_TRUTH[0]]
        self.assertEqual(
            self.bench.rule(entry, truth, "pass", ("fail", "state:mismatch at $.x")),
            "no rule: BFCL pass; the harness state:mismatch at $.x",
        )

    def test_a_ground_truth_call_has_its_positional_arguments_named_from_the_method(self) -> None:
        from bench import bfcl_envs

        self.assertEqual(
            self.bench.parse_call("sort('final_report.pdf')", bfcl_envs.OWNER),
            ("sort", {"file_name": "final_report.pdf"}),
        )
        self.assertEqual(
            self.bench.parse_call("mv(source='a', destination='b')", bfcl_envs.OWNER),
            ("mv", {"source": "a", "destination": "b"}),
        )

    def test_a_missed_function_is_held_back_and_added_in_the_turn_that_gives_it_back(self) -> None:
        entry = next(entry for entry in self.entries if entry.id == "multi_turn_miss_func_0")
        with tempfile.TemporaryDirectory() as folder:
            task_file = self.bench.port([entry], folder)
        (task,) = task_file["tasks"]
        self.assertNotIn("sort", task["tools"])
        self.assertIn("sort", [tool["name"] for tool in task_file["tools"]])
        self.assertEqual(task["prompt"], entry.question["question"][0][0]["content"])
        self.assertEqual(
            task["expect"]["firstTurn"],
            {
                "trajectory": [
                    {"tool": "cd", "argValues": {"folder": ["document"]}},
                    {"tool": "mkdir", "argValues": {"dir_name": ["temp"]}},
                    {"tool": "mv", "argValues": {"source": ["final_report.pdf"], "destination": ["temp"]}},
                ],
                "order": "any-order",
            },
        )
        self.assertEqual(task["expect"]["state"], "reference")  # the end state, as BFCL's ground truth leaves it
        self.assertEqual(
            [step["tool"] for step in task["expect"]["trajectory"]],
            ["cd", "mkdir", "mv", "cd", "grep", "sort", "cd", "mv", "cd", "diff"],
        )
        # BFCL's turns 3 (nothing to call: sort is missing) and 4 (sort given back, with BFCL's own words)
        self.assertEqual(task["turns"][1], {"prompt": entry.question["question"][2][0]["content"]})
        self.assertEqual(
            task["turns"][2],
            {
                "prompt": "I have updated some more functions you can choose from. What about now?",
                "expect": {
                    "trajectory": [{"tool": "sort", "argValues": {"file_name": ["final_report.pdf"]}}],
                    "order": "any-order",
                },
                "addTools": ["sort"],
            },
        )
        self.assertEqual(
            task["environment"]["config"],
            {
                "classes": ["TwitterAPI", "GorillaFileSystem"],
                "scenario": self.bench.literal(entry.question["initial_config"]),
                "long_context": False,
            },
        )
        # Every $ written $$, which the loader reads back as $: a ${...} in BFCL's text is no placeholder of ours.
        self.assertEqual(entry.question["initial_config"]["TwitterAPI"]["password"], "Kj8#mP9$vL2")
        self.assertEqual(task["environment"]["config"]["scenario"]["TwitterAPI"]["password"], "Kj8#mP9$$vL2")

    def test_the_sample_through_the_harness_passes_every_ground_truth_and_differs_from_bfcl_only_by_rule(self) -> None:
        kinds = {*self.bench.GROUND_TRUTH, "two calls swapped"}
        with tempfile.TemporaryDirectory() as folder:
            tally, rules = self.bench.agreement(self.entries, folder, kinds)
        for kind in self.bench.GROUND_TRUTH:
            self.assertEqual(tally[kind], {"pass/pass": len(self.entries)}, rules[kind])
        self.assertEqual(sum(tally["two calls swapped"].values()), len(self.entries))
        self.assertEqual(set(rules["two calls swapped"]), {self.bench.RESULTS_NOT_CALLS})  # each one the sample has


if __name__ == "__main__":
    unittest.main()
