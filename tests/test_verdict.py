"""The verdict: trials counted, pass^k, the gate decided with every reason it failed, and the exit code."""

from __future__ import annotations

import unittest
from decimal import Decimal
from fractions import Fraction

from harness.records import Tally
from harness.verdict import TALLY_FIELDS, Tallies, decide, pass_hat_k
from harness.verdict import tally as tally_of


def tally(*statuses: str, category: str = "c", task_id: str = "t", blocking: bool = False) -> Tally:
    return Tally(task_id, category, statuses, blocking=blocking)  # type: ignore[arg-type]


class Summarize(unittest.TestCase):
    def test_errors_stay_in_the_denominator_and_are_counted_apart(self) -> None:
        summary = decide([tally("pass"), tally("fail"), tally("error"), tally("pass")], Decimal(50))
        self.assertEqual((summary.passed, summary.failed, summary.errored, summary.total), (2, 1, 1, 4))
        self.assertEqual(summary.rate, 50)
        self.assertTrue(summary.gate_passed)

    def test_gate_is_met_at_exactly_the_gate(self) -> None:
        tallies = [tally("pass")] * 4 + [tally("fail")]
        self.assertTrue(decide(tallies, Decimal(80)).gate_passed)
        self.assertFalse(decide(tallies, Decimal("80.01")).gate_passed)

    def test_gate_compares_exactly_not_in_floating_point(self) -> None:
        tallies = [tally("pass")] * 2 + [tally("fail")]
        self.assertFalse(decide(tallies, Decimal("66.67")).gate_passed)
        self.assertTrue(decide(tallies, Decimal("66.66")).gate_passed)

    def test_no_results_never_meet_the_gate(self) -> None:
        self.assertFalse(decide([], Decimal(0)).gate_passed)

    def test_a_run_with_tasks_not_run_never_meets_the_gate(self) -> None:
        self.assertFalse(decide([tally("pass")], Decimal(0), not_run=1).gate_passed)

    def test_counts_per_category_keep_first_seen_order(self) -> None:
        summary = decide(
            [tally("pass", category="b"), tally("fail", category="a"), tally("pass", category="b")], Decimal(0)
        )
        self.assertEqual(list(summary.by_category), ["b", "a"])
        self.assertEqual((summary.by_category["b"].passed, summary.by_category["b"].total), (2, 2))
        self.assertEqual((summary.by_category["a"].passed, summary.by_category["a"].total), (0, 1))


class PassHatK(unittest.TestCase):
    def test_pass_hat_k_is_the_mean_of_c_choose_k_over_n_choose_k(self) -> None:
        # One task passing 3 of 5 trials, one passing 5 of 5: C(3,k)/C(5,k) averaged with 1.
        tallies = [tally("pass", "pass", "fail", "pass", "error", task_id="a"), tally(*["pass"] * 5, task_id="b")]
        summary = decide(tallies, Decimal(80), runs=5)
        expected = {1: Fraction(4, 5), 2: Fraction(13, 20), 3: Fraction(11, 20), 4: Fraction(1, 2), 5: Fraction(1, 2)}
        self.assertEqual(dict(summary.pass_all_k), expected)
        self.assertEqual(summary.flaky, ("a",))

    def test_pass_hat_k_against_known_values(self) -> None:
        # tau-bench's definition on one task: c=2 of n=4 gives pass^1 = 1/2, pass^2 = 1/6, pass^3 = 0.
        self.assertEqual([pass_hat_k([(2, 4)], k) for k in (1, 2, 3)], [Fraction(1, 2), Fraction(1, 6), Fraction(0)])

    def test_the_gate_on_pass_all_uses_pass_hat_n(self) -> None:
        tallies = [tally("pass", "pass", task_id="a"), tally("pass", "fail", task_id="b")]
        self.assertTrue(decide(tallies, Decimal(75), runs=2).gate_passed)  # 3 of 4 trials
        self.assertFalse(decide(tallies, Decimal(75), runs=2, gate_on="pass-all").gate_passed)  # 1 of 2 tasks
        self.assertTrue(decide(tallies, Decimal(50), runs=2, gate_on="pass-all").gate_passed)

    def test_a_task_with_fewer_trials_than_k_is_left_out_of_pass_hat_k(self) -> None:
        self.assertEqual(pass_hat_k([(1, 1), (0, 2)], 2), Fraction(0))
        self.assertEqual(pass_hat_k([(1, 1), (2, 2)], 2), Fraction(1))


