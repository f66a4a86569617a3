"""The settings of a run: flags over EVAL_* environment variables over defaults."""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

from backends import BACKENDS
from harness.records import ConfigError

HARNESS_VERSION = "0.2.0"
DEFAULT_TASKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "eval-tasks.json")
DEFAULT_RESULTS = "eval-results.json"
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
# Headers the harness owns: the body's framing and type are ours to set.
RESERVED_HEADERS = {"content-length", "content-type", "transfer-encoding"}
RESERVED_BODY_KEYS = ("prompt", "taskId", "runId")
# Provider backends: the variable of their base URL, of their API key, and the default base URL.
PROVIDERS = {
    "openai": ("OPENAI_BASE_URL", "OPENAI_API_KEY", "https://api.openai.com/v1"),
    "anthropic": ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "https://api.anthropic.com"),
}
EXIT_CODES = "0 gate met, 1 gate not met, 2 usage or configuration error, 3 agent unreachable, 130 interrupted"


@dataclass(frozen=True)
class Config:
    """Everything one run needs to know; secrets stay out of its repr."""

    backend: str
    gate: Decimal
    tasks_path: str
    results_path: str
    run_id: str
    agent_url: str | None = None
    agent_token: str | None = field(default=None, repr=False)
    agent_headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    agent_body: Mapping[str, Any] = field(default_factory=dict, repr=False)
    timeout: float = 60.0
    retries: int = 2
    concurrency: int = 4
    max_response_bytes: int = 10 * 1024 * 1024
    runs: int = 1
    gate_on: str = "trials"
    task_globs: tuple[str, ...] = ()
    category_globs: tuple[str, ...] = ()
    shard: tuple[int, int] | None = None
    dry_run: bool = False
    junit_path: str | None = None
    summary_md_paths: tuple[str, ...] = ()
    baseline_path: str | None = None
    system_prompt: str | None = field(default=None, repr=False)
    model: str | None = None
    key_variable: str = "EVAL_AGENT_TOKEN"  # where the credential came from, for messages that name it
    temperature: float | None = None
    max_tokens: int = 1024
    agent_cmd: tuple[str, ...] = ()


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as a ConfigError: one line, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    """The command line; every flag has an environment variable, and the flag wins."""
    parser = Parser(
        prog="eval_agent.py",
        description="Evaluate a tool-using agent against canonical tasks and gate the release on its pass-rate.",
        epilog=f"Exit codes: {EXIT_CODES}. The agent's token (EVAL_AGENT_TOKEN) and extra headers "
        "(EVAL_AGENT_HEADERS, a JSON object) are read from the environment only, never from flags.",
    )
    add = parser.add_argument
    add("--backend", help="where prompts go: stub, http, openai, anthropic or command (EVAL_BACKEND; default http when an agent URL is set, else stub)")
    add("--gate", metavar="PERCENT", help="minimum pass-rate in percent, 0-100 (EVAL_GATE, default 80)")
    add("--tasks", metavar="FILE", help="task file (EVAL_TASKS, default eval-tasks.json beside this script)")
    add("--out", metavar="FILE", help=f"results file (EVAL_RESULTS, default {DEFAULT_RESULTS})")
    add("--agent-url", metavar="URL", help="http backend: the agent's full endpoint, POSTed to as given (EVAL_AGENT_URL)")
    add("--agent-body", metavar="JSON", help="http backend: a JSON object merged into every request body (EVAL_AGENT_BODY)")
    add("--agent-cmd", metavar="COMMAND", help="command backend: the agent's command line, split like a shell (EVAL_AGENT_CMD)")
    add("--model", metavar="NAME", help="openai, anthropic: the model (EVAL_MODEL)")
    add("--base-url", metavar="URL", help="openai, anthropic: the API's base URL (OPENAI_BASE_URL, ANTHROPIC_BASE_URL)")
    add("--temperature", metavar="T", help="openai, anthropic: sampling temperature, 0-2 (EVAL_TEMPERATURE; openai default 0)")
    add("--max-tokens", metavar="N", help="openai, anthropic: the most tokens a reply may have (EVAL_MAX_TOKENS, default 1024)")
    add("--system-prompt-file", metavar="FILE", help="the agent's system prompt, instead of the task file's (EVAL_SYSTEM_PROMPT_FILE)")
    add("--timeout", metavar="SECONDS", help="seconds per request, all of it (EVAL_TIMEOUT, default 60)")
    add("--retries", metavar="N", help="retries of a connection error, timeout, 429, 502, 503, 504 (EVAL_RETRIES, default 2)")
    add("--concurrency", metavar="N", help="tasks in flight at once (EVAL_CONCURRENCY, default 4)")
    add("--max-response-bytes", metavar="N", help="largest reply body read (EVAL_MAX_RESPONSE_BYTES, default 10 MiB)")
    add("--runs", metavar="N", help="trials of every task, for pass^k and flakiness (EVAL_RUNS, default 1)")
    add("--gate-on", metavar="WHAT", help="what the gate applies to: trials (the trial pass-rate) or pass-all (pass^N) (EVAL_GATE_ON, default trials)")
    add("--task", metavar="GLOB", action="append", help="run only tasks whose id matches; repeatable (EVAL_TASK_GLOB, comma-separated)")
    add("--category", metavar="GLOB", action="append", help="run only tasks whose category matches; repeatable (EVAL_CATEGORY_GLOB, comma-separated)")
    add("--shard", metavar="K/N", help="run the K-th of N deterministic slices of the selected tasks (EVAL_SHARD)")
    add("--dry-run", action="store_true", default=None, help="check the task file and settings, list what would run, send nothing (EVAL_DRY_RUN=1)")
    add("--junit", metavar="FILE", help="also write JUnit XML (EVAL_JUNIT)")
    add("--baseline", metavar="FILE", help="compare with this results file and fail on any regression (EVAL_BASELINE)")
    add("--summary-md", metavar="FILE", help="also append a Markdown summary (EVAL_SUMMARY_MD; GITHUB_STEP_SUMMARY is used when set)")
    add("--version", action="version", version=f"%(prog)s {HARNESS_VERSION}")
    return parser


