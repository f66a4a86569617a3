"""Settings, each declared once by what uses it, read from its flag, else its variable, else its default."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.leaks import strings
from harness.records import ConfigError, record
from harness.text import lone_surrogate

if TYPE_CHECKING:
    from argparse import ArgumentParser

Reader = Callable[[Any, str], Any]  # (the text given, where it was given) -> the value; ConfigError naming `where`
PREFIX = "EVAL_"  # the harness's own variables: one it does not know is a mistake, never ignored
TEST_PREFIX = "EVAL_TEST_"  # the test suite's own (EVAL_TEST_CHROMIUM): never the harness's
# The canonical tasks' own placeholder, for the canary a user plants: set for them, it is no mistake under another
# task file, which is only told that it checks no reply for it.
CANARY = "EVAL_CANARY"


def read_json(text: str, where: str) -> Any:
    """JSON as the harness can send it on: no NaN or Infinity, no lone surrogate, nested no deeper than a reader reads.

    Invalid JSON raises ValueError, for the caller to say what it expected; the rest a ConfigError.
    """

    def no_constant(name: str) -> None:
        raise ConfigError(f"{where}: {name} is not JSON")

    try:
        value = json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise ConfigError(f"{where}: JSON nested too deeply to read") from None
    lone = next(filter(None, (lone_surrogate(string) for string in strings(value))), None)
    if lone is not None:
        raise ConfigError(f"{where}: not Unicode text: a lone surrogate ({lone})")
    return value


def as_text(text: str, where: str) -> str:
    """The text as given."""
    return text


@record(kw_only=True)
class Setting:
    """One setting: its variable, its flag (none for a secret), how its text is read, its default, and its help."""

    var: str
    flag: str | None
    help: str
    read: Reader = as_text
    default: Any = None
    metavar: str = "VALUE"
    shown: str | None = None  # the default as --help and the docs say it, where the value itself does not say it well
    secret: bool = False  # never printed or written; read from the environment only, so it shows in no `ps` or history
    ambient: bool = False  # a provider's own variable, set for other tools too: by itself it chooses no backend
    many: bool = False  # a repeatable flag; its variable is comma-separated
    switch: bool = False  # a flag without a value; its variable is 1 or 0

    @property
    def dest(self) -> str:
        """The attribute argparse keeps the flag's value in."""
        return (self.flag or "")[2:].replace("-", "_")

    @property
    def default_text(self) -> str:
        """The default as --help and docs/reference.md say it; empty when there is none."""
        if self.shown is not None:
            return self.shown
        return "" if self.default in (None, False, (), {}) else str(self.default)


class Sources:
    """Where settings come from: the parsed command line over the environment; an empty variable counts as unset."""

    def __init__(self, args: Any, environ: Mapping[str, str]) -> None:  # args: what argparse parsed
        self.args = args
        self.environ = environ

    def text(self, setting: Setting) -> tuple[Any, str]:
        """The value as given (None when not given) and where: the flag, else the variable."""
        if setting.flag is not None:
            value = getattr(self.args, setting.dest, None)
            if value is not None:
                return value, setting.flag
        return self.environ.get(setting.var) or None, setting.var

    def given(self, setting: Setting) -> bool:
        """Whether the setting was given at all."""
        return self.text(setting)[0] is not None

    def get(self, setting: Setting) -> Any:
        """The setting's value, read as it declares; its default when it was not given."""
        text, where = self.text(setting)
        return setting.default if text is None else setting.read(text, where)

    def require(self, setting: Setting, backend: str) -> Any:
        """The value of a setting the backend cannot do without."""
        if not self.given(setting):
            flag = f" (or give {setting.flag})" if setting.flag else ""
            raise ConfigError(f"{setting.var}: required by the {backend} backend{flag}")
        return self.get(setting)


@record
class Described:
    """A setting as --help and the docs show it: its flag, its variables, its default, who reads it, and its help."""

    setting: Setting  # the first declared, for how its flag takes a value
    variables: tuple[str, ...]
    default: str
    readers: tuple[str, ...]  # backends' names; empty for the run's own settings
    # Each help the setting is declared with, and who reads it so, where backends declare it differently (a range)
    helps: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def meaning(self) -> str:
        """`http, openai: the largest reply read`: who reads it, then what it is, and whether it is a secret."""
        secret = " (a secret: never printed or written)" if self.setting.secret else ""
        if len(self.helps) > 1:
            return "; ".join(f"{', '.join(readers)}: {text}" for text, readers in self.helps) + secret
        readers = f"{', '.join(self.readers)}: " if self.readers else ""
        return f"{readers}{self.setting.help}{secret}"


