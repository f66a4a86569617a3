"""The backends' settings: those several share, and each provider's and the command's own, declared here so that a run
knows every backend's flags and variables and imports only the backend it uses (backends/__init__.py). And how the
backends that send a request body read the fields added to it.
"""

from __future__ import annotations

import os
from typing import Any

from harness.endpoints import credential, headers, http_url
from harness.records import ConfigError, record, replace
from harness.settings import Setting, Sources, choice, number, read_json, switch
from harness.text import lone_surrogate

RESERVED_BODY_KEYS = ("prompt", "taskId", "runId", "trialId", "trial", "attempt", "toolServer", "modelProxy")


def request_fields(text: str, where: str) -> dict[str, Any]:
    """A JSON object merged into every request body; it cannot set what the harness sends."""
    try:
        fields = read_json(text, where)
    except ValueError as exc:
        raise ConfigError(f"{where}: expected a JSON object, got invalid JSON ({exc})") from None
    if not isinstance(fields, dict):
        raise ConfigError(f"{where}: expected a JSON object")
    for key in RESERVED_BODY_KEYS:
        if key in fields:
            raise ConfigError(f"{where}: cannot set {key!r}; the harness sends it")
    return fields


TIMEOUT = Setting(
    var="EVAL_TIMEOUT",
    flag="--timeout",
    help="the longest one request may take, all of it, in seconds",
    read=number(float, 0.001, 3600.0),
    default=60.0,
    metavar="SECONDS",
    shown="60",
)
RETRIES = Setting(
    var="EVAL_RETRIES",
    flag="--retries",
    help="retries after the first attempt of a connection error, timeout, 429, 502, 503, 504 (http: of what the agent "
    "may have started on, only with --retry-after-send); a 429 that says how long to wait spends none",
    read=number(int, 0, 10),
    default=2,
    metavar="N",
)
RETRY_AFTER_SEND = Setting(
    var="EVAL_RETRY_AFTER_SEND",
    flag="--retry-after-send",
    help="also retry a request the agent may have started on (a timeout, a reset, 502, 504, a 503 without "
    "Retry-After), as the next attempt of the same trialId",
    read=switch,
    default=False,
    shown="off; 1 is on",
    switch=True,
)
MAX_RESPONSE_BYTES = Setting(
    var="EVAL_MAX_RESPONSE_BYTES",
    flag="--max-response-bytes",
    help="the largest reply read, in bytes",
    read=number(int, 1, 2**40),
    default=10 * 1024 * 1024,
    metavar="N",
)
HEADERS = Setting(
    var="EVAL_AGENT_HEADERS",
    flag=None,
    help="a JSON object of extra request headers",
    read=headers,
    default={},
    secret=True,
)
REQUEST_FIELDS = Setting(
    var="EVAL_AGENT_BODY",
    flag="--agent-body",
    help="a JSON object merged into every request body",
    read=request_fields,
    default={},
    metavar="JSON",
)

# What the provider backends share.
MODEL = Setting(var="EVAL_MODEL", flag="--model", help="the model (required)", metavar="NAME")
MAX_TOKENS = Setting(
    var="EVAL_MAX_TOKENS",
    flag="--max-tokens",
    help="the most tokens a reply may have",
    read=number(int, 1, 1_000_000),
    default=1024,
    metavar="N",
)


def temperature(highest: float) -> Setting:
    """The sampling temperature, sent only when set: reasoning models refuse any."""
    return Setting(
        var="EVAL_TEMPERATURE",
        flag="--temperature",
        help=f"sampling temperature, 0-{highest:g}",
        read=number(float, 0.0, highest),
        metavar="T",
        shown="unset: not sent, as reasoning models refuse it",
    )


TEMPERATURE = temperature(2.0)
REASONING_EFFORT = Setting(
    var="EVAL_REASONING_EFFORT",
    flag="--reasoning-effort",
    help="how hard a reasoning model thinks: none, minimal, low, medium, high or xhigh; sent only when set",
    read=choice("none", "minimal", "low", "medium", "high", "xhigh"),
    metavar="LEVEL",
    shown="unset: not sent",
)
THINKING_BUDGET = Setting(
    var="EVAL_THINKING_BUDGET",
    flag="--thinking-budget",
    help="the tokens a model may think with, at least 1024 and under the max tokens; sent only when set",
    read=number(int, 1024, 1_000_000),
    metavar="N",
    shown="unset: not sent",
)


