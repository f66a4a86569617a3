"""Cost against a baseline: tokens, tool calls, steps and latency then and now, and the growth limits on them."""

from __future__ import annotations

import contextlib
import copy
import io
import os
from decimal import Decimal
from fractions import Fraction
from typing import Any

import eval_agent
from harness.comparison import compare, comparison_document, render
from harness.config import RUN_SETTINGS, read_command_line, run_config
from harness.costs import task_cost
from harness.records import ConfigError, Growth, Tally
from harness.results import load_results, render_json, write_atomic
from harness.subcommands import merge
from harness.text import headline
from harness.verdict import decide
from tests.providers import canned_calls, fake_openai, openai_completion, user_prompt
from tests.support import TempDirTestCase, canned, clean_env, run_cli, send_json

GET = {"name": "imageman.asset.get", "args": {"assetId": "ast_7f3k2p9q"}}


def trial(tokens: tuple[int, int] | None = None, calls: int = 1, steps: int = 1, ms: float = 10.0) -> dict[str, Any]:
    """A passing trial as the results file keeps it, of the cost given."""
    return {
        "status": "pass",
        "toolCalls": [GET] * calls,
        "durationMs": ms,
        "usage": {"inputTokens": tokens[0], "outputTokens": tokens[1]} if tokens else None,
        "steps": steps,
    }


def entry(task_id: str, *trials: dict[str, Any], sha: str = "s1") -> dict[str, Any]:
    """A passing task's entry, with its trials."""
    return {
        "id": task_id,
        "category": "c",
        "sha256": sha,
        "status": "pass",
        "code": None,
        "reason": None,
        "passes": len(trials),
        "trials": len(trials),
        "trialResults": list(trials),
    }


def run_of(*entries: dict[str, Any]) -> dict[str, Any]:
    """As much of a results document as compare reads."""
    ids = [e["id"] for e in entries]
    manifest = {"taskFile": {"sha256": "f"}, "selection": {"shard": None, "taskIds": ids}}
    return {"manifest": manifest, "runs": entries[0]["trials"], "results": list(entries), "notRun": []}


