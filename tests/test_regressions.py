"""Regressions against a baseline where the parts meet: repeats, shards merged, and a run of a selection."""

from __future__ import annotations

import os
import shutil
import unittest
from collections import Counter
from collections.abc import Collection
from fractions import Fraction
from http.server import BaseHTTPRequestHandler
from typing import Any

from harness.comparison import classify, compare, render, significance_rule, significant_drop
from harness.records import ConfigError
from harness.subcommands import merge
from harness.text import sha256_hex
from tests.support import Received, TempDirTestCase, canned, canonical_task_data, clean_env, run_cli, send_json

LIST = {"name": "imageman.asset.list", "args": {"path": "/"}}
WRONG = "tool:wrong-name: expected imageman.asset.get, got imageman.asset.list"


def entry(task_id: str, passes: int, trials: int, sha: str = "s1") -> dict[str, Any]:
    """A task's entry in a results file, as compare reads it: passes of trials, a wrong tool when one failed."""
    failed = passes < trials
    return {
        "id": task_id,
        "category": "asset.get",
        "sha256": sha,
        "status": "fail" if failed else "pass",
        "code": "tool:wrong-name" if failed else None,
        "reason": WRONG.split(": ", 1)[1] if failed else None,
        "passes": passes,
        "trials": trials,
    }


def run_of(entries: list[dict[str, Any]], runs: int, task_file_ids: list[str] | None = None) -> dict[str, Any]:
    """As much of a results document as compare reads: its manifest, runs and entries."""
    ids = [e["id"] for e in entries]
    task_file: dict[str, Any] = {"sha256": "f"}
    if task_file_ids is not None:
        task_file["taskIds"] = task_file_ids
    manifest = {"taskFile": task_file, "selection": {"task": [], "category": [], "shard": None, "taskIds": ids}}
    return {"manifest": manifest, "runs": runs, "results": entries, "notRun": []}


def wrong_on(tries: dict[str, Collection[int] | None]) -> Any:
    """A correct agent, except that it calls the wrong tool for each task named, on the tries listed (None: all)."""
    seen: Counter[str] = Counter()

    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        task_id = received.json["taskId"]
        seen[task_id] += 1
        if task_id in tries and (tries[task_id] is None or seen[task_id] in tries[task_id]):  # type: ignore[operator]
            send_json(handler, {"toolCall": LIST})
        else:
            canned(received, handler)

    return respond


# (runs a side, passes now of a task that passed every trial then, change, detail): a total collapse and one flaky
# trial at each size. Below 4 runs a side no table is significant, so the task is judged as at one run.
BY_RUN_SIZE = [
    (1, 0, "regressed", f"pass → fail {WRONG}"),
    (2, 0, "regressed", f"2/2 → 0/2 (too few runs for a test) {WRONG}"),
    (2, 1, "regressed", f"2/2 → 1/2 (too few runs for a test) {WRONG}"),
    (3, 0, "regressed", f"3/3 → 0/3 (too few runs for a test) {WRONG}"),
    (3, 2, "regressed", f"3/3 → 2/3 (too few runs for a test) {WRONG}"),
    (4, 0, "regressed", f"4/4 → 0/4 (p=0.029) {WRONG}"),
    (4, 3, "noise", "4/4 → 3/4 (p=1), within chance"),
    (5, 0, "regressed", f"5/5 → 0/5 (p=0.0079) {WRONG}"),
    (5, 4, "noise", "5/5 → 4/5 (p=1), within chance"),
]


