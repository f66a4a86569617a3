"""What a schema pattern costs to compile and to search, against re where re can take it at all.

Run: python3 bench/patterns.py   (about ten seconds)

For each pattern, the positions of its automaton, the time to compile it (once per tool per load), and the time to
search an argument of 1,000 characters that it matches and one it does not: the first search of a fresh pattern
(nothing cached) and the median of later ones (the sets met remembered), beside re.search on the same argument.
Then the arguments that make re backtrack for seconds, which the linear matcher reads in the same time as any other.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness.patterns import compile_pattern

EVERYDAY = [
    ("identifier", r"^[a-zA-Z0-9_-]{1,64}$", "a" * 64, "a" * 999 + "!"),
    ("e-mail", r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$", "x" * 980 + "@example.org", "x" * 1000),
    ("URL", r"^https?://[^\s/$.?#].[^\s]*$", "https://example.org/" + "p" * 980, "https://example.org/ " + "p" * 979),
    ("word", r"\bcat\b", "concat " * 142 + "a cat", "concat " * 143),
    ("ISO date-time", r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$", "", ""),
]
EVIL = [
    (r"^(?:[a-z0-9_]+){1,8}$", "a" * 80 + "!"),
    (r"^(a+)(a+)(a+)(a+)(a+)(a+)(a+)(a+)b$", "a" * 60),
    (r"^.*.*.*.*.*.*.*.*=.*$", "a" * 60),
    (r"^(?:a+){1,8}$", "a" * 60 + "!"),
    (r"^(a?){25}a{25}$", "a" * 25),
    (r"^(a+)+$", "a" * 1000 + "!"),
]


def timed(run: Callable[[], object], repeat: int = 200) -> float:
    """The median time of one call, in microseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def fresh_search(pattern: str, text: str) -> bool:
    """A search by a pattern compiled for it: nothing remembered yet."""
    return compile_pattern(pattern).search(text)


def main() -> None:
    stamp = "2026-12-02T01:53:10." + "1" * 958 + "Z"
    print(f"{'pattern':<14} {'positions':>9} {'compile':>9}   {'text':<10} {'first':>9} {'later':>9} {'re':>9}")
    for name, pattern, matching, other in EVERYDAY:
        matching, other = matching or stamp, other or stamp[:-1]
        compiled = compile_pattern(pattern)
        positions = len(compiled.follows) - 1
        compile_us = timed(partial(compile_pattern, pattern), 20)
        for label, text in (("matching", matching), ("other", other)):
            first = timed(partial(fresh_search, pattern, text), 20) - compile_us
            later = timed(partial(compiled.search, text))
            theirs = timed(partial(re.search, pattern, text))
            assert compiled.search(text) == (re.search(pattern, text) is not None) == (label == "matching")
            print(
                f"{name:<14} {positions:>9} {compile_us:>7.0f}us   {label:<10} {first:>7.0f}us {later:>7.0f}us "
                f"{theirs:>7.1f}us"
            )
    print("\nthe arguments that make re backtrack for seconds or more (re not run):")
    for pattern, text in EVIL:
        compiled = compile_pattern(pattern)
        later = timed(partial(compiled.search, text))
        print(f"  {pattern:<40} {len(text):>5} characters {later:>7.0f}us")


if __name__ == "__main__":
    main()