class Figures(TempDirTestCase):
    def test_a_tasks_cost_is_its_mean_per_trial_and_its_latencys_median_and_p95(self) -> None:
        trials = [trial((100, 20), 1, 1, 10.0), trial(None, 3, 2, 30.0), trial((60, 20), 2, 3, 20.0)]
        trials += [trial((100, 20), 2, 2, ms) for ms in (40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0)]
        cost = task_cost(trials)
        # Tokens over the trials that reported usage (9 of 10): (8 × 120 + 80) / 9, exactly.
        self.assertEqual(
            (cost.tokens, cost.tool_calls, cost.steps), (Fraction(8 * 120 + 80, 9), (1 + 3 + 2 + 2 * 7) / 10, 20 / 10)
        )
        self.assertEqual((cost.latency_ms, cost.latency_median_ms, cost.latency_p95_ms), (55.0, 55.0, 100.0))
        self.assertIsNone(task_cost([trial(None), trial(None)]).tokens, "not recorded, never 0")

    def test_the_overall_figures_sum_the_means_of_the_tasks_both_ran_alike(self) -> None:
        then = run_of(
            entry("a", trial((100, 0), 1, 1, 10.0), trial((100, 0), 1, 1, 30.0)),
            entry("b", trial((50, 0), 2, 3, 20.0), trial((50, 0), 2, 3, 20.0)),
            entry("changed", trial((10, 0)), trial((10, 0))),
            entry("removed", trial((10, 0)), trial((10, 0))),
        )
        now = run_of(
            entry("a", trial((150, 0), 2, 2, 40.0), trial((150, 0), 2, 2, 40.0)),
            entry("b", trial((75, 0), 2, 3, 20.0), trial(None, 2, 3, 20.0)),
            entry("changed", trial((999, 0)), trial((999, 0)), sha="s2"),
            entry("new", trial((999, 0)), trial((999, 0))),
        )
        comparison = compare(then, now)
        costs = comparison.costs
        self.assertEqual([task_id for task_id, *_ in costs.tasks], ["a", "b"], "a changed definition is not counted")
        self.assertEqual(
            costs.overall,
            {
                "tokens": (150.0, 225.0),
                "toolCalls": (3.0, 4.0),
                "steps": (4.0, 5.0),
                "latencyMs": (40.0, 60.0),
                "latencyMedianMs": (20.0, 30.0),
                "latencyP95Ms": (30.0, 40.0),
            },
        )
        lines = render(comparison, "base.json", "now.json")
        start = lines.index(
            "cost                         then          now  change (each task's mean per trial, summed over the 2"
            " tasks measured alike)"
        )
        self.assertEqual(
            lines[start + 1 : start + 9],
            [
                "tokens                        150          225  +50%",
                "tool calls                      3            4  +33.3%",
                "steps                           4            5  +25%",
                "latency                      40ms         60ms  +50%",
                "latency median               20ms         30ms  +50%",
                "latency p95                  30ms         40ms  +33.3%",
                "  a: tokens 100 → 150 (+50%) · tool calls 1 → 2 (+100%) · steps 1 → 2 (+100%) · latency"
                " median 20ms → 40ms (+100%) · p95 30ms → 40ms (+33.3%)",
                "  b: tokens 50 → 75 (+50%) · tool calls 2 → 2 · steps 3 → 3 · latency median 20ms → 20ms ·"
                " p95 20ms → 20ms",
            ],
        )
        document = comparison_document(
            comparison,
            "base.json",
            "now.json",
            {"runId": "r1", "fingerprint": "f1"},
            {"runId": "r2", "fingerprint": "f2"},
        )
        cost = document["cost"]
        self.assertEqual((cost["tasks"], cost["tokenTasks"]), (2, 2))
        self.assertEqual(cost["overall"]["toolCalls"], {"then": 3.0, "now": 4.0, "percent": 33.3333})
        self.assertEqual(cost["byTask"][0]["latencyP95Ms"], {"then": 30.0, "now": 40.0, "percent": 33.3333})
        self.assertEqual(
            cost["growth"]["tokens"],
            {"then": 150.0, "now": 225.0, "percent": 50.0, "limit": None, "exceeded": False, "tasks": 2},
        )

    def test_tokens_no_task_recorded_in_both_runs_show_no_change_between_them(self) -> None:
        then = run_of(entry("a", trial((100, 0))), entry("b", trial()))
        now = run_of(entry("a", trial()), entry("b", trial((180, 0))))
        comparison = compare(then, now)
        self.assertIn(
            "tokens                        100          180  - (no task recorded them in both runs)",
            render(comparison, "a", "b"),
        )
        ids = {"runId": "r", "fingerprint": "f"}
        document = comparison_document(comparison, "a", "b", ids, ids)
        self.assertEqual(document["cost"]["overall"]["tokens"], {"then": 100.0, "now": 180.0, "percent": None})

    def test_the_page_says_over_which_tasks_it_sums_the_tokens(self) -> None:
        run_cli("--out", "r.json", cwd=self.tmp)
        document = self.read_json("r.json")
        then, now = copy.deepcopy(document), copy.deepcopy(document)
        then["results"][0]["trialResults"][0]["usage"] = {"inputTokens": 100, "outputTokens": 0}
        then["results"][1]["trialResults"][0]["usage"] = {"inputTokens": 100, "outputTokens": 0}
        now["results"][0]["trialResults"][0]["usage"] = {"inputTokens": 150, "outputTokens": 0}
        argv = ["report", self.write_json("now.json", now), "--baseline", self.write_json("then.json", then)]
        page_path = os.path.join(self.tmp, "p.html")
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(eval_agent.main([*argv, "-o", page_path]), 0)
        with open(page_path, encoding="utf-8") as f:
            page = f.read()
        self.assertIn(
            '<tr><td>tokens</td><td class="n">100</td><td class="n">150</td>'
            "<td>+50% (over the 1 task that recorded tokens in both)</td></tr>",
            page,
        )

    def test_tokens_are_not_recorded_when_neither_run_recorded_any(self) -> None:
        comparison = compare(run_of(entry("a", trial())), run_of(entry("a", trial())))
        self.assertEqual(comparison.costs.overall["tokens"], (None, None))
        self.assertIn("tokens               not recorded not recorded  -", render(comparison, "a", "b"))


