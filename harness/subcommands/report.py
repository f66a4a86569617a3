"""`eval_agent.py report RESULTS`: any results file (a merged one too) as the HTML page, after the fact."""

from __future__ import annotations

import os
from collections.abc import Sequence

from harness.comparison import compare, recorded_limits
from harness.flags import Parser
from harness.reporters import check_outputs
from harness.reporters.console import say
from harness.reporters.page import html_report
from harness.results import load_results, summary_fields, write_atomic
from harness.verdict import decide_document


def main(argv: Sequence[str]) -> int:
    """Render the page, with the changes against a baseline when one is given."""
    parser = Parser(
        prog="eval_agent.py report",
        description="Render a results file (a merged one too) as one self-contained HTML page.",
        epilog="Exit codes: 0 written, 2 a file that cannot be read or is not a results file, or a page that "
        "cannot be written.",
    )
    parser.add_argument("results", metavar="RESULTS", help="the results file")
    parser.add_argument("--baseline", metavar="FILE", help="an earlier run's results: show what changed since")
    parser.add_argument("-o", "--out", metavar="FILE", help="the page (default: RESULTS with .html for .json)")
    args = parser.parse_args(argv)
    out = args.out or os.path.splitext(args.results)[0] + ".html"
    where = "-o" if args.out else "the page"
    inputs = [(args.results, "RESULTS", "the results file"), (args.baseline, "--baseline", "the baseline")]
    check_outputs([(out, where)], inputs, "report")
    document = load_results(args.results)
    document.update(summary_fields(decide_document(document)))  # the headline its entries make, as merge counts it
    # Against the limits the run was gated with, as its own verdict says.
    comparison = compare(load_results(args.baseline), document, recorded_limits(document)) if args.baseline else None
    write_atomic(out, html_report(document, comparison, args.baseline or ""))
    say(f"wrote {out}")
    return 0
