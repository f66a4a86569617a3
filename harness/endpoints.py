"""Endpoints as settings: URLs and headers read and checked, shown masked, and the secrets they carry."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from harness.records import ConfigError

HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
# Headers the harness owns: the body's framing and type are ours to set.
RESERVED_HEADERS = {"content-length", "content-type", "transfer-encoding"}
# Header and query parameter names whose values are credentials: `Authorization`, `X-Api-Key`, `?code=`, `?sig=`.
SECRET_NAME = re.compile(r"auth|key|token|secret|pass|cookie|session|credential|sig|code", re.IGNORECASE)


def redact_url(url: str) -> str:
    """The URL with any userinfo and query string masked, for printing and results."""
    try:
        parts = urlsplit(url)
    except ValueError:  # `http://[::1`: not a URL, but maybe a secret
        return "(hidden)" if "@" in url or "?" in url else url
    if not parts.netloc:
        return "(hidden)" if "@" in url or "?" in url else url
    host = parts.netloc.rpartition("@")[2]
    userinfo = "***@" if "@" in parts.netloc else ""
    query = "?***" if parts.query else ""
    return f"{parts.scheme}://{userinfo}{host}{parts.path}{query}"


def basic_credentials(username: str, password: str | None) -> str:
    """The value of a Basic Authorization header for URL credentials, as given in the URL (percent-encoded)."""
    credentials = f"{unquote(username)}:{unquote(password or '')}"
    import base64  # only a URL with credentials in it needs it

    return "Basic " + base64.b64encode(credentials.encode()).decode()


def url_secrets(url: str, where: str) -> dict[str, str]:
    """The secrets a URL carries, each with its name: its password, the Basic credentials made of it, credential-like
    query values."""
    parts = urlsplit(url)
    found: dict[str, str] = {}
    if parts.username is not None:
        found[basic_credentials(parts.username, parts.password).removeprefix("Basic ")] = f"the credentials in {where}"
    if parts.password:
        found |= {parts.password: f"the password in {where}", unquote(parts.password): f"the password in {where}"}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if SECRET_NAME.search(name):
            found[value] = f"{name} in {where}"
    return found


def header_secrets(fields: Mapping[str, str], where: str) -> dict[str, str]:
    """The values of credential-like headers (Authorization, X-Api-Key, Cookie...), each with its name."""
    return {value: f"the {name} header of {where}" for name, value in fields.items() if SECRET_NAME.search(name)}


def shown_fields(value: Any) -> Any:
    """A JSON value fit to print and record: the values of credential-like keys (`apiKey`, `token`) masked."""
    if isinstance(value, dict):
        return {key: "***" if SECRET_NAME.search(key) else shown_fields(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shown_fields(item) for item in value]
    return value


def shown_args(argv: Sequence[str]) -> list[str]:
    """Command-line arguments fit to print and record: the value of a credential-like option masked, as
    `--token ***` or `--api-key=***`."""
    shown: list[str] = []
    for arg in argv:
        name, equals, _ = arg.partition("=")
        if arg.startswith("-") and equals and SECRET_NAME.search(name):
            shown.append(f"{name}=***")
        elif (
            not arg.startswith("-")
            and shown
            and shown[-1].startswith("-")
            and "=" not in shown[-1]
            and SECRET_NAME.search(shown[-1])
        ):
            shown.append("***")
        else:
            shown.append(arg)
    return shown


def http_url(url: str, where: str) -> str:
    """An http:// or https:// URL with a host; a message about it never shows its credentials or query."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ConfigError(f"{where}: not a valid URL: {redact_url(url)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: expected an http:// or https:// URL with a host, got {redact_url(url)!r}")
    return url


def header_safe(value: str) -> bool:
    """A header value that cannot break the request: no control characters, encodable as HTTP sends it."""
    return all(char == "\t" or 32 <= ord(char) < 127 or 160 <= ord(char) < 256 for char in value)


def credential(value: str, where: str) -> str:
    """A key or token fit to send in a header."""
    if not header_safe(value):
        raise ConfigError(f"{where}: must be one line of printable Latin-1 text")
    if not value.strip():
        raise ConfigError(f"{where}: only whitespace; leave it unset to send none")
    return value


def header_line(line: str, where: str) -> tuple[str, str]:
    """`Name: value`, as curl takes a header; a message names the header, never its value."""
    name, colon, value = line.partition(":")
    name, value = name.strip(), value.strip()
    if not colon or not HEADER_NAME.match(name):
        raise ConfigError(f"{where}: expected NAME: VALUE, got a line without a valid header name")
    if not value or not header_safe(value):
        raise ConfigError(f"{where}: the value of {name} must be one line of printable Latin-1 text")
    return name, value


def headers(text: str, where: str) -> dict[str, str]:
    """A JSON object of extra headers; header values are secrets, so a message names the header, never a value."""
    try:
        fields = json.loads(text)
    except (ValueError, RecursionError):
        raise ConfigError(f"{where}: expected a JSON object of header names to strings, got invalid JSON") from None
    if not isinstance(fields, dict):
        raise ConfigError(f"{where}: expected a JSON object of header names to strings")
    for name, value in fields.items():
        if not HEADER_NAME.match(name):
            raise ConfigError(f"{where}: {name!r} is not a valid header name")
        if name.lower() in RESERVED_HEADERS:
            raise ConfigError(f"{where}: {name} is set by the harness and cannot be overridden")
        if not isinstance(value, str) or not header_safe(value):
            raise ConfigError(f"{where}: the value of {name} must be one line of printable Latin-1 text")
    return fields
