"""A schema's pattern matched in time linear in the argument: no agent argument ever reaches re's backtracker.

Python's re backtracks, has no timeout and holds the interpreter while it does: ^(a+)(a+)(a+)(a+)(a+)(a+)(a+)(a+)b$
takes seconds on 60 characters and ^(a+)+$ longer than any run, and a run could not even be stopped. Here a pattern,
as re's own parser reads it, becomes a position automaton (Glushkov's: one state per character class where it stands,
an edge per way the pattern goes from one to the next, each edge with the anchors it passes, ^ $ \\b ...), and a
search keeps the set of states every way of matching has reached, as one int of bits: each character costs the same
whatever the pattern's ambiguity, so an argument costs its length times the pattern's size at most. The sets met are
remembered (a bounded cache), so that a typical argument costs a dictionary look-up or two per character.

This replaces the earlier refusal at load of the patterns whose backtracking is exponential: nothing here backtracks,
so (a+)+ is as harmless as a+, and refusing the polynomial ones too would have refused everyday patterns (^.+@.+$).
What a set of states cannot follow is refused at load instead: backreferences, lookarounds, conditionals, atomic
groups and possessive repeats (they are not regular, or not without a different engine), and a pattern whose repeats,
written out, make more than MAX_POSITIONS positions. Which character a class takes is asked of re itself, one
character against one class at a time (constant time, so that IGNORECASE and \\w mean what they mean to re).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from harness.records import field, record

try:  # the parser re itself compiles with; public as sre_parse before 3.11, which warns of it since
    from re import _constants as _sre  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

# Positions (character classes, once repeats are written out) past which a pattern is refused: ^[\w-]{1,64}$ has 64,
# a semantic version about 60. A longer bound is maxLength's to check. Parsed items and edges are capped alike.
MAX_POSITIONS = 2_000
MAX_ITEMS = 20_000
MAX_EDGES = 200_000
CACHED = 4_096  # character classes and state sets remembered per pattern, a bounded memory against a hostile argument
CATEGORIES = {
    _sre.CATEGORY_DIGIT: r"\d",
    _sre.CATEGORY_NOT_DIGIT: r"\D",
    _sre.CATEGORY_SPACE: r"\s",
    _sre.CATEGORY_NOT_SPACE: r"\S",
    _sre.CATEGORY_WORD: r"\w",
    _sre.CATEGORY_NOT_WORD: r"\W",
}
REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT)
# The anchors, one bit each: what holds at a place between two characters.
START, LINE_START, END, LINE_END, END_STRING, BOUNDARY, NOT_BOUNDARY, ASCII_BOUNDARY, ASCII_NOT_BOUNDARY = (
    1 << bit for bit in range(9)
)
WORDS = BOUNDARY | NOT_BOUNDARY | ASCII_BOUNDARY | ASCII_NOT_BOUNDARY
EMPTY_NOT_BOUNDARY = re.search(r"\B", "") is not None  # not before Python 3.14
REFUSED = {
    _sre.GROUPREF: "a backreference (\\1, (?P=name))",
    _sre.ASSERT: "a lookahead or lookbehind ((?=...), (?<=...))",
    _sre.ASSERT_NOT: "a negative lookahead or lookbehind ((?!...), (?<!...))",
    _sre.GROUPREF_EXISTS: "a conditional ((?(1)...|...))",
    # Python 3.11's: 3.10's re has neither (a key put in their place would take the backreference's reason)
    **{
        getattr(_sre, name): reason
        for name, reason in (
            ("ATOMIC_GROUP", "an atomic group ((?>...))"),
            ("POSSESSIVE_REPEAT", "a possessive repeat (*+, ++, ?+, {m,n}+)"),
        )
        if hasattr(_sre, name)
    },
}


class Unsupported(ValueError):
    """A pattern this matcher cannot run in linear time: the reason, as a message says it."""


# A part of a pattern: its first positions and its last, each with the anchors on the way (as bits), the anchors of
# each way it matches empty text, and its edges (from, to, anchors).
Part = tuple[frozenset[tuple[int, int]], frozenset[tuple[int, int]], frozenset[int], frozenset[tuple[int, int, int]]]
EMPTY: Part = (frozenset(), frozenset(), frozenset({0}), frozenset())


@record
class Pattern:
    """One pattern, compiled: search(text) is re.search(pattern, text) is not None, in linear time."""

    source: str
    classes: tuple[tuple[Callable[[str], Any], int], ...]  # each distinct class (a one-character fullmatch): its bits
    follows: tuple[int, ...]  # each position's next positions through edges without anchors, and the start's last
    anchored: tuple[tuple[int, int, int], ...]  # the edges with anchors: (from, anchors, to as a bit)
    ends: tuple[tuple[int, int], ...]  # (a position, or the start's, anchors) that end a match
    anchors: int  # every anchor the pattern uses
    masks: dict[str, int] = field(default_factory=dict, repr=False, compare=False)  # character -> positions taking it
    nexts: dict[tuple[int, int], int] = field(default_factory=dict, repr=False, compare=False)  # (states, place) ->
    finals: dict[int, int] = field(default_factory=dict, repr=False, compare=False)  # place -> states that end there

    def search(self, text: str) -> bool:
        """Whether the pattern matches somewhere in the text."""
        masks, nexts = self.masks, self.nexts
        begin = 1 << (len(self.follows) - 1)
        length, anchors = len(text), self.anchors
        # Between two characters only ^ $ \A \Z can hold nowhere but at the ends: there, no anchor is looked for.
        ends_only = not anchors & (WORDS | LINE_START | LINE_END)
        anywhere = self._final(0)
        state = 0
        for at, char in enumerate(text):
            state |= begin  # a search: a match may start anywhere
            if anchors and (not ends_only or at == 0 or at >= length - 1):
                place = self._place(text, at, length)
                if state & self._final(place):
                    return True
            else:
                place = 0
                if state & anywhere:
                    return True
            following = nexts.get((state, place))
            if following is None:
                following = self._follow(state, place)
            mask = masks.get(char)
            if mask is None:
                mask = self._mask(char)
            state = following & mask
        return bool((state | begin) & self._final(self._place(text, length, length) if anchors else 0))

    def _final(self, place: int) -> int:
        """The positions (and the start) where a match can end at a place where these anchors hold."""
        final = self.finals.get(place)
        if final is None:
            final = self.finals[place] = sum({1 << end for end, need in self.ends if not need & ~place})
        return final

    def _follow(self, state: int, place: int) -> int:
        """The positions one character further from these, through edges whose anchors hold here (remembered)."""
        following = 0
        rest = state
        while rest:
            low = rest & -rest
            following |= self.follows[low.bit_length() - 1]
            rest ^= low
        for start, need, to in self.anchored:
            if state >> start & 1 and not need & ~place:
                following |= to
        if len(self.nexts) >= CACHED:
            self.nexts.clear()
        self.nexts[state, place] = following
        return following

    def _mask(self, char: str) -> int:
        """The positions whose class takes this character."""
        if len(self.masks) >= CACHED:
            self.masks.clear()
        mask = 0
        for fullmatch, positions in self.classes:
            if fullmatch(char):  # one character against one class: nothing to backtrack
                mask |= positions
        self.masks[char] = mask
        return mask

    def _place(self, text: str, at: int, length: int) -> int:
        """The anchors that hold between text[at - 1] and text[at]."""
        before = text[at - 1] if at else ""
        after = text[at] if at < length else ""
        place = 0
        if not at:
            place |= START | LINE_START
        elif before == "\n":
            place |= LINE_START
        if at == length:
            place |= END | LINE_END | END_STRING
        elif after == "\n":
            place |= LINE_END | (END if at == length - 1 else 0)
        if self.anchors & WORDS:
            words = _word(before), _word(after)
            ascii_words = words[0] and before.isascii(), words[1] and after.isascii()
            place |= BOUNDARY if words[0] != words[1] else NOT_BOUNDARY
            place |= ASCII_BOUNDARY if ascii_words[0] != ascii_words[1] else ASCII_NOT_BOUNDARY
            if not length and not EMPTY_NOT_BOUNDARY:  # re's \B holds nowhere in an empty text before Python 3.14
                place &= ~(NOT_BOUNDARY | ASCII_NOT_BOUNDARY)
        return place


def _word(char: str) -> bool:
    """Whether re's \\w takes the character (an empty one is no word character)."""
    return char.isalnum() or char == "_"