# (figure, then, now, limit, exceeded, the reason the headline gives): each limit passed and failed.
LIMITS = [
    ("tokens", 1000.0, 1340.0, "20", True, "tokens +34% against the baseline (limit 20%)"),
    ("tokens", 1000.0, 1200.0, "20", False, None),
    ("tokens", 1000.0, 1200.4, "20", True, "tokens +20.04% against the baseline (limit 20%)"),
    ("tokens", 1000.0, 500.0, "0", False, None),
    ("toolCalls", 10.0, 13.0, "25", True, "tool calls +30% against the baseline (limit 25%)"),
    ("toolCalls", 10.0, 12.0, "25", False, None),
    ("toolCalls", 0.0, 0.0, "0", False, None),
    ("toolCalls", 0.0, 2.0, "100", True, "tool calls from 0 to 2 against the baseline (limit 100%)"),
    ("latencyMs", 200.0, 300.0, "49.5", True, "latency +50% against the baseline (limit 49.5%)"),
    ("latencyMs", 200.0, 299.0, "49.5", False, None),
    ("tokens", None, 1000.0, "20", True, "tokens cannot be compared with the baseline: the baseline recorded none"),
    ("tokens", 1000.0, None, "20", True, "tokens cannot be compared with the baseline: this run recorded none"),
    (
        "toolCalls",
        None,
        None,
        "20",
        True,
        "tool calls cannot be compared with the baseline: no task both runs measured alike recorded them in both",
    ),
]