def parse_config(argv: Sequence[str] | None, environ: Mapping[str, str]) -> Config:
    """Resolve every setting; ConfigError names the flag or variable that is wrong."""
    args = build_parser().parse_args(argv)

    def setting(flag: str, var: str) -> tuple[str | None, str]:
        """The raw value and where it came from; an empty variable counts as unset."""
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            return value, flag
        return environ.get(var) or None, var

    def globs(flag: str, var: str) -> tuple[str, ...]:
        """A repeatable flag, or its variable split at commas."""
        value, _ = setting(flag, var)
        patterns = value if isinstance(value, list) else (value or "").split(",")
        return tuple(pattern.strip() for pattern in patterns if pattern.strip())

    agent_url, url_where = setting("--agent-url", "EVAL_AGENT_URL")
    backend, where = setting("--backend", "EVAL_BACKEND")
    backend = backend or ("http" if agent_url else "stub")
    if backend not in BACKENDS:
        raise ConfigError(f"{where}: unknown backend {backend!r} (choose from: {', '.join(BACKENDS)})")

    gate_text, where = setting("--gate", "EVAL_GATE")
    tasks_path, _ = setting("--tasks", "EVAL_TASKS")
    results_path, results_where = setting("--out", "EVAL_RESULTS")
    results_path = writable_path(results_path or DEFAULT_RESULTS, results_where)
    junit_path, junit_where = setting("--junit", "EVAL_JUNIT")
    summary_md, summary_where = setting("--summary-md", "EVAL_SUMMARY_MD")
    summary_md_paths = [writable_path(summary_md, summary_where)] if summary_md else []
    if environ.get("GITHUB_STEP_SUMMARY"):
        summary_md_paths.append(writable_path(environ["GITHUB_STEP_SUMMARY"], "GITHUB_STEP_SUMMARY"))
    gate_on, gate_on_where = setting("--gate-on", "EVAL_GATE_ON")
    if gate_on not in (None, "trials", "pass-all"):
        raise ConfigError(f"{gate_on_where}: expected trials or pass-all, got {gate_on!r}")
    shard, shard_where = setting("--shard", "EVAL_SHARD")
    dry_run, dry_run_where = setting("--dry-run", "EVAL_DRY_RUN")
    if dry_run not in (None, True, "1", "true", "0", "false"):
        raise ConfigError(f"{dry_run_where}: expected 1 or 0, got {dry_run!r}")

    config = Config(
        backend=backend,
        gate=parse_gate(gate_text or "80", where),
        tasks_path=tasks_path or DEFAULT_TASKS,
        results_path=results_path,
        run_id=os.urandom(16).hex(),
        timeout=_number(*setting("--timeout", "EVAL_TIMEOUT"), float, 60.0, 0.001, 3600.0),
        retries=_number(*setting("--retries", "EVAL_RETRIES"), int, 2, 0, 10),
        concurrency=_number(*setting("--concurrency", "EVAL_CONCURRENCY"), int, 4, 1, 256),
        max_response_bytes=_number(*setting("--max-response-bytes", "EVAL_MAX_RESPONSE_BYTES"), int, 10 * 1024 * 1024, 1, 2**40),
        runs=_number(*setting("--runs", "EVAL_RUNS"), int, 1, 1, 100),
        gate_on=gate_on or "trials",
        task_globs=globs("--task", "EVAL_TASK_GLOB"),
        category_globs=globs("--category", "EVAL_CATEGORY_GLOB"),
        shard=_shard(shard, shard_where) if shard else None,
        dry_run=dry_run in (True, "1", "true"),
        junit_path=writable_path(junit_path, junit_where) if junit_path else None,
        summary_md_paths=tuple(summary_md_paths),
        baseline_path=setting("--baseline", "EVAL_BASELINE")[0],
    )
    system_file, system_where = setting("--system-prompt-file", "EVAL_SYSTEM_PROMPT_FILE")
    if system_file:
        config = replace(config, system_prompt=_system_prompt(system_file, system_where))
    body_text, body_where = setting("--agent-body", "EVAL_AGENT_BODY")
    if backend in PROVIDERS:
        base_var, key_var, default_base = PROVIDERS[backend]
        model, _ = setting("--model", "EVAL_MODEL")
        if not model:
            raise ConfigError(f"EVAL_MODEL: required by the {backend} backend (or give --model)")
        base_url, base_where = setting("--base-url", base_var)
        key = _credential(environ, key_var)
        temperature = setting("--temperature", "EVAL_TEMPERATURE")
        return replace(
            config,
            model=model,
            agent_url=_agent_url(base_url or default_base, base_where),
            agent_token=key,
            key_variable=key_var,
            agent_headers=_headers(environ.get("EVAL_AGENT_HEADERS") or "{}"),
            temperature=_number(*temperature, float, 0.0, 0.0, 2.0) if temperature[0] is not None else None,
            max_tokens=_number(*setting("--max-tokens", "EVAL_MAX_TOKENS"), int, 1024, 1, 1_000_000),
        )
    if backend == "command":
        command, command_where = setting("--agent-cmd", "EVAL_AGENT_CMD")
        if not command:
            raise ConfigError("EVAL_AGENT_CMD: required by the command backend (or give --agent-cmd)")
        return replace(config, agent_cmd=_command(command, command_where), agent_body=_body(body_text or "{}", body_where))
    if backend != "http":
        return config
    if agent_url is None:
        raise ConfigError("EVAL_AGENT_URL: required by the http backend (or give --agent-url)")
    agent_url = _agent_url(agent_url, url_where)
    token = _credential(environ, "EVAL_AGENT_TOKEN")
    headers = _headers(environ.get("EVAL_AGENT_HEADERS") or "{}")
    if token and ("@" in urlsplit(agent_url).netloc or any(name.lower() == "authorization" for name in headers)):
        raise ConfigError(f"EVAL_AGENT_TOKEN: set, and {url_where} or EVAL_AGENT_HEADERS carries credentials too; give one")
    return replace(
        config,
        agent_url=agent_url,
        agent_token=token,
        agent_headers=headers,
        agent_body=_body(body_text or "{}", body_where),
    )


