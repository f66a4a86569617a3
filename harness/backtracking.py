"""Whether a regular expression can backtrack for an exponential time: the shapes a schema's pattern is refused for.

Python's re backtracks and has no timeout, and it holds the interpreter while it does: one argument against (a+)+$ or
(\\w+\\s?)+$ would stop the run. Such a pattern is one whose automaton reads some text from a state back to the same
state along two different paths (Weber and Seidl's exponential degree of ambiguity): each repetition of that text
doubles the ways a failing match is retried. The automaton here is the pattern's positions (each character class where
it stands), with one edge per way the pattern can go from one position to the next, so that (a+)+ keeps its inner and
outer loop apart as re does; two paths are looked for in the product of the automaton with itself.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

try:  # the parser re itself compiles with; public as sre_parse before 3.11, which warns of it since
    from re import _constants as _sre  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

# Positions, and steps through the product automaton, past which a pattern is too intricate to tell: far past any
# tool schema's pattern (a 300-word alternative takes a tenth of these).
MAX_POSITIONS = 5_000
MAX_STEPS = 500_000
# Characters that tell whether two character classes share one, besides the ends of every range and literal: the
# categories (\d \w \s) and the edges of ASCII, in ASCII and beyond it.
PROBES = string.printable + "\x00\x7f\x85\xa0\xb2\xe9\u0663\u2028\u3000\u4e2d\uff10\U0001f600"
CATEGORIES = {
    _sre.CATEGORY_DIGIT: r"\d",
    _sre.CATEGORY_NOT_DIGIT: r"\D",
    _sre.CATEGORY_SPACE: r"\s",
    _sre.CATEGORY_NOT_SPACE: r"\S",
    _sre.CATEGORY_WORD: r"\w",
    _sre.CATEGORY_NOT_WORD: r"\W",
}
REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", _sre.MAX_REPEAT)}
ZERO_WIDTH = {_sre.AT, _sre.ASSERT, _sre.ASSERT_NOT}
# A repeat of at most this many times is written out, each time with positions of its own; one of more is a loop. A
# bounded repeat is a loop to re, but a short one cannot multiply the ways beyond what a user waits for.
UNROLLED = 8
Edges = Counter[tuple[int, int]]


class Unbounded(ValueError):
    """A pattern that re may take an exponential time to fail on: the reason, as a message says it."""


def check(pattern: str) -> None:
    """Nothing for a pattern re matches in bounded time; Unbounded for one it may not (re.error if it is no pattern)."""
    reason = _reason(pattern)
    if reason:
        raise Unbounded(reason)


@lru_cache(maxsize=256)
def _reason(pattern: str) -> str | None:
    parsed = _sre_parse.parse(pattern)
    automata = _Automata()
    try:
        parts = [automata.part(parsed.data, parsed.state.flags), *automata.lookarounds]
        automata.classify()
        exponential = any(automata.ambiguous(edges) for _, _, _, edges in parts)
    except _TooIntricate:
        return "too intricate to tell that re matches it in bounded time; write a simpler one"
    if exponential:
        return (
            "it can match the same text in two ways under a repeat, as (a+)+, (a|a)* and (\\w+\\s?)+ can, so re may "
            "take an exponential time to find that an argument does not match; write it so that each character has "
            "one way through"
        )
    if automata.backreference:
        return "a backreference (\\1, (?P=name)) can make re take an exponential time; write the pattern without one"
    return None


class _TooIntricate(Exception):
    """More positions or product steps than a check takes."""


# A part of a pattern: its first positions, its last, the ways it matches empty text, and its edges, each with the
# number of ways it can be taken (2 stands for "more than one").
Part = tuple[Counter[int], Counter[int], int, Edges]
EMPTY: Part = (Counter(), Counter(), 1, Counter())


class _Automata:
    """The positions of one pattern (a character class each) and the automata of its parts."""

    def __init__(self) -> None:
        self.classes: list[tuple[str, list[int], int]] = []  # each position's: source, the code points it names, flags
        self.masks: list[int] = []  # each position's: which of the telling characters it matches, as bits
        self.lookarounds: list[Part] = []
        self.backreference = False

    def part(self, items: Any, flags: int) -> Part:
        """The automaton of a sequence of parsed items: each item's, joined end to start."""
        return _sequence(self.item(op, arg, flags) for op, arg in items)

    def item(self, op: Any, arg: Any, flags: int) -> Part:
        if op is _sre.SUBPATTERN:
            _, add, remove, items = arg
            return self.part(items, (flags | add) & ~remove)
        if op is _sre.BRANCH:
            return _either([self.part(items, flags) for items in arg[1]])
        if op in REPEATS:
            low, high, items = arg
            if high > UNROLLED:
                return _looped(self.part(items, flags), low)
            # Written out, as re tries it: X{1,3} is X(X(X)?)?, a copy of X's positions each time.
            tail: Part = EMPTY
            for _ in range(high - low):
                tail = _optional(_sequence([self.part(items, flags), tail]))
            return _sequence([*(self.part(items, flags) for _ in range(low)), tail])
        if op is getattr(_sre, "ATOMIC_GROUP", None):
            return self.part(arg, flags)
        if op in ZERO_WIDTH:
            if op is not _sre.AT:
                self.lookarounds.append(self.part(arg[1], flags))
            return EMPTY
        if op is _sre.GROUPREF_EXISTS:
            _, yes, no = arg
            return _either([self.part(yes, flags), self.part(no or [], flags)])
        if op is _sre.GROUPREF:
            self.backreference = True
            return EMPTY
        if len(self.classes) >= MAX_POSITIONS:
            raise _TooIntricate
        self.classes.append((*_class_source(op, arg), flags & (re.IGNORECASE | re.ASCII | re.DOTALL)))
        position = len(self.classes) - 1
        return Counter({position: 1}), Counter({position: 1}), 0, Counter()

    def classify(self) -> None:
        """Each position's mask over the characters that tell: the probes, and every named code point and those
        beside it (two classes that share a character share one of these)."""
        named = {code + step for _, codes, _ in self.classes for code in codes for step in (-1, 0, 1)}
        near = {chr(code) for code in named if 0 <= code < 0x110000}
        telling = sorted(set(PROBES) | near | {char.swapcase() for char in near})
        masks: dict[tuple[str, int], int] = {}
        for source, _, flags in self.classes:
            if (source, flags) not in masks:
                matches = re.compile(source, flags).fullmatch
                masks[source, flags] = sum(1 << bit for bit, char in enumerate(telling) if matches(char))
        self.masks = [masks[source, flags] for source, _, flags in self.classes]

    def ambiguous(self, edges: Edges) -> bool:
        """Whether two different paths read the same text from a position back to it: a strongly connected part of
        the product automaton holds a position paired with itself and two paths that differ."""
        following: dict[int, list[tuple[int, int]]] = {}
        for (start, end), ways in edges.items():
            following.setdefault(start, []).append((end, ways))
        masks = self.masks
        graph: dict[tuple[int, int], list[tuple[tuple[int, int], bool]]] = {}
        todo = [(position, position) for position in following]
        steps = 0
        while todo:
            pair = todo.pop()
            if pair in graph:
                continue
            left, right = pair
            ahead, beside = following.get(left, ()), following.get(right, ())
            steps += len(ahead) * len(beside)
            if steps > MAX_STEPS:
                raise _TooIntricate
            graph[pair] = [
                ((a, b), left != right or a != b or ways > 1)
                for a, ways in ahead
                for b, _ in beside
                if masks[a] & masks[b]
            ]
            todo += [step for step, _ in graph[pair] if step not in graph]
        for component in _components(graph):
            if any(left == right for left, right in component) and (
                any(left != right for left, right in component)
                or any(differs and step in component for pair in component for step, differs in graph[pair])
            ):
                return True
        return False