def entry(*statuses: str, code: str | None = None) -> dict:
    """A task's entry in the results, as the verdict reads it."""
    trials = [{"status": s, "code": code if s != "pass" else None, "usage": None, "durationMs": 1.0} for s in statuses]
    return {"id": "t", "category": "c", "blocking": False, "violation": None, "trialResults": trials}


# (name, tallies, keyword arguments, the reasons the gate failed, the exit code)
VERDICTS = [
    ("met", [tally("pass")] * 4 + [tally("fail")], {}, (), 0),
    ("below the gate", [tally("pass"), tally("fail")], {}, ("below-gate",), 1),
    (
        "a blocking task failed at 90%",
        [tally("pass")] * 9 + [tally("fail", blocking=True)],
        {},
        ("blocking-failed",),
        1,
    ),
    ("a regression at 100%", [tally("pass")], {"regressed": ("t",)}, ("regression",), 1),
    ("a significant overall drop at 100%", [tally("pass")], {"overall_regressed": True}, ("overall-regression",), 1),
    ("tasks not run", [tally("pass")], {"not_run": 1}, ("not-run",), 1),
    ("nothing ran", [], {"not_run": 3}, ("below-gate", "not-run"), 1),
    ("interrupted", [tally("pass")], {"not_run": 1, "interrupted": True}, ("not-run", "interrupted"), 130),
    ("interrupted with every task begun", [tally("pass")], {"interrupted": True}, ("interrupted",), 130),
    (
        "nothing reached the agent",
        [tally_of(entry("error", code="reply:connect")), tally_of(entry("error", code="reply:auth"))],
        {},
        ("below-gate", "unreachable"),
        3,
    ),
    (
        "one task reached it",
        [tally_of(entry("error", code="reply:connect")), tally_of(entry("pass"))],
        {},
        ("below-gate",),
        1,
    ),
    (
        "a replay's cassette held no reply for one request: above the gate, not met",
        [tally_of(entry("error", code="replay:miss"))] + [tally("pass")] * 9,
        {},
        ("replay-miss",),
        1,
    ),
    (
        "a replayed reply edited into what no run records: not evaluated either",
        [tally_of(entry("error", code="replay:bad-reply"))] + [tally("pass")] * 9,
        {},
        ("replay-miss",),
        1,
    ),
    (
        "a wave of requests ended rate-limited and stopped the run, above the gate",
        [tally_of(entry("error", code="reply:rate-limited"))] * 2 + [tally("pass")] * 18,
        {"not_run": 5, "rate_limited": True},
        ("rate-limited", "not-run"),
        1,
    ),
    (
        "a bug cut it short, even when interrupted too",
        [tally("pass")],
        {"internal_error": "RuntimeError: x", "interrupted": True},
        ("interrupted", "internal-error"),
        4,
    ),
]


class Verdicts(unittest.TestCase):
    def test_every_reason_the_gate_failed_is_listed_and_the_exit_code_follows(self) -> None:
        for name, tallies, options, because, exit_code in VERDICTS:
            with self.subTest(name):
                summary = decide(tallies, Decimal(80), **options)
                self.assertEqual(
                    (summary.gate_failed_because, summary.exit_code, summary.gate_passed),
                    (because, exit_code, not because),
                )

    def test_a_run_and_a_merge_count_a_task_alike_from_its_entry(self) -> None:
        counted = tally_of(entry("pass", "error", code="reply:timeout"))
        self.assertEqual(
            (counted.statuses, counted.unreached, counted.latency_ms, counted.tokens),
            (("pass", "error"), False, 2.0, None),
        )

    def test_a_run_keeps_each_task_as_a_merge_counts_it(self) -> None:
        entries = [
            entry("pass", "fail", code="tool:wrong-name"),
            {**entry("error", code="reply:connect"), "blocking": True, "violation": "forbidden-tool"},
            {**entry("fail", code="budget:tokens"), "budget": {"maxTokens": 1, "blocking": True}},
            entry("fail", "fail", code="budget:tool-calls"),
            entry("error", code="replay:miss"),
        ]
        entries[0]["trialResults"][1]["usage"] = {"inputTokens": 3, "outputTokens": 4}
        tallies = Tallies()
        for each in entries:
            tallies.add(each)
        self.assertEqual(list(tallies.rows()), [TALLY_FIELDS(tally_of(each)) for each in entries])
        self.assertEqual(decide(tallies, Decimal(80)), decide([tally_of(each) for each in entries], Decimal(80)))

    def test_a_conversation_that_got_answers_before_the_connection_failed_reached_the_agent(self) -> None:
        first_step = entry("error", code="reply:connect")
        later_step = entry("error", code="reply:connect")
        later_step["trialResults"][0]["steps"] = 3
        self.assertEqual((tally_of(first_step).unreached, tally_of(later_step).unreached), (True, False))