def redact_url(url: str) -> str:
    """The URL with any userinfo and query string masked, for printing and results."""
    parts = urlsplit(url)
    if not parts.netloc:
        return "(hidden)" if "@" in url or "?" in url else url
    host = parts.netloc.rpartition("@")[2]
    userinfo = "***@" if "@" in parts.netloc else ""
    query = "?***" if parts.query else ""
    return f"{parts.scheme}://{userinfo}{host}{parts.path}{query}"


def writable_path(path: str, where: str) -> str:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ConfigError(f"{where}: cannot write {path}: no folder {folder}")
    return path


def _shard(text: str, where: str) -> tuple[int, int]:
    index, slash, count = text.partition("/")
    if slash and index.strip().isdigit() and count.strip().isdigit() and 1 <= int(index) <= int(count):
        return int(index), int(count)
    raise ConfigError(f"{where}: expected K/N with 1 <= K <= N, e.g. 2/4, got {text!r}")


def parse_gate(text: str, where: str) -> Decimal:
    try:
        gate = Decimal(text.strip())
    except InvalidOperation:
        gate = Decimal("NaN")
    if not gate.is_finite() or not 0 <= gate <= 100:
        raise ConfigError(f"{where}: expected a percentage from 0 to 100, got {text!r}")
    return gate