def compile_pattern(source: str) -> Pattern:
    """The pattern ready to search; Unsupported if it cannot be run in linear time (re.error if it is no pattern)."""
    parsed = _sre_parse.parse(source)
    automaton = _Automaton()
    try:
        starts, ends, empty, edges = automaton.part(parsed.data, parsed.state.flags)
    except RecursionError:
        raise Unsupported("nested too deeply; write it with fewer groups in groups") from None
    begin = len(automaton.classes)
    edges |= {(begin, to, need) for to, need in starts}
    follows = [0] * (begin + 1)
    anchored = []
    for start, to, need in sorted(edges):
        if need:
            anchored.append((start, need, 1 << to))
        else:
            follows[start] |= 1 << to
    classes: dict[tuple[str, int], int] = {}
    for position, (class_source, flags) in enumerate(automaton.classes):
        classes[class_source, flags] = classes.get((class_source, flags), 0) | 1 << position
    return Pattern(
        source,
        tuple(
            (re.compile(class_source, flags).fullmatch, positions)
            for (class_source, flags), positions in classes.items()
        ),
        tuple(follows),
        tuple(anchored),
        tuple(sorted({*ends, *((begin, need) for need in empty)})),
        automaton.anchors,
    )


class _Automaton:
    """The positions of one pattern (a character class each), numbered as the parser meets them."""

    def __init__(self) -> None:
        self.classes: list[tuple[str, int]] = []  # each position's class, as a pattern of one character, and flags
        self.anchors = 0
        self.items = 0

    def part(self, items: Any, flags: int) -> Part:
        """The automaton of a sequence of parsed items: each item's, joined end to start."""
        part = EMPTY
        for op, arg in items:
            part = self.sequence(part, self.item(op, arg, flags))
        return part

    def item(self, op: Any, arg: Any, flags: int) -> Part:
        self.count()
        if op in REFUSED:
            raise Unsupported(f"{REFUSED[op]} cannot be matched in linear time; write the pattern without one")
        if op is _sre.SUBPATTERN:
            _, add, remove, items = arg
            return self.part(items, (flags | add) & ~remove)
        if op is _sre.BRANCH:
            parts = [self.part(items, flags) for items in arg[1]]
            return (
                frozenset().union(*(part[0] for part in parts)),
                frozenset().union(*(part[1] for part in parts)),
                frozenset().union(*(part[2] for part in parts)),
                frozenset().union(*(part[3] for part in parts)),
            )
        if op in REPEATS:
            low, high, items = arg
            part = EMPTY
            for _ in range(low):
                self.count()
                part = self.sequence(part, self.part(items, flags))
            if high == _sre.MAXREPEAT:
                return self.sequence(part, self.looped(self.part(items, flags)))
            # Written out nested, X{0,3} as (X(X(X)?)?)?: each copy's ends link to the next copy only, not to all.
            tail = EMPTY
            for _ in range(high - low):
                self.count()
                starts, ends, empty, edges = self.sequence(self.part(items, flags), tail)
                tail = starts, ends, empty | {0}, edges
            return self.sequence(part, tail)
        if op is _sre.AT:
            anchor = _anchor(arg, flags)
            self.anchors |= anchor
            return frozenset(), frozenset(), frozenset({anchor}), frozenset()
        if len(self.classes) >= MAX_POSITIONS:
            raise Unsupported(_too_large())
        self.classes.append((_class_source(op, arg), flags & (re.IGNORECASE | re.ASCII | re.DOTALL)))
        position = len(self.classes) - 1
        return frozenset({(position, 0)}), frozenset({(position, 0)}), frozenset(), frozenset()

    def count(self) -> None:
        """One more item or repeat written out, refused past MAX_ITEMS: ((?:\\b){999}){999} has no position."""
        self.items += 1
        if self.items > MAX_ITEMS:
            raise Unsupported(_too_large())

    def sequence(self, first: Part, then: Part) -> Part:
        """Two parts one after the other: each end of the first linked to each start of the next."""
        starts, ends, empty, edges = first
        then_starts, then_ends, then_empty, then_edges = then
        if len(edges) + len(then_edges) + len(ends) * len(then_starts) > MAX_EDGES:
            raise Unsupported(_too_large())
        return (
            starts | {(to, need | more) for need in empty for to, more in then_starts},
            then_ends | {(end, need | more) for end, need in ends for more in then_empty},
            frozenset(need | more for need in empty for more in then_empty),
            edges | then_edges | {(end, to, need | more) for end, need in ends for to, more in then_starts},
        )

    def looped(self, part: Part) -> Part:
        """A part repeated any number of times, none included: each end linked back to each start."""
        starts, ends, empty, edges = part
        if len(edges) + len(ends) * len(starts) > MAX_EDGES:
            raise Unsupported(_too_large())
        back = {(end, to, need | more) for end, need in ends for to, more in starts}
        return starts, ends, empty | {0}, edges | back