def base_url(var: str, default: str) -> Setting:
    """A provider's base URL: its own variable, the flag both providers share."""
    return Setting(
        var=var,
        flag="--base-url",
        help="the API's base URL",
        read=http_url,
        default=default,
        metavar="URL",
        shown="the provider's own",
        ambient=True,
    )


def api_key(var: str) -> Setting:
    """A provider's API key, from its own variable only."""
    return Setting(var=var, flag=None, help="the API key", read=credential, secret=True, ambient=True)


# Each provider's own.
OPENAI_BASE_URL = base_url("OPENAI_BASE_URL", "https://api.openai.com/v1")
OPENAI_API_KEY = api_key("OPENAI_API_KEY")
MAX_TOKENS_FIELD = Setting(
    var="EVAL_MAX_TOKENS_FIELD",
    flag="--max-tokens-field",
    help="the name the server knows the token limit by: max_completion_tokens, or max_tokens for older servers",
    read=choice("max_completion_tokens", "max_tokens"),
    default="max_completion_tokens",
    metavar="NAME",
)
ANTHROPIC_BASE_URL = base_url("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
ANTHROPIC_API_KEY = api_key("ANTHROPIC_API_KEY")
ANTHROPIC_TEMPERATURE = temperature(1.0)
GEMINI_BASE_URL = base_url("GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com")
GOOGLE_API_KEY = api_key("GOOGLE_API_KEY")  # the google-genai SDK's order: GOOGLE_API_KEY first, then GEMINI_API_KEY
GEMINI_API_KEY = replace(api_key("GEMINI_API_KEY"), help="the API key, when GOOGLE_API_KEY is not set")
# Gemini's own range: 0 turns thinking off, -1 lets the model choose (Gemini 2.5); which a model takes is its own.
GEMINI_THINKING_BUDGET = replace(
    THINKING_BUDGET,
    help="the tokens a model may think with: 0 for none, -1 for as many as it chooses; sent only when set",
    read=number(int, -1, 1_000_000),
)


def command_line(text: str, where: str) -> tuple[str, ...]:
    """The command split like a shell; its program found on PATH, and paths that exist here made absolute."""
    import shlex
    import shutil

    if lone_surrogate(text) is not None:  # a byte that is not UTF-8, as the environment holds it
        raise ConfigError(f"{where}: not UTF-8 text")  # not shown: it may hold a secret
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        raise ConfigError(f"{where}: cannot split the command: {exc}") from None  # it may hold a secret
    if not argv:
        raise ConfigError(f"{where}: empty command")
    program = shutil.which(argv[0])
    if program is None:
        raise ConfigError(f"{where}: {argv[0]!r} is not an executable file or a command on PATH")
    # The agent runs in a fresh temporary folder: paths given relative to here must still reach their files.
    return (os.path.abspath(program), *(os.path.abspath(arg) if os.path.exists(arg) else arg for arg in argv[1:]))


AGENT_CMD = Setting(
    var="EVAL_AGENT_CMD",
    flag="--agent-cmd",
    help="the agent's command line, split like a shell",
    read=command_line,
    metavar="COMMAND",
)

# Each backend's settings, in the order --help lists them.
TOOL_SERVER = Setting(
    var="EVAL_TOOL_SERVER",
    flag="--tool-server",
    help="on: serve the agent the tools the harness plays for a task (an environment, scripted results) and judge the "
    "calls it answered; off: serve none and judge the calls the agent reports (no state can then be judged)",
    read=choice("on", "off"),
    default="on",
    metavar="MODE",
)
TOOL_NAMES = Setting(
    var="EVAL_TOOL_NAMES",
    flag="--tool-names",
    help="the names the tool server offers the task file's tools by: file (as written) or safe (as every provider "
    "takes them: imageman_asset_get)",
    read=choice("file", "safe"),
    default="file",
    metavar="FORM",
)


def bind_address(text: str, where: str) -> tuple[str, int]:
    """HOST, or HOST:PORT (an IPv6 address in brackets: [::1]:8765); port 0, a free one, when none is given."""
    host, port = text.strip(), "0"
    if host.startswith("["):
        host, _, rest = host[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                raise ConfigError(f"{where}: expected HOST or HOST:PORT, got {text!r}")
            port = rest[1:]
    elif host.count(":") == 1:
        host, port = host.split(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{where}: expected HOST or HOST:PORT (a port from 0 to 65535), got {text!r}")
    return host, int(port)


TOOL_SERVER_HOST = Setting(
    var="EVAL_TOOL_SERVER_HOST",
    flag="--tool-server-host",
    help="the address the tool server binds, HOST or HOST:PORT (a free port when none is given), for a task whose "
    "tools the harness plays",
    read=bind_address,
    default=("127.0.0.1", 0),
    shown="127.0.0.1",
    metavar="HOST",
)


def base_of_paths(url: str, where: str) -> str:
    """An http:// or https:// URL that a trial's path can be added to: one with no query or fragment to land in."""
    url = http_url(url, where)
    if "?" in url or "#" in url:
        raise ConfigError(f"{where}: a base URL the trials' paths are added to has no query or fragment")
    return url


TOOL_SERVER_URL = Setting(
    var="EVAL_TOOL_SERVER_URL",
    flag="--tool-server-url",
    help="the tool server's base URL as the agent reaches it (a tunnel's; no query or fragment), when not the address "
    "it binds",
    read=base_of_paths,
    metavar="URL",
)
SERVING = (TOOL_SERVER, TOOL_NAMES, TOOL_SERVER_HOST, TOOL_SERVER_URL)


def model_upstream(url: str, where: str) -> str:
    """The upstream the model proxy forwards to: a base URL without credentials, which it would not send."""
    url = base_of_paths(url, where)
    if "@" in url.partition("://")[2].partition("/")[0]:
        raise ConfigError(
            f"{where}: the model proxy sends the agent's own key upstream, not a URL's credentials; give the upstream "
            "without user:password@"
        )
    return url


MODEL_PROXY = Setting(
    var="EVAL_MODEL_PROXY",
    flag="--model-proxy",
    help="the upstream model API's base URL (https://api.openai.com/v1): the harness proxies the agent's model calls "
    "to it on 127.0.0.1, records each trial's calls and tokens, and tells the agent the base URL (modelProxy.baseUrl, "
    "EVAL_MODEL_BASE_URL)",
    read=model_upstream,
    metavar="URL",
    shown="unset: no proxy",
)


@record
class Serving:
    """How a run serves the tools it plays to an agent that runs its own: the names offered, where it binds, and the
    base URL the agent is told."""

    safe_names: bool
    address: tuple[str, int]  # the host and port it binds
    advertised: str | None


def serving(sources: Sources) -> Serving | None:
    """The tool server's settings; None when the run serves no tools."""
    if sources.get(TOOL_SERVER) == "off":
        return None
    address, advertised = sources.get(TOOL_SERVER_HOST), sources.get(TOOL_SERVER_URL)
    if advertised is not None and address[1] == 0:  # a tunnel or a proxy is set up to one port, before the run
        raise ConfigError(
            f"{TOOL_SERVER_URL.var}: the server it leads to binds a free port, which nothing can point at; set "
            f"{TOOL_SERVER_HOST.var}=HOST:PORT too"
        )
    return Serving(sources.get(TOOL_NAMES) == "safe", address, advertised)


COMMAND = (AGENT_CMD, REQUEST_FIELDS, TIMEOUT, MAX_RESPONSE_BYTES, *SERVING, MODEL_PROXY)
OPENAI = (
    MODEL,
    OPENAI_BASE_URL,
    OPENAI_API_KEY,
    HEADERS,
    TEMPERATURE,
    REASONING_EFFORT,
    MAX_TOKENS,
    MAX_TOKENS_FIELD,
    TIMEOUT,
    RETRIES,
    MAX_RESPONSE_BYTES,
)
OPENAI_RESPONSES = (
    MODEL,
    OPENAI_BASE_URL,
    OPENAI_API_KEY,
    HEADERS,
    TEMPERATURE,
    REASONING_EFFORT,
    MAX_TOKENS,
    TIMEOUT,
    RETRIES,
    MAX_RESPONSE_BYTES,
)
ANTHROPIC = (
    MODEL,
    ANTHROPIC_BASE_URL,
    ANTHROPIC_API_KEY,
    HEADERS,
    ANTHROPIC_TEMPERATURE,
    THINKING_BUDGET,
    MAX_TOKENS,
    TIMEOUT,
    RETRIES,
    MAX_RESPONSE_BYTES,
)
GEMINI = (
    MODEL,
    GEMINI_BASE_URL,
    GOOGLE_API_KEY,
    GEMINI_API_KEY,
    HEADERS,
    TEMPERATURE,
    MAX_TOKENS,
    REASONING_EFFORT,
    GEMINI_THINKING_BUDGET,
    TIMEOUT,
    RETRIES,
    MAX_RESPONSE_BYTES,
)