def _number(text: str | None, where: str, kind: type, default: Any, low: Any, high: Any) -> Any:
    if text is None:
        return default
    what = "a whole number" if kind is int else "a number"
    try:
        value = kind(text.strip())
    except ValueError:
        value = None
    if value is None or value != value or not low <= value <= high:
        raise ConfigError(f"{where}: expected {what} from {low} to {high}, got {text!r}")
    return value


def _agent_url(url: str, where: str) -> str:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ConfigError(f"{where}: not a valid URL: {redact_url(url)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: expected an http:// or https:// URL with a host, got {redact_url(url)!r}")
    return url


def _headers(text: str) -> dict[str, str]:
    # Header values are secrets: messages name the variable and the header, never a value.
    try:
        headers = json.loads(text)
    except ValueError:
        raise ConfigError("EVAL_AGENT_HEADERS: expected a JSON object of header names to strings, got invalid JSON") from None
    if not isinstance(headers, dict):
        raise ConfigError("EVAL_AGENT_HEADERS: expected a JSON object of header names to strings")
    for name, value in headers.items():
        if not HEADER_NAME.match(name):
            raise ConfigError(f"EVAL_AGENT_HEADERS: {name!r} is not a valid header name")
        if name.lower() in RESERVED_HEADERS:
            raise ConfigError(f"EVAL_AGENT_HEADERS: {name} is set by the harness and cannot be overridden")
        if not isinstance(value, str) or not _header_safe(value):
            raise ConfigError(f"EVAL_AGENT_HEADERS: the value of {name} must be one line of printable Latin-1 text")
    return headers


def _system_prompt(path: str, where: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not text.strip():
        raise ConfigError(f"{where}: {path} is empty")
    return text


def _command(text: str, where: str) -> tuple[str, ...]:
    import shlex
    import shutil

    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        raise ConfigError(f"{where}: cannot split {text!r}: {exc}") from None
    if not argv:
        raise ConfigError(f"{where}: empty command")
    program = shutil.which(argv[0])
    if program is None:
        raise ConfigError(f"{where}: {argv[0]!r} is not an executable file or a command on PATH")
    # The agent runs in a fresh temporary folder: paths given relative to here must still reach their files.
    return (os.path.abspath(program), *(os.path.abspath(arg) if os.path.exists(arg) else arg for arg in argv[1:]))


def _credential(environ: Mapping[str, str], var: str) -> str | None:
    """A key or token from its variable (never from a flag), fit to send in a header; None when unset or empty."""
    value = environ.get(var) or None
    if value is not None and not _header_safe(value):
        raise ConfigError(f"{var}: must be one line of printable Latin-1 text")
    return value


def _header_safe(value: str) -> bool:
    """A header value that cannot break the request: no control characters, encodable as HTTP sends it."""
    return all(char == "\t" or 32 <= ord(char) < 127 or 160 <= ord(char) < 256 for char in value)


def _body(text: str, where: str) -> dict[str, Any]:
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{where}: expected a JSON object, got invalid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise ConfigError(f"{where}: expected a JSON object")
    for key in RESERVED_BODY_KEYS:
        if key in body:
            raise ConfigError(f"{where}: cannot set {key!r}; the harness sends it")
    return body