if __name__ == "__main__":
    unittest.main()


AUTO = {"max": 10, "confidence": 95.0, "reliability": 90.0}


class AutoRuns(unittest.TestCase):
    """--runs auto: tasks of different numbers of trials, none of them left out of a figure the gate reads."""

    def test_an_early_stopped_failing_task_counts_for_pass_all(self) -> None:
        tasks = [tally(*("pass",) * 6, task_id=f"ok-{n}") for n in range(9)] + [tally("fail", "fail", task_id="broken")]
        summary = decide(tasks, Decimal(95), runs=10, gate_on="pass-all", adaptive=AUTO)
        self.assertEqual(summary.all_passed, Fraction(9, 10))
        self.assertFalse(summary.gate_passed)
        self.assertIn("below-gate", summary.gate_failed_because)
        met = decide(tasks[:9], Decimal(95), runs=10, gate_on="pass-all", adaptive=AUTO)
        self.assertTrue(met.gate_passed)

    def test_pass_k_under_auto_is_over_every_task_up_to_the_fewest_trials_any_ran(self) -> None:
        tasks = [
            tally(*("pass",) * 6, task_id="ok"),
            tally("fail", "fail", task_id="broken"),
            tally(*("pass", "fail") * 5, task_id="flaky"),
        ]
        summary = decide(tasks, Decimal(0), runs=10, adaptive=AUTO)
        expected = {1: (1 + 0 + Fraction(5, 10)) / 3, 2: (1 + 0 + Fraction(10, 45)) / 3}
        self.assertEqual(summary.pass_all_k, expected)

    def test_the_trials_spent_against_a_fixed_run_of_the_most(self) -> None:
        tasks = [tally(*("pass",) * 6, task_id="ok"), tally("fail", "fail", task_id="broken")]
        summary = decide(tasks, Decimal(0), runs=10, adaptive=AUTO)
        self.assertEqual(summary.adaptive, {**AUTO, "trials": 8, "fixedTrials": 20, "saved": 12})

    def test_a_task_the_run_cut_short_saved_no_trials(self) -> None:
        # Ctrl-C after 3 passes of one task: its other 7 were not spared by the test, which had not settled it
        tasks = [tally(*("pass",) * 6, task_id="ok"), tally("pass", "pass", "pass", task_id="cut")]
        summary = decide(tasks, Decimal(0), runs=10, adaptive=AUTO, interrupted=True)
        self.assertEqual(summary.adaptive, {**AUTO, "trials": 9, "fixedTrials": 20, "saved": 4})

    def test_the_trials_gate_under_auto_weighs_each_task_alike_not_each_trial(self) -> None:
        # A reliable task runs longer than a broken one: counted by trials, 6 tasks passing of 10 would read 82%.
        tasks = [tally(*("pass",) * 6, task_id=f"ok-{n}") for n in range(6)]
        tasks += [tally("fail", "fail", task_id=f"broken-{n}") for n in range(4)]
        summary = decide(tasks, Decimal(80), runs=10, adaptive=AUTO)
        self.assertEqual((summary.passed, summary.total), (36, 44))
        self.assertEqual(summary.rate, 60)
        self.assertEqual(summary.gate_failed_because, ("below-gate",))
        flaky = decide(
            [tally("pass", "fail", "pass", "pass"), tally(*("pass",) * 6)], Decimal(0), runs=10, adaptive=AUTO
        )
        self.assertEqual(flaky.rate, Fraction(175, 2))  # (3/4 + 1) / 2

    def test_a_fixed_run_has_no_auto_figures(self) -> None:
        summary = decide([tally("pass", "pass", "pass")], Decimal(0), runs=3)
        self.assertEqual((summary.adaptive, summary.all_passed), (None, None))
