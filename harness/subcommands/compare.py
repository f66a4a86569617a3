"""`eval_agent.py compare BASELINE CANDIDATE`: what changed between two runs, regressions first."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from harness.comparison import compare, comparison_document, render
from harness.config import GROWTH_LIMITS, MAX_TOKEN_GROWTH
from harness.costs import require_tokens
from harness.flags import Parser
from harness.reporters import check_outputs
from harness.reporters.console import say
from harness.results import load_results, partial, render_json, write_atomic
from harness.text import GROWTH_FIGURES, growth_reason


def main(argv: Sequence[str]) -> int:
    """Print (and with --out write) the comparison; exit 1 on a regression unless --fail-on none, or on a cost grown
    past a limit given."""
    parser = Parser(
        prog="eval_agent.py compare",
        description="Compare a candidate run with a baseline run: regressions first, then fixes, new and removed "
        "tasks, and pass-rates.",
        epilog="Exit codes: 0 nothing regressed, 1 a task or the overall pass count regressed (with --fail-on "
        "regressed), a cost grew past its limit (--max-token-growth, --max-latency-growth, --max-tool-call-growth) or "
        "a file is a partial run (without --allow-partial), 2 a file is unreadable or not a results file, or a token "
        "limit is given for files that recorded no tokens.",
    )
    parser.add_argument("baseline", metavar="BASELINE")
    parser.add_argument("candidate", metavar="CANDIDATE")
    parser.add_argument("--out", metavar="FILE", help="also write the comparison as JSON")
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="compare a run that was cut short: its missing tasks are listed as not run",
    )
    parser.add_argument(
        "--fail-on",
        choices=("regressed", "none"),
        default="regressed",
        help="exit 1 when a task or the overall pass count regressed (default), or never",
    )
    labels = dict(GROWTH_FIGURES.values())
    for figure, setting in GROWTH_LIMITS.items():
        parser.add_argument(
            setting.flag or "",
            metavar=setting.metavar,
            help=f"exit 1 when the {labels[figure]} of the tasks measured alike grow by more than this, e.g. 20%%",
        )
    args = parser.parse_args(argv)
    limits = {
        figure: setting.read(value, setting.flag or "")
        for figure, setting in GROWTH_LIMITS.items()
        if (value := getattr(args, setting.dest)) is not None
    }
    inputs = [(args.baseline, "BASELINE", "the baseline"), (args.candidate, "CANDIDATE", "the candidate")]
    check_outputs([(args.out, "--out")] if args.out else [], inputs, "compare")
    baseline, candidate = load_results(args.baseline), load_results(args.candidate)
    for path, document in ((args.baseline, baseline), (args.candidate, candidate)):
        why = partial(document)
        if why and not args.allow_partial:
            print(
                f"eval_agent compare: {path} is a partial run ({why}); compare it anyway with --allow-partial",
                file=sys.stderr,
            )
            return 1
    if "tokens" in limits:
        for path, document in ((args.baseline, baseline), (args.candidate, candidate)):
            require_tokens(path, document, MAX_TOKEN_GROWTH.flag or "")
    comparison = compare(baseline, candidate, limits)
    for line in render(comparison, args.baseline, args.candidate):
        say(line)
    if args.out:
        document = comparison_document(comparison, args.baseline, args.candidate, baseline, candidate)
        write_atomic(args.out, render_json(document))
    regressed = comparison.regressed or comparison.overall_regressed
    grown = [growth for growth in comparison.growth if growth.exceeded]
    for growth in grown:
        say(f"gate: {growth_reason(growth)}")
    return 1 if (regressed and args.fail_on == "regressed") or grown else 0