class RepeatsAgainstABaseline(TempDirTestCase):
    def baseline_then(self, runs: str, respond: Any, *args: str) -> tuple[str, str, int]:
        """A baseline of a correct agent, then a run of one answering as `respond` does, at one URL, against it."""
        behaviour = {"respond": canned}
        env = clean_env(EVAL_AGENT_URL=self.serve(lambda r, h: behaviour["respond"](r, h)).url(), EVAL_CONCURRENCY="1")
        run_cli("--runs", runs, "--out", "base.json", env=env, cwd=self.tmp)
        behaviour["respond"] = respond
        return run_cli("--runs", runs, "--baseline", "base.json", *args, env=env, cwd=self.tmp)

    def test_a_total_collapse_regresses_at_every_run_size_and_one_flaky_trial_only_where_no_test_can_tell(
        self,
    ) -> None:
        for runs, passes, change, detail in BY_RUN_SIZE:
            with self.subTest(runs=runs, passes=passes):
                comparison = compare(run_of([entry("t", runs, runs)], runs), run_of([entry("t", passes, runs)], runs))
                (task,) = comparison.tasks
                self.assertEqual((task.change, task.detail), (change, detail))
                self.assertEqual(comparison.regressed, ["t"] if change == "regressed" else [])
                rule = [line for line in render(comparison, "a", "b") if line.startswith("significance:")]
                self.assertEqual(rule, [significance_rule(runs, runs)] if runs > 1 else [])

    def test_below_four_runs_a_side_a_task_that_fails_every_trial_then_and_passes_now_is_fixed(self) -> None:
        fixed = classify(entry("t", 0, 3), entry("t", 3, 3))
        self.assertEqual((fixed.change, fixed.detail), ("fixed", "0/3 → 3/3 (too few runs for a test)"))
        flaky = classify(entry("t", 2, 3), entry("t", 0, 3))
        self.assertEqual(
            (flaky.change, flaky.detail), ("still failing", f"2/3 → 0/3 (too few runs for a test) {WRONG}")
        )

    def test_the_smallest_significant_drop_at_each_run_size(self) -> None:
        drops = {runs: significant_drop(runs, runs) for runs in (1, 2, 3, 4, 5, 6, 10, 20)}
        self.assertEqual(drops, {1: None, 2: None, 3: None, 4: 4, 5: 4, 6: 5, 10: 5, 20: 5})
        self.assertEqual((significant_drop(1, 20), significant_drop(5, 3), significant_drop(2, 3)), (20, 3, None))
        self.assertEqual(
            [significance_rule(runs, runs) for runs in (3, 5)],
            [
                "significance: at 3 runs a side no drop is (3/3 → 0/3: p=0.1), so a task that passed every trial"
                " then and not every trial now regressed, as at one run",
                "significance: at 5 runs a side, a drop from 5/5 to 1/5 or lower is significant (Fisher's exact"
                " test, p < 0.05)",
            ],
        )
        self.assertEqual(
            [significance_rule(5, 3), significance_rule(2, 3), significance_rule(1, 5)],
            [
                "significance: at 5 runs then and 3 now, a drop from 5/5 to 0/3 is significant (Fisher's exact test,"
                " p < 0.05)",
                "significance: at 2 runs then and 3 now no drop is (2/2 → 0/3: p=0.1), so a task that passed every"
                " trial then and not every trial now regressed, as at one run",
                "significance: at 1 run then and 5 now no drop is (1/1 → 0/5: p=0.17), so a task that passed every"
                " trial then and not every trial now regressed, as at one run",
            ],
        )

    def test_a_significant_overall_drop_is_a_regression_though_no_task_alone_is(self) -> None:
        ids = [f"t{i}" for i in range(10)]
        then = run_of([entry(i, 5, 5) for i in ids], 5)
        now = run_of([entry(i, 3 if i in ("t1", "t2", "t3") else 5, 5) for i in ids], 5)
        comparison = compare(then, now)
        self.assertEqual((comparison.regressed, comparison.overall_regressed), ([], True))
        self.assertIn("overall                100%    88%  -12.0 pts (p=0.027)", render(comparison, "a", "b"))

    def test_an_overall_drop_from_tasks_not_measured_alike_on_both_sides_is_no_regression(self) -> None:
        ids = [f"t{i}" for i in range(10)]
        then = run_of([entry(i, 5, 5) for i in ids], 5)
        # Five tasks changed definition and now fail, five more are new and fail: the other five held.
        changed = [entry(i, 0 if i < "t5" else 5, 5, sha="s2" if i < "t5" else "s1") for i in ids]
        now = run_of(changed + [entry(f"n{i}", 0, 5) for i in range(5)], 5)
        comparison = compare(then, now)
        self.assertEqual((comparison.regressed, comparison.overall_regressed), ([], False))
        self.assertIn(
            "overall                100%  33.3%  -66.7 pts (p=1 over the 5 tasks in both with the same definition)",
            render(comparison, "a", "b"),
        )

    def test_a_task_that_collapses_at_3_runs_fails_the_baseline_gate_and_compare(self) -> None:
        stdout, stderr, code = self.baseline_then("3", wrong_on({"asset-get-details": None}))
        self.assertEqual((stderr, code), ("", 1))
        self.assertIn(
            "27/30 trials PASS at 90% (gate 80%) · pass^3 90% · 3 failed · gate not met: regression against the"
            " baseline (asset-get-details)",
            stdout.splitlines(),
        )
        self.assertEqual(self.read_json("eval-results.json")["regressed"], ["asset-get-details"])
        stdout, _, code = run_cli("compare", "base.json", "eval-results.json", cwd=self.tmp)
        lines = stdout.splitlines()
        self.assertEqual(code, 1)
        regressed = "REGRESSED          asset-get-details  3/3 → 0/3 (too few runs for a test)"
        self.assertEqual(lines[1], f"{regressed} {WRONG}")
        drift = next(index for index, line in enumerate(lines) if line.startswith("Tool drift"))
        self.assertEqual(lines[drift - 2], significance_rule(3, 3))  # the tools' drift comes after compare's verdict

    def test_a_significant_overall_drop_fails_the_baseline_gate_and_compare(self) -> None:
        flaky = {task: (2, 4) for task in ("asset-search-by-tag", "asset-get-details", "asset-tag-additive")}
        stdout, stderr, code = self.baseline_then("5", wrong_on(flaky), "--out", "now.json")
        self.assertEqual((stderr, code), ("", 1))
        self.assertIn(
            "44/50 trials PASS at 88% (gate 80%) · pass^5 70% · 3 flaky · 6 failed · gate not met: significant"
            " overall drop against the baseline",
            stdout.splitlines(),
        )
        doc = self.read_json("now.json")
        self.assertEqual((doc["regressed"], doc["gateFailedBecause"]), ([], ["overall-regression"]))
        stdout, _, code = run_cli("compare", "base.json", "now.json", "--out", "cmp.json", cwd=self.tmp)
        self.assertEqual(code, 1)
        self.assertIn("overall                100%    88%  -12.0 pts (p=0.027)", stdout.splitlines())
        overall = self.read_json("cmp.json")["overall"]
        self.assertEqual((overall["regressed"], round(overall["pValue"], 4)), (True, 0.0267))