class Limits(TempDirTestCase):
    def test_each_limit_fails_the_gate_only_past_it_and_the_verdict_names_it(self) -> None:
        codes = {"tokens": "token-growth", "toolCalls": "tool-call-growth", "latencyMs": "latency-growth"}
        for figure, then, now, limit, exceeded, reason in LIMITS:
            with self.subTest(figure=figure, then=then, now=now, limit=limit):
                growth = Growth(figure=figure, then=then, now=now, limit=Decimal(limit), tasks=3)
                self.assertEqual(growth.exceeded, exceeded)
                summary = decide([Tally("t", "c", ("pass",))], Decimal(80), growth=[growth])
                self.assertEqual(summary.gate_failed_because, (codes[figure],) if exceeded else ())
                self.assertEqual(summary.exit_code, 1 if exceeded else 0)
                if reason is not None:
                    self.assertIn(f"gate not met: {reason}", headline(summary))

    def test_a_cost_that_grew_by_exactly_the_limit_passes_it_whatever_the_numbers_of_trials(self) -> None:
        # 2 calls in 3 trials then, 4 in 5 now: exactly +20% a trial, which floats made 20.000000000000014%.
        then = run_of(entry("a", *(trial(calls=calls, steps=calls) for calls in (1, 1, 0))))
        now = run_of(entry("a", *(trial(calls=calls, steps=calls) for calls in (1, 1, 1, 1, 0))))
        tool_calls = next(g for g in compare(then, now, {"toolCalls": Decimal(20)}).growth if g.figure == "toolCalls")
        self.assertEqual((tool_calls.percent, tool_calls.exceeded), (20, False))
        grown = next(g for g in compare(then, now, {"toolCalls": Decimal("19.9999")}).growth if g.figure == "toolCalls")
        self.assertTrue(grown.exceeded)
        # Latency as the results keep it: 1.5 ms then, 1.8 now is +20%, which floats made 20.000000000000004%.
        then, now = run_of(entry("a", trial(ms=1.5))), run_of(entry("a", trial(ms=1.8)))
        latency = next(g for g in compare(then, now, {"latencyMs": Decimal(20)}).growth if g.figure == "latencyMs")
        self.assertEqual((latency.percent, latency.exceeded), (20, False))

    def test_a_figure_without_a_limit_never_fails_the_gate(self) -> None:
        growth = Growth(figure="tokens", then=None, now=5.0, limit=None, tasks=1)
        self.assertEqual(decide([Tally("t", "c", ("pass",))], Decimal(80), growth=[growth]).gate_failed_because, ())

    def test_tokens_the_run_did_not_record_fail_a_token_limit_the_baseline_had_tokens_for(self) -> None:
        then = run_of(entry("a", trial((100, 20))), entry("b", trial((100, 20))))
        now = run_of(entry("a", trial()), entry("b", trial()))
        (tokens, *_) = compare(then, now, {"tokens": Decimal(20)}).growth
        self.assertEqual((tokens.then, tokens.now, tokens.exceeded), (240.0, None, True))

    def test_a_growth_limit_reads_a_percentage_with_or_without_its_sign_and_needs_a_baseline(self) -> None:
        def config(*argv: str, **env: str) -> Any:
            return run_config(read_command_line(argv, env, RUN_SETTINGS, {}, {}))

        limits = config(
            "--baseline", "b.json", "--max-token-growth", "20%", EVAL_MAX_LATENCY_GROWTH="150"
        ).growth_limits
        self.assertEqual(limits, {"tokens": Decimal(20), "latencyMs": Decimal(150)})
        for argv, env, message in [
            (
                ["--max-token-growth", "20%"],
                {},
                "--max-token-growth: a growth limit needs a baseline to grow from: give --baseline (EVAL_BASELINE)",
            ),
            (
                [],
                {"EVAL_MAX_TOOL_CALL_GROWTH": "5"},
                "EVAL_MAX_TOOL_CALL_GROWTH: a growth limit needs a baseline to grow from: give --baseline"
                " (EVAL_BASELINE)",
            ),
            (
                ["--baseline", "b.json", "--max-latency-growth", "-5"],
                {},
                "--max-latency-growth: expected a percentage from 0 to 1000000, got '-5'",
            ),
            (
                ["--baseline", "b.json", "--max-latency-growth", "lots"],
                {},
                "--max-latency-growth: expected a percentage from 0 to 1000000, got 'lots'",
            ),
        ]:
            with self.subTest(argv=argv, env=env):
                with self.assertRaises(ConfigError) as caught:
                    config(*argv, **env)
                self.assertEqual(str(caught.exception), message)

    def test_a_growth_limit_too_large_to_show_or_keep_is_a_setting_error(self) -> None:
        def config(*argv: str) -> Any:
            return run_config(read_command_line(argv, {}, RUN_SETTINGS, {}, {}))

        self.assertEqual(config("--baseline", "b.json", "--max-token-growth", "1000000").growth_limits["tokens"], 10**6)
        for limit in ("1e400", "1e28", "1000000.5"):
            with self.subTest(limit=limit):
                with self.assertRaises(ConfigError) as caught:
                    config("--baseline", "b.json", "--max-token-growth", limit)
                self.assertEqual(
                    str(caught.exception), f"--max-token-growth: expected a percentage from 0 to 1000000, got {limit!r}"
                )


def one_more_call(received: Any, handler: Any) -> None:
    """A correct agent that looks the asset up before it does what asset-tag-additive asks: one tool call more."""
    if received.json["taskId"] == "asset-tag-additive":
        tag = {"name": "imageman.asset.tag", "args": {"assetIds": ["ast_a", "ast_b"], "tags": ["x"]}}
        send_json(handler, {"toolCalls": [GET, tag]})
    else:
        canned(received, handler)


