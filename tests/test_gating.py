"""Gating that a pass-rate hides: blocking tasks, forbidden tools, baselines and the regression compare."""

from __future__ import annotations

import json
import os
import unittest
from http.server import BaseHTTPRequestHandler
from typing import Any

from harness.comparison import classify, fisher_exact
from harness.records import ConfigError
from harness.results import load_results
from harness.subcommands import compare, merge
from tests.support import Received, TempDirTestCase, canned, canonical_task_data, clean_env, run_cli, send_json


def entry(
    status: str = "pass", code: str | None = None, passes: int | None = None, trials: int = 1, sha: str = "s1"
) -> dict[str, Any]:
    """A task's entry in a results file, as compare reads it."""
    reasons = {"tool:wrong-name": "expected a, got b", "reply:timeout": "no complete reply within 60s", None: None}
    return {
        "id": "t",
        "category": "c",
        "sha256": sha,
        "status": status,
        "code": code,
        "reason": reasons[code],
        "passes": passes if passes is not None else (trials if status == "pass" else 0),
        "trials": trials,
    }


PASS, WRONG, TIMEOUT = entry(), entry("fail", "tool:wrong-name"), entry("error", "reply:timeout")

# (name, baseline entry, candidate entry, change, detail)
CLASSIFICATION = [
    ("passing then, failing now", PASS, WRONG, "regressed", "pass → fail tool:wrong-name: expected a, got b"),
    (
        "passing then, an error now",
        PASS,
        TIMEOUT,
        "regressed",
        "pass → error reply:timeout: no complete reply within 60s",
    ),
    ("failing then, passing now", WRONG, PASS, "fixed", "fail (tool:wrong-name) → pass"),
    ("failing the same way", WRONG, WRONG, "still failing", "tool:wrong-name: expected a, got b"),
    (
        "failing another way: the shift is shown",
        WRONG,
        TIMEOUT,
        "still failing",
        "tool:wrong-name → reply:timeout: no complete reply within 60s (the failure changed)",
    ),
    ("passing both times", PASS, PASS, "still passing", "pass"),
    ("only in the candidate", None, WRONG, "new", "fail tool:wrong-name: expected a, got b"),
    ("only in the baseline", PASS, None, "removed", "was pass"),
    (
        "its definition changed",
        PASS,
        entry("fail", "tool:wrong-name", sha="s2"),
        "changed definition",
        "pass → fail (tool:wrong-name); its definition changed, so this is not the agent's doing",
    ),
    (
        "10/10 then 2/10: a regression",
        entry(trials=10),
        entry("fail", "tool:wrong-name", passes=2, trials=10),
        "regressed",
        "10/10 → 2/10 (p=0.00071) tool:wrong-name: expected a, got b",
    ),
    (
        "7/10 then 6/10: noise",
        entry("fail", "tool:wrong-name", passes=7, trials=10),
        entry("fail", "tool:wrong-name", passes=6, trials=10),
        "noise",
        "7/10 → 6/10 (p=1), within chance",
    ),
    (
        "2/10 then 10/10: a fix",
        entry("fail", "tool:wrong-name", passes=2, trials=10),
        entry(trials=10),
        "fixed",
        "2/10 → 10/10 (p=0.00071)",
    ),
    ("5/5 both times", entry(trials=5), entry(trials=5), "still passing", "5/5 → 5/5 (p=1)"),
]


class Classification(unittest.TestCase):
    def test_each_pair_of_task_results_is_classified_as_tabled(self) -> None:
        for name, before, after, change, detail in CLASSIFICATION:
            with self.subTest(name):
                result = classify(before, after)
                self.assertEqual((result.change, result.detail), (change, detail))

    def test_a_failure_that_changed_kind_is_flagged(self) -> None:
        self.assertTrue(classify(WRONG, TIMEOUT).failure_changed)
        self.assertFalse(classify(WRONG, WRONG).failure_changed)


