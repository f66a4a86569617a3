"""Leaks: the secret values a run holds, found in what an agent sends back, masked there before anything is written."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

MASK = "***"
MARKER = "\u00absecret:{}\u00bb"  # «secret:OPENAI_API_KEY»: what a cassette holds where a secret was, named
SHORTEST = 4  # characters: a shorter value is no secret, and masking it would garble every reply
ESCAPED = 6  # characters a JSON escape of one character takes at most (\\u0067)


class Secrets:
    """Values that must never be printed or written, each with the name of what holds it (`EVAL_AGENT_TOKEN`)."""

    def __init__(self, named: Mapping[str, str]) -> None:
        self.named = {value: name for value, name in named.items() if len(value) >= SHORTEST}
        self.longest = max(map(len, self.named), default=0)
        self.widest = self.longest * ESCAPED  # the longest text a secret is found in, every character of it escaped
        # How each secret starts, short of whole: what a clip that cut one leaves before its `...`.
        self.starts = {value[:size] for value in self.named for size in range(SHORTEST, len(value))}
        # The longest first, so that a secret that contains another is masked whole.
        longest_first = sorted(self.named, key=len, reverse=True)
        self.pattern = re.compile("|".join(map(re.escape, longest_first))) if self.named else None
        # As written or JSON-escaped: a slower search, for a text with a backslash in it.
        self.escaped = re.compile("|".join(map(_escapable, longest_first))) if self.named else None

    def __bool__(self) -> bool:
        return self.pattern is not None

    def __or__(self, other: Secrets) -> Secrets:
        return Secrets({**self.named, **other.named})

    def find(self, text: str) -> str | None:
        """The name of a secret the text contains, or None."""
        found = self._pattern_for(text).search(text) if self else None
        if found is None:
            return None
        said = found.group(0)
        return self.named.get(said) or next(name for value, name in self.named.items() if _said(value, said))

    def mask(self, text: str) -> str:
        """The text with every secret replaced by ***, and the start of one that a clip cut (`tok-Qw...`) too."""
        if self.pattern is None:
            return text
        masked = self._pattern_for(text).sub(MASK, text)
        return self._mask_cut(masked) if "..." in masked else masked

    def mark(self, text: str) -> str:
        """The text with every secret replaced by a marker that names it (MARKER), where mask() writes ***."""
        if self.pattern is None:
            return text
        return self._pattern_for(text).sub(lambda found: MARKER.format(self.find(found.group(0))), text)

    def mark_json(self, value: Any) -> Any:
        """A JSON value with every secret marked in its strings and its keys."""
        if isinstance(value, str):
            return self.mark(value)
        if isinstance(value, list):
            return [self.mark_json(item) for item in value]
        if isinstance(value, dict):
            return {self.mark(key): self.mark_json(item) for key, item in value.items()}
        return value

    def _mask_cut(self, text: str) -> str:
        """The text with the start of a secret that ends where a clip put `...` masked: what the clip of a reason the
        scorer quoted before it was masked leaves (a backend masks before it clips, and leaves none)."""
        parts = text.split("...")
        for i, part in enumerate(parts[:-1]):
            sizes = range(min(len(part), self.longest - 1), SHORTEST - 1, -1)
            cut = next((size for size in sizes if part[-size:] in self.starts), 0)
            if cut:
                parts[i] = part[:-cut] + MASK
        return "...".join(parts)

    def clip(self, text: str | bytes | bytearray, limit: int) -> str:
        """text.clip of the text with every secret masked first, so that no cut leaves part of one; bytes are read as
        UTF-8 (what is not, replaced), only as far as the clip looks."""
        size = limit * 4  # as far as text.clip looks
        if isinstance(text, (bytes, bytearray)):
            text = text[: self.reach(limit)].decode("utf-8", "replace")
        head = self._masked_head(text, size)
        line = " ".join(head.split())
        if len(line) <= limit and len(text) <= size:
            return line
        return line[: limit - 3] + "..."

    def reach(self, limit: int) -> int:
        """How many bytes of a text clip(text, limit) reads: what a reader of a body need read, and no more."""
        return (limit * 4 + self.widest + 1) * 4  # every character may be 4 bytes; one cut in two is read as one

    def _masked_head(self, text: str, size: int) -> str:
        """The text's first `size` characters masked; a secret that starts among them is masked whole."""
        if self.pattern is None:
            return text[:size]
        parts: list[str] = []
        at = 0
        for found in self._pattern_for(text[: size + self.widest]).finditer(text, 0, size + self.widest):
            if found.start() >= size:
                break
            parts += (text[at : found.start()], MASK)
            at = found.end()
        parts.append(text[at:size])
        return "".join(parts)

    def _pattern_for(self, text: str) -> re.Pattern[str]:
        """The pattern that finds every secret the text holds, written or JSON-escaped."""
        assert self.pattern is not None and self.escaped is not None
        return self.escaped if "\\" in text else self.pattern

    def mask_json(self, value: Any) -> Any:
        """A JSON value with every secret masked in its strings and its keys."""
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, list):
            return [self.mask_json(item) for item in value]
        if isinstance(value, dict):
            return {self.mask(key): self.mask_json(item) for key, item in value.items()}
        return value


def _escapable(value: str) -> str:
    """A pattern for the value as written or with any of its characters JSON-escaped (\\/, \\u0067): what an error
    body that is JSON says a secret as."""
    return "".join(_escapable_character(character) for character in value)


def _escapable_character(character: str) -> str:
    """A pattern for the character as written or JSON-escaped, its hexadecimal digits in either case."""
    if ord(character) > 0xFFFF:
        return re.escape(character)
    short = rf"|\\{re.escape(character)}" if character in '"\\/' else ""
    return rf"(?:{re.escape(character)}|\\u(?i:{ord(character):04x}){short})"


def _said(value: str, text: str) -> bool:
    """Whether the text is the value, JSON-escaped or not."""
    return re.fullmatch(_escapable(value), text) is not None


NO_SECRETS = Secrets({})


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, its keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)


def said_in(value: Any) -> str | None:
    """Every string in a JSON value, its keys too, a line each: what an unreadable reply or call says, read for leaks;
    None when it holds none (or nests too deep to walk)."""
    try:
        return "\n".join(strings(value)) or None
    except RecursionError:
        return None