class MergeWithABaseline(TempDirTestCase):
    """Shards run against a baseline: each finds its own regressions, and the merge keeps them all."""

    def shards_against_a_baseline(self, *args: str) -> None:
        run_cli("--out", "base.json", env=clean_env(EVAL_AGENT_URL=self.serve(canned).url()), cwd=self.tmp)
        # asset-get-details is in shard 1/2, asset-search-semantic in 2/2.
        agent = self.serve(wrong_on({"asset-get-details": None, "asset-search-semantic": None}))
        for k in (1, 2):
            _, _, code = run_cli(
                "--shard", f"{k}/2", "--baseline", "base.json", "--out", f"s{k}.json", *args,
                env=clean_env(EVAL_AGENT_URL=agent.url()), cwd=self.tmp,
            )  # fmt: skip
            self.assertEqual(code, 1, f"shard {k} regressed")

    def test_merge_keeps_the_regressions_the_shards_found(self) -> None:
        self.shards_against_a_baseline()
        with open(os.path.join(self.tmp, "base.json"), "rb") as f:
            sha256 = sha256_hex(f.read())
        self.assertEqual(self.read_json("s1.json")["baseline"]["sha256"], sha256)
        self.assertEqual(self.read_json("s1.json")["regressed"], ["asset-get-details"])
        stdout, stderr, code = run_cli("merge", "s1.json", "s2.json", "--out", "m.json", cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 1))
        self.assertIn(
            "8/10 PASS at 80% (gate 80%) · 2 failed · gate not met: regression against the baseline"
            " (asset-search-semantic, asset-get-details)",
            stdout.splitlines(),
        )
        merged = self.read_json("m.json")
        self.assertEqual(
            (merged["regressed"], merged["gatePassed"], merged["baseline"]["path"], merged["baseline"]["sha256"]),
            (["asset-search-semantic", "asset-get-details"], False, "base.json", sha256),
        )

    def test_merge_reads_the_baseline_the_shards_name_or_the_one_given(self) -> None:
        self.shards_against_a_baseline()
        shutil.move(os.path.join(self.tmp, "base.json"), os.path.join(self.tmp, "moved.json"))
        _, stderr, code = run_cli("merge", "s1.json", "s2.json", "--out", "m.json", cwd=self.tmp)
        self.assertEqual(
            (stderr, code),
            (
                "eval_agent merge: error: base.json: cannot read: No such file or directory (the baseline the shards"
                " were compared with; give it with --baseline)\n",
                2,
            ),
        )
        _, _, code = run_cli("merge", "s1.json", "s2.json", "--out", "m.json", "--baseline", "moved.json", cwd=self.tmp)
        merged = self.read_json("m.json")
        self.assertEqual((code, len(merged["regressed"]), merged["baseline"]["path"]), (1, 2, "moved.json"))
        self.write_json("base.json", {"changed": True})
        _, stderr, code = run_cli("merge", "s1.json", "s2.json", "--out", "m.json", cwd=self.tmp)
        self.assertEqual(
            (stderr, code),
            (
                "eval_agent merge: error: base.json: not the baseline the shards were compared with (its SHA-256"
                " differs); give that one with --baseline\n",
                2,
            ),
        )

    def test_merge_refuses_shards_that_differ_in_baseline_gate_task_file_selection_or_a_setting_naming_it(self) -> None:
        self.shards_against_a_baseline()
        s2 = self.read_json("s2.json")

        def changed(change: Any) -> str:
            doc = self.read_json("s2.json")
            change(doc)
            return self.write_json("other.json", doc)

        cases = [
            (lambda doc: doc.update(gate=90.0), "gate (90%)", "(80%)"),
            (lambda doc: doc.update(gateOn="pass-all"), "gate-on (pass-all)", "(trials)"),
            (
                lambda doc: doc["baseline"].update(path="old.json", sha256="0" * 64),
                "baseline (old.json, SHA-256 000000000000…)",
                f"(base.json, SHA-256 {s2['baseline']['sha256'][:12]}…)",
            ),
            (
                lambda doc: doc.pop("baseline"),
                "baseline (none)",
                f"(base.json, SHA-256 {s2['baseline']['sha256'][:12]}…)",
            ),
            (
                lambda doc: doc["manifest"]["taskFile"].update(sha256="e" * 64),
                "task file (SHA-256 eeeeeeeeeeee…)",
                f"(SHA-256 {s2['manifest']['taskFile']['sha256'][:12]}…)",
            ),
            (
                lambda doc: doc["manifest"]["selection"].update(category=["asset.*"]),
                "selection (--category asset.*)",
                "(all tasks)",
            ),
            (
                lambda doc: doc["manifest"]["backendSettings"].update(url="http://127.0.0.1:1/run"),
                'backend settings ({"url":"http://127.0.0.1:1/run"})',
                f'({{"url":"{s2["manifest"]["backendSettings"]["url"]}"}})',
            ),
            (
                lambda doc: doc["manifest"].update(systemPromptSha256="a" * 64),
                "system prompt (SHA-256 aaaaaaaaaaaa…)",
                "(none)",
            ),
        ]
        self.work_in_tmp()
        for change, theirs, ours in cases:
            with self.subTest(theirs):
                other = changed(change)
                with self.assertRaises(ConfigError) as caught:
                    merge.main(["s1.json", os.path.basename(other), "--out", "m.json"])
                self.assertEqual(
                    str(caught.exception),
                    f"other.json: its {theirs} differs from s1.json's {ours}: not shards of one run",
                )