def _anchor(code: Any, flags: int) -> int:
    """An anchor's bit, as re reads it under these flags (MULTILINE for ^ and $, ASCII for \\b)."""
    multiline = flags & re.MULTILINE
    ascii_only = flags & re.ASCII
    anchors = {
        _sre.AT_BEGINNING: LINE_START if multiline else START,
        _sre.AT_BEGINNING_STRING: START,
        _sre.AT_END: LINE_END if multiline else END,
        _sre.AT_END_STRING: END_STRING,
        _sre.AT_BOUNDARY: ASCII_BOUNDARY if ascii_only else BOUNDARY,
        _sre.AT_NON_BOUNDARY: ASCII_NOT_BOUNDARY if ascii_only else NOT_BOUNDARY,
    }
    if code not in anchors:
        raise Unsupported(f"an anchor this checker does not know ({code})")
    return anchors[code]


def _class_source(op: Any, arg: Any) -> str:
    """One position of the pattern as a pattern of its own, matching one character."""
    if op is _sre.LITERAL:
        return f"\\U{arg:08x}"
    if op is _sre.NOT_LITERAL:
        return f"[^\\U{arg:08x}]"
    if op is _sre.ANY:
        return "."
    if op is _sre.IN:
        parts: list[str] = []
        for kind, value in arg:
            if kind is _sre.NEGATE:
                parts.insert(0, "^")
            elif kind is _sre.LITERAL:
                parts.append(f"\\U{value:08x}")
            elif kind is _sre.RANGE:
                parts.append(f"\\U{value[0]:08x}-\\U{value[1]:08x}")
            else:
                parts.append(CATEGORIES[value])
        return f"[{''.join(parts)}]"
    raise Unsupported(f"a part of a pattern this checker does not know ({op})")


def _too_large() -> str:
    return (
        f"too large: more than {MAX_POSITIONS} characters once its repeats are written out; "
        "bound a length with maxLength instead"
    )