def described(groups: Mapping[str, Sequence[Setting]]) -> list[Described]:
    """Every setting once, in the order first declared: settings that share a flag as one, the others by their variable.

    groups: the settings of each reader of them, a backend's name, or "" for the run itself.
    """
    settings: dict[str, list[Setting]] = {}
    readers: dict[str, list[str]] = {}
    helps: dict[str, dict[str, list[str]]] = {}
    for who, declared in groups.items():
        for setting in declared:
            key = setting.flag or setting.var
            if setting not in settings.setdefault(key, []):
                settings[key].append(setting)
            if who and who not in readers.setdefault(key, []):
                readers[key].append(who)
                helps.setdefault(key, {}).setdefault(setting.help, []).append(who)
    found = []
    for key, same in settings.items():
        defaults = {setting.default_text for setting in same}
        found.append(
            Described(
                same[0],
                tuple(dict.fromkeys(setting.var for setting in same)),
                defaults.pop() if len(defaults) == 1 else "",
                tuple(readers.get(key, ())),
                tuple((text, tuple(who)) for text, who in helps.get(key, {}).items()),
            )
        )
    return found


def refuse_unknown(environ: Mapping[str, str], declared: Collection[str], placeholders: Collection[str]) -> None:
    """ConfigError naming every EVAL_ variable set that no setting declares and no task-file placeholder names (nor
    is the canonical tasks' CANARY), each with the known name nearest to it."""
    placeholders = {*placeholders, CANARY}
    unknown = sorted(
        name
        for name, value in environ.items()
        if value
        and name.startswith(PREFIX)
        and name not in declared
        and name not in placeholders
        and not name.startswith(TEST_PREFIX)
    )
    if not unknown:
        return
    import difflib  # only a mistake needs it

    # Matched without the prefix they share, which would make every name near every other.
    known = {name[len(PREFIX) :]: name for name in (*declared, *placeholders) if name.startswith(PREFIX)}
    nearest = {
        name: next((known[close] for close in difflib.get_close_matches(name[len(PREFIX) :], known, 1)), None)
        for name in unknown
    }
    if len(unknown) == 1:
        (name,) = unknown
        hint = f"; did you mean {nearest[name]}?" if nearest[name] else ""
        raise ConfigError(f"{name}: not a setting, nor a placeholder in the task file{hint}")
    named = (f"{name} (did you mean {close}?)" if close else name for name, close in nearest.items())
    raise ConfigError(f"{', '.join(named)}: not settings, nor placeholders in the task file")


def add_settings(parser: ArgumentParser, title: str, groups: Mapping[str, Sequence[Setting]]) -> None:
    """A flag for each setting that has one, its help naming who reads it, its variables and its default."""
    group = parser.add_argument_group(title)
    for item in described(groups):
        flag = item.setting.flag
        if flag is None:
            continue
        default = f", default {item.default}" if item.default else ""
        help_text = f"{item.meaning} ({', '.join(item.variables)}{default})"
        if item.setting.switch:
            group.add_argument(flag, action="store_true", default=None, help=help_text)
        else:
            group.add_argument(
                flag, metavar=item.setting.metavar, action="append" if item.setting.many else "store", help=help_text
            )


def environment_only(groups: Mapping[str, Sequence[Setting]]) -> list[str]:
    """A line per setting read from its variable alone, for --help: the secrets, and what a CI system sets."""
    return [f"  {item.variables[0]:<20} {item.meaning}" for item in described(groups) if item.setting.flag is None]


def number(kind: type, low: float, high: float) -> Reader:
    """A reader of a whole number (kind int) or a number (float) from low to high."""
    what = "a whole number" if kind is int else "a number"

    def read(text: str, where: str) -> Any:
        try:
            value = kind(text.strip())
        except ValueError:
            value = None
        if value is None or value != value or not low <= value <= high:
            raise ConfigError(f"{where}: expected {what} from {low} to {high}, got {text!r}")
        return value

    return read


def switch(value: bool | str, where: str) -> bool:
    """On from a flag, or from a variable of 1 or true; off from 0 or false."""
    if value not in (True, "1", "true", "0", "false"):
        raise ConfigError(f"{where}: expected 1 or 0, got {value!r}")
    return value in (True, "1", "true")


def choice(*options: str) -> Reader:
    """A reader of one of a few words."""

    def read(text: str, where: str) -> str:
        if text not in options:
            raise ConfigError(f"{where}: expected {' or '.join(options)}, got {text!r}")
        return text

    return read


def output_path(path: str, where: str) -> str:
    """A file a run writes at its end, checked before it starts: its folder exists and may be written, and the file is
    missing or a regular file that may be written (through a symlink, the file it points to)."""
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise ConfigError(f"{where}: cannot write {path}: no folder {folder}")
    if os.path.isdir(target):
        raise ConfigError(f"{where}: cannot write {path}: it is a folder")
    if os.path.exists(target) and not os.path.isfile(target):
        raise ConfigError(f"{where}: cannot write {path}: not a regular file")
    if not os.access(target if os.path.exists(target) else folder, os.W_OK):
        raise ConfigError(f"{where}: cannot write {path}: permission denied")
    return path