class CompareOnASelection(TempDirTestCase):
    def test_tasks_the_candidate_did_not_select_are_not_selected_and_a_task_gone_from_its_file_is_removed(
        self,
    ) -> None:
        run_cli("--out", "base.json", cwd=self.tmp)
        data = canonical_task_data()
        data["tasks"] = [task for task in data["tasks"] if task["id"] != "asset-tag-additive"]
        tasks = self.write_json("fewer.json", data)
        _, _, code = run_cli("--tasks", tasks, "--task", "asset-*", "--baseline", "base.json", cwd=self.tmp)
        self.assertEqual(code, 0, "tasks not selected do not fail the baseline gate")
        stdout, stderr, code = run_cli("compare", "base.json", "eval-results.json", cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        lines = stdout.splitlines()
        self.assertIn("REMOVED            asset-tag-additive  was pass", lines)
        self.assertIn("NOT SELECTED       5 tasks", lines)
        self.assertIn("overall                100%   100%  no change", lines)
        self.assertEqual(lines[-1], "1 removed · 5 not selected · 4 still passing")

    def test_a_shard_compared_with_a_whole_baseline_leaves_the_other_shards_not_selected(self) -> None:
        run_cli("--out", "base.json", cwd=self.tmp)
        stdout, stderr, code = run_cli("--shard", "1/2", "--baseline", "base.json", cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        self.assertEqual(stdout.splitlines()[-1], "5 not selected · 5 still passing")


def settled(task_id: str, passes: int, trials: int, because: str) -> dict[str, Any]:
    """A task's entry of a --runs auto run: passes of trials, and why its test stopped it."""
    return {**entry(task_id, passes, trials), "adaptive": {"trials": trials, "stoppedBecause": because}}


def trialled(task_id: str, statuses: str) -> dict[str, Any]:
    """A task's entry of a fixed run, with its trials in order: `P` a pass, `F` a fail."""
    trials = [
        {"status": "pass" if s == "P" else "fail", "durationMs": 1.0, "toolCalls": [], "usage": None} for s in statuses
    ]
    return {**entry(task_id, statuses.count("P"), len(statuses)), "trialResults": trials}


def stops(rate: float) -> dict[tuple[int, int, str], float]:
    """Where --runs auto's test at the defaults stops a task of this pass rate, (passes, trials, why), with the chance
    of each, exactly over every path of its trials."""
    from harness.adaptive import CONTINUE, MOST, Auto, sequential_test, verdict

    test, stopped, states = sequential_test(Auto()), {}, {(0, 0): 1.0}
    while states:
        further: dict[tuple[int, int], float] = {}
        for (passes, trials), chance in states.items():
            said = verdict(test, passes, trials)
            if said != CONTINUE:
                stopped[passes, trials, "" if said == MOST else said] = chance
                continue
            for state, step in (((passes + 1, trials + 1), rate), ((passes, trials + 1), 1 - rate)):
                further[state] = further.get(state, 0.0) + chance * step
        states = further
    return stopped


def chance_regressed(then: float, now: float) -> float:
    """The chance that compare calls a task of pass rate `then` in an auto baseline, `now` in an auto candidate,
    regressed."""
    return sum(
        p * q
        for (b, m, was), p in stops(then).items()
        for (a, n, is_now), q in stops(now).items()
        if classify(entry("t", b, m), entry("t", a, n), settled=(was or None, is_now or None)).change == "regressed"
    )


class AutoSideCompared(unittest.TestCase):
    """A side run with --runs auto weighs each task alike: its reliable tasks ran longer than its broken ones."""

    def test_an_auto_sides_latency_median_and_p95_weigh_each_task_alike(self) -> None:
        # Nothing changed but how many trials each task ran: a fast task 10 then and 2 now, a slow one 10 and 6. Over
        # every trial the median read 5.5ms then and 10ms now, a growth of 82% no task had.
        def timed(task_id: str, ms: float, trials: int) -> dict[str, Any]:
            entry = trialled(task_id, "P" * trials)
            entry["trialResults"] = [{**trial, "durationMs": ms} for trial in entry["trialResults"]]
            return entry

        baseline = run_of([timed("fast", 1.0, 10), timed("slow", 10.0, 10)], 10)
        candidate = run_of([timed("fast", 1.0, 2), timed("slow", 10.0, 6)], 10)
        candidate["manifest"]["adaptive"] = {"max": 10, "confidence": 95.0, "reliability": 90.0}
        overall = compare(baseline, candidate).costs.overall
        self.assertEqual(overall["latencyMedianMs"][0], overall["latencyMedianMs"][1])
        self.assertEqual((overall["latencyP95Ms"], overall["latencyMs"]), ((10.0, 10.0), (11, 11)))

    def test_what_reading_the_tests_verdicts_costs_and_buys_at_the_defaults(self) -> None:
        # as docs/regressions.md says: a task fallen from always passing to half the time caught 79% of the time, a
        # flaky task that did not change called regressed at most 8% of the time
        self.assertAlmostEqual(chance_regressed(1.0, 0.5), 0.793, places=3)
        self.assertLessEqual(max(chance_regressed(rate / 100, rate / 100) for rate in range(50, 100, 2)), 0.08)

    def test_a_fixed_sides_trials_are_read_in_order_by_the_auto_sides_test(self) -> None:
        # 9/10 against 2/5 is p = 0.077 by Fisher's test; the auto side's test settles the fixed side's first 6 reliable
        auto = {"max": 10, "confidence": 95.0, "reliability": 90.0}
        fixed = run_of([trialled("t0", "PPPPPPPPPF"), trialled("t1", "PPPPFPPPFP"), trialled("t2", "P" * 10)], 10)
        candidate = run_of(
            [
                settled("t0", 2, 5, "unreliable"),
                settled("t1", 2, 5, "unreliable"),  # the fixed side's trials never settled: Fisher's test alone
                settled("t2", 6, 6, "reliable"),
            ],
            10,
        )
        candidate["manifest"]["adaptive"] = auto
        changes = {task.id: (task.change, task.detail.split(" tool:")[0]) for task in compare(fixed, candidate).tasks}
        self.assertEqual(
            changes,
            {
                "t0": ("regressed", "9/10 → 2/5 (settled reliable, now unreliable)"),
                "t1": ("noise", "8/10 → 2/5 (p=0.25), within chance"),
                "t2": ("still passing", "10/10 → 6/6 (p=1)"),
            },
        )
        # and the other way round: an auto baseline's reliable task, a fixed candidate's trials settling it unreliable
        baseline = run_of([settled("t0", 6, 6, "reliable")], 10)
        baseline["manifest"]["adaptive"] = auto
        now = run_of([trialled("t0", "PPFPFFPPPP")], 10)  # unreliable at its 6th: 3 fails of 6; p = 0.25 over all 10
        (change,) = compare(baseline, now).tasks
        self.assertEqual(
            (change.change, change.detail),
            ("regressed", "6/6 → 7/10 (settled reliable, now unreliable) tool:wrong-name: " + WRONG[17:]),
        )

    def test_a_task_its_test_settled_reliable_then_and_unreliable_now_regressed_where_fisher_cannot_tell(self) -> None:
        # 6/6 against 3/6 is p = 0.18 by Fisher's test, yet each side's test settled its verdict at 95% confidence
        then = [settled("t0", 6, 6, "reliable"), settled("t1", 6, 6, "reliable"), settled("t2", 0, 2, "unreliable")]
        now = [settled("t0", 3, 6, "unreliable"), settled("t1", 2, 5, "unreliable"), settled("t2", 6, 6, "reliable")]
        baseline, candidate = run_of(then, 10), run_of(now, 10)
        for side in (baseline, candidate):
            side["manifest"]["adaptive"] = {"max": 10, "confidence": 95.0, "reliability": 90.0}
        comparison = compare(baseline, candidate)
        changes = {task.id: (task.change, task.detail) for task in comparison.tasks}
        self.assertEqual(
            changes,
            {
                "t0": ("regressed", "6/6 → 3/6 (settled reliable, now unreliable) tool:wrong-name: " + WRONG[17:]),
                "t1": ("regressed", "6/6 → 2/5 (settled reliable, now unreliable) tool:wrong-name: " + WRONG[17:]),
                "t2": ("fixed", "0/2 → 6/6 (settled unreliable, now reliable)"),
            },
        )
        self.assertEqual(comparison.regressed, ["t0", "t1"])
        # A fixed baseline's 6/6 had no test settle it: Fisher's test alone, as for any fixed run
        fixed = run_of([entry("t0", 6, 6)], 6)
        self.assertEqual(next(task.change for task in compare(fixed, candidate).tasks if task.id == "t0"), "noise")

    def test_an_auto_candidate_whose_tasks_fell_is_an_overall_regression_though_its_pooled_trials_rose(self) -> None:
        ids = [f"t{n}" for n in range(10)]
        baseline = run_of([entry(task_id, 10, 10) for task_id in ids[:8]] + [entry(t, 0, 10) for t in ids[8:]], 10)
        # Now 6 pass (6 trials each, settled reliable) and 4 fail (2 trials each): 36/44 pooled, 82% against 80%.
        candidate = run_of([entry(task_id, 6, 6) for task_id in ids[:6]] + [entry(t, 0, 2) for t in ids[6:]], 10)
        candidate["manifest"]["adaptive"] = {"max": 10, "confidence": 95.0, "reliability": 90.0}
        comparison = compare(baseline, candidate)
        self.assertEqual(comparison.overall, (Fraction(80), Fraction(60)))
        self.assertEqual(comparison.by_category, {"asset.get": (Fraction(80), Fraction(60))})
        self.assertEqual(comparison.regressed, ["t6", "t7"])
        # A sign test over the tasks' own rates: 2 fell, none rose (p = 1/4); all 8 passing ones falling is (1/256).
        self.assertEqual((comparison.overall_p, comparison.overall_regressed), (0.25, False))
        fell = run_of([entry(task_id, 0, 2) for task_id in ids], 10)
        fell["manifest"]["adaptive"] = candidate["manifest"]["adaptive"]
        self.assertEqual(
            (compare(baseline, fell).overall_p, compare(baseline, fell).overall_regressed), (1 / 256, True)
        )