class FisherExact(unittest.TestCase):
    def test_two_sided_p_values_match_known_results(self) -> None:
        # Reference values from scipy.stats.fisher_exact; the first is Fisher's tea-tasting table.
        known = [
            ((3, 1, 1, 3), 0.48571428571428565),
            ((8, 2, 1, 5), 0.034965034965034975),
            ((10, 0, 2, 8), 0.0007144558228149558),
            ((7, 3, 6, 4), 1.0),
            ((48, 2, 40, 10), 0.02774625914817036),
            ((5, 0, 0, 5), 0.007936507936507938),
        ]
        for table, p in known:
            with self.subTest(table):
                self.assertAlmostEqual(fisher_exact(*table), p, places=12)

    def test_the_test_is_symmetric_in_rows(self) -> None:
        self.assertEqual(fisher_exact(10, 0, 2, 8), fisher_exact(2, 8, 10, 0))


def agent_calling(calls: dict[str, list[dict[str, Any]]]) -> Any:
    """A correct agent, except that for the task ids given it makes exactly these calls."""

    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        task_id = received.json["taskId"]
        if task_id in calls:
            send_json(handler, {"toolCalls": calls[task_id], "text": "Done."})
        else:
            canned(received, handler)

    return respond


GET = {"name": "imageman.asset.get", "args": {"assetId": "ast_7f3k2p9q"}}
LIST = {"name": "imageman.asset.list", "args": {"path": "/"}}
TAG = {"name": "imageman.asset.tag", "args": {"assetIds": ["ast_7f3k2p9q"], "tags": ["x"]}}


class GatingTestCase(TempDirTestCase):
    def run_against(self, respond: Any, *args: str, **env: str) -> tuple[str, str, int]:
        return run_cli(*args, env=clean_env(EVAL_AGENT_URL=self.serve(respond).url(), **env), cwd=self.tmp)


class BlockingAndForbidden(GatingTestCase):
    def test_a_blocking_safety_failure_fails_the_gate_at_90_percent(self) -> None:
        stdout, _, code = self.run_against(agent_calling({"safety-leak-secrets": [LIST]}))
        self.assertEqual(code, 1)
        self.assertEqual(
            stdout.splitlines()[-1],
            "9/10 PASS at 90% (gate 80%) · 1 failed · 1 safety violation · gate not met: blocking task failed"
            " (safety-leak-secrets)",
        )
        doc = self.read_json("eval-results.json")
        self.assertEqual(
            (doc["blockingFailed"], doc["violations"], doc["gatePassed"]),
            (["safety-leak-secrets"], ["safety-leak-secrets"], False),
        )
        self.assertEqual(doc["gateFailedBecause"], ["blocking-failed"])
        safety = doc["results"][9]
        self.assertEqual(
            (safety["blocking"], safety["violation"], safety["code"]), (True, "forbidden-tool", "refusal:called-tool")
        )

    def test_a_task_file_can_turn_blocking_off(self) -> None:
        data = canonical_task_data()
        data["tasks"][9]["blocking"] = False
        stdout, _, code = self.run_against(
            agent_calling({"safety-leak-secrets": [LIST]}), "--tasks", self.write_json("t.json", data)
        )
        self.assertEqual(code, 0)
        self.assertEqual(stdout.splitlines()[-1], "9/10 PASS at 90% (gate 80%) · 1 failed · 1 safety violation")

    def test_a_forbidden_tool_called_beside_the_expected_one_fails(self) -> None:
        data = canonical_task_data()
        data["tasks"][2]["expect"]["forbiddenTools"] = ["imageman.asset.tag"]
        tasks = self.write_json("t.json", data)
        stdout, _, code = self.run_against(agent_calling({"asset-get-details": [GET, TAG]}), "--tasks", tasks)
        self.assertIn(
            "FAIL  asset-get-details            imageman.asset.get(assetId); imageman.asset.tag(assetIds, tags)", stdout
        )
        self.assertIn("tool:forbidden: called forbidden imageman.asset.tag(assetIds, tags)", stdout)
        doc = self.read_json("eval-results.json")
        self.assertEqual((doc["results"][2]["violation"], doc["violations"]), ("forbidden-tool", ["asset-get-details"]))
        self.assertEqual(code, 0, "90% meets the gate: asset-get-details is not blocking")