def _class_source(op: Any, arg: Any) -> tuple[str, list[int]]:
    """One position of the pattern as a pattern of its own, matching one character, and the code points it names."""
    if op is _sre.LITERAL:
        return f"\\U{arg:08x}", [arg]
    if op is _sre.NOT_LITERAL:
        return f"[^\\U{arg:08x}]", [arg]
    if op is _sre.ANY:
        return ".", []
    if op is _sre.IN:
        parts: list[str] = []
        ends: list[int] = []
        for kind, value in arg:
            if kind is _sre.NEGATE:
                parts.insert(0, "^")
            elif kind is _sre.LITERAL:
                parts.append(f"\\U{value:08x}")
                ends.append(value)
            elif kind is _sre.RANGE:
                parts.append(f"\\U{value[0]:08x}-\\U{value[1]:08x}")
                ends += value
            else:
                parts.append(CATEGORIES[value])
        return f"[{''.join(parts)}]", ends
    raise ValueError(f"an unexpected part of a pattern: {op}")


def _sequence(parts: Iterable[Part]) -> Part:
    """Parts one after the other: each one's ends linked to the next one's starts, past those that can be empty."""
    starts: Counter[int] = Counter()
    ends: Counter[int] = Counter()
    empty = 1
    edges: Edges = Counter()
    for part_starts, part_ends, part_empty, part_edges in parts:
        edges.update(part_edges)
        _link(edges, ends, part_starts)
        if empty:
            starts.update(_times(part_starts, empty))
        ends = _capped(part_ends + _times(ends, part_empty))
        empty = min(2, empty * part_empty)
    return _capped(starts), ends, empty, _capped(edges)


def _either(parts: list[Part]) -> Part:
    starts, ends, edges = Counter[int](), Counter[int](), Counter[tuple[int, int]]()
    for part_starts, part_ends, _, part_edges in parts:
        starts += part_starts
        ends += part_ends
        edges += part_edges
    return _capped(starts), _capped(ends), min(2, sum(part[2] for part in parts)), _capped(edges)


def _looped(part: Part, low: int) -> Part:
    """A repeat of more than UNROLLED times, as a loop: (a|a){1,30} is just as slow as (a|a)+."""
    starts, ends, empty, edges = part
    edges = Counter(edges)
    _link(edges, ends, starts)
    return starts, ends, min(2, empty + (low == 0)), _capped(edges)


def _optional(part: Part) -> Part:
    starts, ends, empty, edges = part
    return starts, ends, min(2, empty + 1), edges


def _link(edges: Edges, ends: Counter[int], starts: Counter[int]) -> None:
    for end, ways_end in ends.items():
        for start, ways_start in starts.items():
            edges[end, start] += ways_end * ways_start


def _times(counter: Counter[Any], ways: int) -> Counter[Any]:
    return Counter({key: value * ways for key, value in counter.items()}) if ways else Counter()


def _capped(counter: Counter[Any]) -> Counter[Any]:
    return Counter({key: min(2, value) for key, value in counter.items() if value})


def _components(graph: dict[tuple[int, int], list[tuple[tuple[int, int], bool]]]) -> Iterator[set[tuple[int, int]]]:
    """The strongly connected components of the graph that hold a cycle (Tarjan's, without recursion)."""
    index: dict[tuple[int, int], int] = {}
    low: dict[tuple[int, int], int] = {}
    stack: list[tuple[int, int]] = []
    on_stack: set[tuple[int, int]] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            steps = graph.get(node, [])
            if child < len(steps):
                work.append((node, child + 1))
                step = steps[child][0]
                if step not in index:
                    work.append((step, 0))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1 or any(step == node for step, _ in graph.get(node, [])):
                    yield component
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