def wordier_openai(received: Any, handler: Any) -> None:
    """The OpenAI fake, saying what it said before at 340 tokens a reply, where it took 150."""
    calls = canned_calls(user_prompt(received))
    completion = openai_completion(calls, None if calls else "I can't share that.")
    completion["usage"] = {"prompt_tokens": 240, "completion_tokens": 100, "total_tokens": 340}
    send_json(handler, completion)


class AgainstABaselineRun(TempDirTestCase):
    def test_tokens_a_provider_reported_grow_past_a_token_limit_and_within_a_wider_one(self) -> None:
        def run(fake: Any, *args: str) -> tuple[str, str, int]:
            settings = {"EVAL_BACKEND": "openai", "OPENAI_BASE_URL": self.serve(fake).url("/v1"), "EVAL_MODEL": "m"}
            return run_cli(*args, env=clean_env(OPENAI_API_KEY="sk-test-1", **settings), cwd=self.tmp)

        run(fake_openai, "--out", "base.json")
        stdout, stderr, code = run(wordier_openai, "--baseline", "base.json", "--max-token-growth", "126%")
        self.assertEqual((stderr, code), ("", 1))
        self.assertIn("gate not met: tokens +126.6% against the baseline (limit 126%)", stdout)
        self.assertIn("tokens                       1500         3400  +126.6% (limit 126%: exceeded)", stdout)
        self.assertEqual(self.read_json("eval-results.json")["growth"]["tokens"]["percent"], 126.6667)
        _, _, code = run_cli("compare", "base.json", "eval-results.json", "--max-token-growth", "127", cwd=self.tmp)
        self.assertEqual(code, 0)

    def test_a_run_whose_tool_calls_grew_past_the_limit_fails_the_gate_naming_it_and_compare_exits_1(self) -> None:
        behaviour = {"respond": canned}
        env = clean_env(EVAL_AGENT_URL=self.serve(lambda r, h: behaviour["respond"](r, h)).url())
        run_cli("--out", "base.json", env=env, cwd=self.tmp)
        behaviour["respond"] = one_more_call
        stdout, stderr, code = run_cli(
            "--baseline", "base.json", "--max-tool-call-growth", "5%", "--max-latency-growth", "100000",
            "--summary-md", "summary.md", env=env, cwd=self.tmp,
        )  # fmt: skip
        self.assertEqual((stderr, code), ("", 1))
        lines = stdout.splitlines()
        self.assertIn(
            "10/10 PASS at 100% (gate 80%) · gate not met: tool calls +11.1% against the baseline (limit 5%)", lines
        )
        self.assertIn("tool calls                      9           10  +11.1% (limit 5%: exceeded)", lines)
        doc = self.read_json("eval-results.json")
        self.assertEqual(doc["gateFailedBecause"], ["tool-call-growth"])
        self.assertEqual(
            doc["growth"]["toolCalls"],
            {"then": 9.0, "now": 10.0, "percent": 11.1111, "limit": 5.0, "exceeded": True, "tasks": 10},
        )
        self.assertEqual((doc["growth"]["latencyMs"]["limit"], doc["growth"]["tokens"]["limit"]), (100000.0, None))
        with open(os.path.join(self.tmp, "summary.md"), encoding="utf-8") as f:
            summary = f.read().splitlines()
        start = summary.index("### Cost against the baseline (10 tasks measured alike, each task's mean per trial)")
        self.assertEqual(
            summary[start + 2 : start + 6],
            ["| cost | then | now | change |", "|---|---:|---:|---|", "| tokens | not recorded | not recorded | - |",
             "| tool calls | 9 | 10 | +11.1% (limit 5%: **exceeded**) |"],
        )  # fmt: skip
        (row,) = [line.split(" | ") for line in summary if line.startswith("| asset-tag-additive |")]
        self.assertEqual(row[1:4], ["not recorded → not recorded (-)", "1 → 2 (+100%)", "1 → 1 (no change)"])
        self.assertRegex(row[4], r"^[0-9.]+ms → [0-9.]+ms \(.+\) \|$", "latency's median then and now")
        stdout, _, code = run_cli(
            "compare", "base.json", "eval-results.json", "--max-tool-call-growth", "12", cwd=self.tmp
        )
        self.assertEqual(code, 0)
        self.assertIn("tool calls                      9           10  +11.1% (limit 12%)", stdout.splitlines())
        stdout, _, code = run_cli(
            "compare", "base.json", "eval-results.json", "--max-tool-call-growth", "11", cwd=self.tmp
        )
        self.assertEqual(code, 1)
        self.assertEqual(stdout.splitlines()[-1], "gate: tool calls +11.1% against the baseline (limit 11%)")
        _, stderr, code = run_cli(
            "report", "eval-results.json", "--baseline", "base.json", "-o", "p.html", cwd=self.tmp
        )
        with open(os.path.join(self.tmp, "p.html"), encoding="utf-8") as f:
            self.assertIn("+11.1% (limit 5%: exceeded)", f.read(), "the limits the run was gated on")

    def test_a_token_limit_against_a_baseline_that_recorded_no_tokens_stops_the_run_before_it_starts(self) -> None:
        agent = self.serve(canned)
        env = clean_env(EVAL_AGENT_URL=agent.url())
        run_cli("--out", "base.json", env=env, cwd=self.tmp)
        stdout, stderr, code = run_cli("--baseline", "base.json", "--max-token-growth", "20", env=env, cwd=self.tmp)
        self.assertEqual(
            (stdout, stderr, code),
            (
                "",
                "eval_agent: error: --max-token-growth (EVAL_MAX_TOKEN_GROWTH): base.json recorded no tokens (its"
                " backend reported no usage), so token growth cannot be measured against it\n",
                2,
            ),
        )
        _, stderr, code = run_cli("compare", "base.json", "base.json", "--max-token-growth", "20", cwd=self.tmp)
        self.assertEqual(
            (stderr, code),
            (
                "eval_agent compare: error: --max-token-growth: base.json recorded no tokens (its backend reported no"
                " usage), so token growth cannot be measured against it\n",
                2,
            ),
        )

    def test_merge_applies_the_shards_growth_limits_to_the_whole_run(self) -> None:
        run_cli("--out", "base.json", env=clean_env(EVAL_AGENT_URL=self.serve(canned).url()), cwd=self.tmp)
        env = clean_env(EVAL_AGENT_URL=self.serve(one_more_call).url())
        paths = [os.path.join(self.tmp, f"s{k}.json") for k in (1, 2)]
        for k, path in enumerate(paths, 1):
            run_cli(
                "--shard", f"{k}/2", "--baseline", "base.json", "--max-tool-call-growth", "5", "--out", path,
                env=env, cwd=self.tmp,
            )  # fmt: skip
        self.work_in_tmp()  # the shards name their baseline as given
        document, summary, _ = merge.merge([load_results(path) for path in paths], paths, None)
        self.assertEqual(summary.gate_failed_because, ("tool-call-growth",))
        self.assertIn("gate not met: tool calls +11.1% against the baseline (limit 5%)", headline(summary))
        write_atomic("merged.json", render_json(document))
        self.assertEqual(load_results("merged.json")["growth"]["toolCalls"]["tasks"], 10)
        other = load_results(paths[1])
        other["growth"]["toolCalls"]["limit"] = 7.5
        with self.assertRaises(ConfigError) as caught:
            merge.merge([load_results(paths[0]), other], paths, None)
        self.assertEqual(
            str(caught.exception),
            f"{paths[1]}: its growth limit (toolCalls 7.5%) differs from {paths[0]}'s (toolCalls 5%): not shards of"
            " one run",
        )