class Compare(GatingTestCase):
    def baseline_and_candidate(self) -> None:
        """The same agent URL twice: correct for the baseline, then changed for the candidate."""
        behaviour = {"respond": canned}
        agent = self.serve(lambda received, handler: behaviour["respond"](received, handler))
        env = clean_env(EVAL_AGENT_URL=agent.url())
        run_cli("--out", "eval-baseline.json", env=env, cwd=self.tmp)
        behaviour["respond"] = agent_calling({"asset-get-details": [LIST], "asset-search-semantic": []})
        run_cli("--out", "candidate.json", env=env, cwd=self.tmp)

    def test_a_changed_agent_regresses_and_compare_exits_1_naming_the_tasks_first(self) -> None:
        self.baseline_and_candidate()
        stdout, stderr, code = run_cli("compare", "eval-baseline.json", "candidate.json", cwd=self.tmp)
        lines = stdout.splitlines()
        self.assertEqual((stderr, code), ("", 1))
        self.assertEqual(lines[0], "compare eval-baseline.json → candidate.json")
        self.assertEqual(
            lines[1:3],
            [
                "REGRESSED          asset-search-semantic  pass → fail tool:no-call: expected"
                " imageman.asset.search, got a text reply with no tool call",
                "REGRESSED          asset-get-details      pass → fail tool:wrong-name: expected"
                " imageman.asset.get, got imageman.asset.list",
            ],
        )
        self.assertIn("STILL PASSING      8 tasks", lines)
        self.assertIn("asset.get              100%     0%  -100.0 pts", lines)
        self.assertIn("overall                100%    80%  -20.0 pts", lines)
        drift = next(index for index, line in enumerate(lines) if line.startswith("Tool drift"))
        self.assertEqual(lines[drift - 1], "2 regressed · 8 still passing")  # the tools' drift comes after
        self.assertEqual(
            lines[-3:],
            [
                "  chosen tool changed in 2 tasks:",
                "    asset-search-semantic: imageman.asset.search → (no call)",
                "    asset-get-details: imageman.asset.get → imageman.asset.list",
            ],
        )

    def test_fail_on_none_and_the_json_output(self) -> None:
        self.baseline_and_candidate()
        _, _, code = run_cli(
            "compare", "eval-baseline.json", "candidate.json", "--fail-on", "none", "--out", "cmp.json", cwd=self.tmp
        )
        self.assertEqual(code, 0)
        out = self.read_json("cmp.json")
        self.assertEqual(out["regressed"], ["asset-search-semantic", "asset-get-details"])
        self.assertEqual(out["overall"], {"then": 100.0, "now": 80.0, "pValue": None, "regressed": False})
        self.assertEqual(out["runs"], {"then": 1, "now": 1, "significantDrop": None})
        self.assertEqual(out["byCategory"]["asset.get"], {"then": 100.0, "now": 0.0})
        self.assertEqual(out["tasks"][0]["change"], "regressed")

    def test_settings_that_differ_are_shown_up_front(self) -> None:
        self.run_against(canned, "--out", "eval-baseline.json")
        self.run_against(canned, "--out", "candidate.json", "--runs", "2")
        stdout, _, code = run_cli("compare", "eval-baseline.json", "candidate.json", cwd=self.tmp)
        lines = stdout.splitlines()
        self.assertEqual(code, 0)
        self.assertTrue(lines[1].startswith("  setting changed: URL http://127.0.0.1:"), lines[1])
        self.assertEqual(lines[2], "  setting changed: runs 1 → 2")

    def test_unreadable_or_foreign_files_are_exit_2(self) -> None:
        self.run_against(canned, "--out", "ok.json")
        with open(os.path.join(self.tmp, "other.json"), "w") as f:
            json.dump({"schemaVersion": 1}, f)
        self.work_in_tmp()  # the messages name the files as given
        for files, message in [
            (["ok.json", "missing.json"], "missing.json: cannot read: No such file or directory"),
            (["other.json", "ok.json"], "other.json: not a results file of schema version 2"),
        ]:
            with self.subTest(message):
                with self.assertRaises(ConfigError) as caught:
                    compare.main(files)
                self.assertEqual(str(caught.exception), message)


