"""Run every test, a test class per job on worker processes: the suite mostly waits on subprocesses and sockets.

Usage: python -m tests.parallel [-v] [--workers N]; exit 0 when every test passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import io
import os
import time
import unittest
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Outcome:
    """What one job's tests did: how many ran, how many failed or errored, and unittest's report of them."""

    job: str
    ran: int
    failures: int
    errors: int
    skipped: int
    report: str
    skip_reasons: tuple[str, ...] = ()


def classes(suite: unittest.TestSuite) -> Iterator[str]:
    """`tests.test_cli.StubRun`: every test class of the suite once, in discovery order; a module that failed to import
    by its name, so that its worker fails to import it too and reports why."""
    seen = set()
    for test in _tests(suite):
        failed_import = type(test).__module__ == "unittest.loader"
        name = (
            test.id().split("_FailedTest.", 1)[1]
            if failed_import
            else f"{type(test).__module__}.{type(test).__qualname__}"
        )
        if name not in seen:
            seen.add(name)
            yield name


def _tests(suite: unittest.TestSuite) -> Iterator[unittest.TestCase]:
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _tests(item)
        else:
            yield item


def run_job(job: str, verbosity: int) -> Outcome:
    """Run one test class in this worker and report on it."""
    stream = io.StringIO()
    result = unittest.TextTestRunner(stream=stream, verbosity=verbosity).run(
        unittest.defaultTestLoader.loadTestsFromName(job)
    )
    reasons = tuple(dict.fromkeys(reason for _, reason in result.skipped))
    # An expected failure that passed is a failure: what it waited for has come, and its marker must go.
    failures = len(result.failures) + len(result.unexpectedSuccesses)
    return Outcome(job, result.testsRun, failures, len(result.errors), len(result.skipped), stream.getvalue(), reasons)


def main(argv: list[str] | None = None) -> int:
    """Discover, run in parallel, print every failing class's report (every report with -v), and sum up."""
    parser = argparse.ArgumentParser(prog="python -m tests.parallel", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print every test as unittest -v does")
    parser.add_argument("--workers", type=int, default=max(2, os.cpu_count() or 1), help="worker processes")
    args = parser.parse_args(argv)
    suite = unittest.defaultTestLoader.discover(os.path.join(ROOT, "tests"), top_level_dir=ROOT)
    jobs = list(classes(suite))
    started = time.perf_counter()
    outcomes = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = [pool.submit(run_job, job, 2 if args.verbose else 1) for job in jobs]
        for future in as_completed(futures):
            outcome = future.result()
            outcomes.append(outcome)
            if args.verbose or outcome.failures or outcome.errors:
                print(f"== {outcome.job}\n{outcome.report}", flush=True)
    ran = sum(outcome.ran for outcome in outcomes)
    failures, errors = sum(o.failures for o in outcomes), sum(o.errors for o in outcomes)
    skipped = sum(o.skipped for o in outcomes)
    print(f"Ran {ran} tests in {time.perf_counter() - started:.3f}s ({len(jobs)} classes on {args.workers} workers)")
    for outcome in outcomes:  # a skip is said, with its reason: a missing tool must not pass unnoticed
        for reason in outcome.skip_reasons:
            print(f"SKIPPED {outcome.job}: {reason}")
    if failures or errors:
        print(f"FAILED (failures={failures}, errors={errors})")
        return 1
    print(f"OK{f' (skipped={skipped})' if skipped else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