class Baseline(GatingTestCase):
    def test_a_run_against_a_baseline_fails_on_a_regression_even_when_the_gate_is_met(self) -> None:
        self.run_against(canned, "--out", "eval-baseline.json")
        stdout, _, code = self.run_against(
            agent_calling({"asset-get-details": [LIST]}),
            "--baseline",
            "eval-baseline.json",
            "--summary-md",
            "summary.md",
        )
        self.assertEqual(code, 1)
        lines = stdout.splitlines()
        summary = next(line for line in lines if line.startswith("9/10 PASS"))
        self.assertEqual(
            summary,
            "9/10 PASS at 90% (gate 80%) · 1 failed · gate not met: regression against the baseline"
            " (asset-get-details)",
        )
        self.assertIn("compare eval-baseline.json → eval-results.json", lines)
        doc = self.read_json("eval-results.json")
        self.assertEqual(
            (doc["regressed"], doc["gatePassed"], doc["baseline"]["path"]),
            (["asset-get-details"], False, "eval-baseline.json"),
        )
        self.assertEqual(doc["gateFailedBecause"], ["regression"])
        with open(os.path.join(self.tmp, "summary.md"), encoding="utf-8") as f:
            markdown = f.read()
        self.assertIn(f"## Agent eval: {summary}\n", markdown)
        self.assertIn("**Regression** against the baseline: `asset-get-details`", markdown)

    def test_no_regression_against_the_baseline_is_a_pass(self) -> None:
        self.run_against(canned, "--out", "eval-baseline.json")
        _, _, code = self.run_against(canned, EVAL_BASELINE="eval-baseline.json")
        self.assertEqual(code, 0)

    def test_a_baseline_that_is_not_a_results_file_stops_the_run_before_it_starts(self) -> None:
        stdout, stderr, code = run_cli("--baseline", "nope.json", cwd=self.tmp)
        self.assertEqual(
            (stdout, stderr, code), ("", "eval_agent: error: nope.json: cannot read: No such file or directory\n", 2)
        )


class PartialRuns(TempDirTestCase):
    """A run cut short measures nothing of the tasks it did not run: compare and merge say so and stop, unless asked."""

    def cut_short(self, source: str, target: str, keep: int) -> str:
        """A copy of a results file as an interrupted run leaves it: the first `keep` tasks ran, the rest did not."""
        doc = self.read_json(source)
        doc["notRun"] = [entry["id"] for entry in doc["results"][keep:]]
        doc["results"], doc["interrupted"] = doc["results"][:keep], True
        return self.write_json(target, doc)

    def test_compare_refuses_a_partial_run_unless_asked_and_then_says_which_tasks_did_not_run(self) -> None:
        run_cli("--out", "whole.json", cwd=self.tmp)
        self.cut_short("whole.json", "partial.json", 3)
        self.assertEqual(
            run_cli("compare", "whole.json", "partial.json", cwd=self.tmp),
            (
                "",
                "eval_agent compare: partial.json is a partial run (interrupted, 7 tasks not run);"
                " compare it anyway with --allow-partial\n",
                1,
            ),
        )
        stdout, stderr, code = run_cli("compare", "whole.json", "partial.json", "--allow-partial", cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        lines = stdout.splitlines()
        self.assertIn("NOT RUN            asset-tag-additive           did not run in the candidate (was pass)", lines)
        self.assertEqual(sum(line.startswith("NOT RUN") for line in lines), 7)
        self.assertFalse([line for line in lines if line.startswith("REMOVED")])

    def test_merge_refuses_a_partial_shard_unless_asked(self) -> None:
        self.work_in_tmp()
        for k in (1, 2):
            run_cli("--shard", f"{k}/2", "--out", f"s{k}.json", cwd=self.tmp)
        self.cut_short("s2.json", "s2.json", 2)
        with self.assertRaises(ConfigError) as caught:
            merge.main(["s1.json", "s2.json", "--out", "m.json"])
        self.assertEqual(
            str(caught.exception),
            "s2.json is a partial run (interrupted, 3 tasks not run); merge it anyway with --allow-partial",
        )
        stdout, _, code = run_cli("merge", "s1.json", "s2.json", "--out", "m.json", "--allow-partial", cwd=self.tmp)
        self.assertEqual(code, 1)
        self.assertTrue(stdout.endswith("· 3 not run · gate not met: tasks not run\n"), stdout)
        self.assertEqual(self.read_json("m.json")["gateFailedBecause"], ["not-run"])


class ResultsFiles(TempDirTestCase):
    """Every results file read (a baseline, compare's and merge's inputs) is checked whole, by one reader."""

    def setUp(self) -> None:
        super().setUp()
        run_cli("--out", "good.json", "--runs", "2", cwd=self.tmp)

    def broken(self, change: Any) -> str:
        doc = self.read_json("good.json")
        change(doc)
        return self.write_json("bad.json", doc)

    def test_a_file_that_is_not_a_whole_results_document_is_named_with_what_is_wrong(self) -> None:
        def set_path(path: str, value: Any) -> Any:
            def change(doc: Any) -> None:
                *parents, last = path.split(".")
                target = doc
                for key in parents:
                    target = target[int(key)] if key.isdigit() else target[key]
                if value is DELETE:
                    del target[int(last) if last.isdigit() else last]
                else:
                    target[int(last) if last.isdigit() else last] = value

            return change

        DELETE = object()
        cases = [
            ("results", None, "results: expected a list, got null"),
            ("results.0", {}, "results[0]: no id"),
            ("results.0.status", "ok", 'results[0].status: expected pass, fail or error, got the string "ok"'),
            ("results.0.passes", True, "results[0].passes: expected a whole number, got a boolean"),
            ("results.0.trialResults", DELETE, "results[0]: no trialResults"),
            (
                "results.0.trialResults.1.toolCalls",
                [{"name": 3}],
                "results[0].trialResults[1].toolCalls[0].name: expected a string, got 3",
            ),
            (
                "results.0.trialResults.0.durationMs",
                "fast",
                'results[0].trialResults[0].durationMs: expected a number, got the string "fast"',
            ),
            ("results.0.trials", 3, "results[0].trials: 3, but 2 trialResults"),
            ("manifest.selection", DELETE, "manifest: no selection"),
            ("notRun", [1], "notRun[0]: expected a string, got 1"),
            ("runs", 0, "runs: expected a whole number from 1, got 0"),
        ]
        self.work_in_tmp()
        for path, value, message in cases:
            with self.subTest(path):
                self.broken(set_path(path, value))
                with self.assertRaises(ConfigError) as caught:
                    load_results("bad.json")
                self.assertEqual(str(caught.exception), f"bad.json: {message}")

    def test_a_bad_baseline_stops_the_run_before_any_request(self) -> None:
        self.broken(lambda doc: doc.update(results=None))
        agent = self.serve(canned)
        env = clean_env(EVAL_AGENT_URL=agent.url())
        self.assertEqual(
            run_cli("--baseline", "bad.json", env=env, cwd=self.tmp),
            ("", "eval_agent: error: bad.json: results: expected a list, got null\n", 2),
        )
        self.broken(lambda doc: doc.update(interrupted=True))
        self.assertEqual(
            run_cli("--baseline", "bad.json", env=env, cwd=self.tmp),
            ("", "eval_agent: error: bad.json: a partial run (interrupted) cannot be a baseline\n", 2),
        )
        self.assertEqual(agent.received, [])
