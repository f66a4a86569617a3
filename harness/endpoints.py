"""Endpoints as settings: URLs and headers read and checked, shown masked, and the secrets they carry."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import pairwise
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from harness.records import ConfigError
from harness.settings import Setting

# The patterns below are compiled when first used (re keeps them): a run without headers, query strings or credentials
# set never uses them, and compiling them would take ~0.5 ms of every start.
HEADER_NAME = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z"
# Headers the harness owns: the body's framing and type are ours to set.
RESERVED_HEADERS = {"content-length", "content-type", "transfer-encoding"}
# Header and query parameter names whose values are credentials: `Authorization`, `X-Api-Key`, `?code=`, `?sig=`.
SECRET_NAME = r"(?i)auth|key|token|secret|pass|pwd|cookie|session|credential|sig|code"
# Environment variables whose values are credentials: a word of the name (between underscores) is one, or ends in one
# (`GITHUB_TOKEN`, `DB_PASSWORD`, `APIKEY`, `AUTH_HEADER`), and `KEYWORD` or `CODE` is not. Free-form names need words.
SECRET_VARIABLE = r"(?i)(?:^|_)(?:[A-Z0-9]*(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?)|AUTH[A-Z0-9]*)(?:_|$)"
# Header values that carry a credential after the name of their scheme: `Bearer X`, `Basic X`, `token X`.
SCHEMES = {"bearer", "basic", "token"}
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


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


def is_url(text: str) -> bool:
    """Whether the text is a URL with a host part, as `scheme://host...`."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return bool(parts.scheme and parts.netloc) and text.startswith(f"{parts.scheme}://")


def url_secrets(url: str, where: str) -> dict[str, str]:
    """The secrets a URL carries, each with its name: its password, the Basic credentials made of it, credential-like
    query values."""
    try:
        parts = urlsplit(url)
    except ValueError:  # no URL: the setting that holds it says so when it is read
        return {}
    found: dict[str, str] = {}
    if parts.username is not None:
        found[basic_credentials(parts.username, parts.password).removeprefix("Basic ")] = f"the credentials in {where}"
    if parts.password:
        found |= {parts.password: f"the password in {where}", unquote(parts.password): f"the password in {where}"}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if re.search(SECRET_NAME, name):
            found[value] = f"{name} in {where}"
    return found


def query_values(texts: Iterable[str], where: str) -> dict[str, str]:
    """Every query value of every URL among the texts (URLs, arguments), each with its name: never written, though
    not each a credential."""
    return {
        value: f"{name} in {where}"
        for url in urls(texts)
        for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True)
    }


def keyed_query(url: str) -> dict[str, str]:
    """What of the URL's query tells one endpoint from another, as a cassette's key and a run's fingerprint take it:
    each parameter by name (`?model=`, `?api-version=`) with a digest of its values, which are never written; a
    credential-like one (`?key=`, `?code=`) left out, so that a rotated key changes neither."""
    from harness.text import sha256_hex  # made once per run, for the backend's URL

    values: dict[str, list[str]] = {}
    for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if not re.search(SECRET_NAME, name):
            values.setdefault(name, []).append(value)
    return {name: "sha256:" + sha256_hex(json.dumps(found).encode())[:16] for name, found in values.items()}


def credential_secrets(value: str, name: str) -> dict[str, str]:
    """A credential and what it holds: the value, the bare credential after `Bearer`, `Basic` or `token`, and for
    Basic the user:password it encodes and the password."""
    found = {value: name}
    scheme, _, rest = value.strip().partition(" ")
    rest = rest.strip()
    if scheme.lower() not in SCHEMES or not rest:
        return found
    found[rest] = name
    if scheme.lower() == "basic":
        import base64  # only Basic credentials need it
        import binascii

        try:
            decoded = base64.b64decode(rest, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return found
        found[decoded] = name
        if ":" in decoded:
            found[decoded.partition(":")[2]] = name
    return found


def header_secrets(fields: Mapping[str, str], where: str) -> dict[str, str]:
    """The values of credential-like headers (Authorization, X-Api-Key, Cookie...) and what they hold, each with its
    name."""
    found: dict[str, str] = {}
    for name, value in fields.items():
        if re.search(SECRET_NAME, name):
            found |= credential_secrets(value, f"the {name} header of {where}")
    return found


def field_secrets(value: Any, where: str, under: str | None = None) -> dict[str, str]:
    """The secrets in request body fields: every string under a credential-like key, the credentials in URLs.

    under: the credential-like key the value is under, if any.
    """
    found: dict[str, str] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            found |= field_secrets(item, where, key if re.search(SECRET_NAME, key) else under)
    elif isinstance(value, list):
        for item in value:
            found |= field_secrets(item, where, under)
    elif isinstance(value, str) and under is not None:
        found[value] = f"{under} in {where}"
    elif isinstance(value, str) and is_url(value):
        found |= url_secrets(value, where)
    return found


def command_secrets(argv: Sequence[str], where: str) -> dict[str, str]:
    """The secrets in command-line arguments: the value of a credential-like option (`--token X`, `--api-key=X`),
    the credentials in URLs."""
    found: dict[str, str] = {}
    for before, arg in pairwise(("", *argv)):
        name, equals, value = arg.partition("=")
        if arg.startswith("-") and equals and re.search(SECRET_NAME, name):
            found[value] = f"{name} in {where}"
        elif not arg.startswith("-") and _takes_secret(before):
            found[arg] = f"{before} in {where}"
    for url in urls(argv):
        found |= url_secrets(url, where)
    return found


def urls(argv: Iterable[str]) -> Iterator[str]:
    """The URLs among arguments or strings, alone or as an option's value (`--url=URL`)."""
    for arg in argv:
        _, equals, value = arg.partition("=")
        if is_url(arg):
            yield arg
        elif arg.startswith("-") and equals and is_url(value):
            yield value


def environment_secrets(settings: Iterable[Setting], environ: Mapping[str, str]) -> dict[str, str]:
    """Every secret the environment holds, whichever backend runs: the value of every setting declared secret and
    what it holds (each header's credential, for a JSON object of headers), and the credentials in every URL a
    setting or a proxy variable holds."""
    found: dict[str, str] = {}
    for setting in settings:
        text = environ.get(setting.var)
        if not text:
            continue
        if setting.secret:
            found |= credential_secrets(text, setting.var)
            try:
                value = setting.read(text, setting.var)
            except (ConfigError, ValueError):
                value = None  # unread: the backend that reads it says why, if it runs
            if isinstance(value, Mapping):
                found |= header_secrets(value, setting.var)
        if is_url(text):
            found |= url_secrets(text, setting.var)
    for name in PROXY_VARIABLES:
        proxy = environ.get(name)
        if proxy:
            found |= url_secrets(proxy if "://" in proxy else f"http://{proxy}", name)
    return found


def variable_secrets(names: Iterable[str], declared: Iterable[Setting], environ: Mapping[str, str]) -> dict[str, str]:
    """The values of the variables named whose values are secrets: declared secret, or named like a credential."""
    secret = {setting.var for setting in declared if setting.secret}
    return {
        environ[name]: name
        for name in names
        if environ.get(name) and (name in secret or re.search(SECRET_VARIABLE, name))
    }


def shown_fields(value: Any) -> Any:
    """A JSON value fit to print and record: the values of credential-like keys (`apiKey`, `token`) masked, URLs
    shown as redact_url shows them."""
    if isinstance(value, dict):
        return {key: "***" if re.search(SECRET_NAME, key) else shown_fields(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shown_fields(item) for item in value]
    return redact_url(value) if isinstance(value, str) and is_url(value) else value


def shown_args(argv: Sequence[str]) -> list[str]:
    """Command-line arguments fit to print and record: the value of a credential-like option masked, as
    `--token ***` or `--api-key=***`, URLs shown as redact_url shows them."""
    shown: list[str] = []
    for before, arg in pairwise(("", *argv)):
        name, equals, value = arg.partition("=")
        if arg.startswith("-") and equals and re.search(SECRET_NAME, name):
            shown.append(f"{name}=***")
        elif not arg.startswith("-") and _takes_secret(before):
            shown.append("***")
        elif arg.startswith("-") and equals and is_url(value):
            shown.append(f"{name}={redact_url(value)}")
        else:
            shown.append(redact_url(arg) if is_url(arg) else arg)
    return shown


def _takes_secret(option: str) -> bool:
    """Whether the argument after this one is a credential: it is an option named like one, without `=`."""
    return option.startswith("-") and "=" not in option and bool(re.search(SECRET_NAME, option))


def http_url(url: str, where: str) -> str:
    """An http:// or https:// URL with a host; a message about it never shows its credentials or query."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ConfigError(f"{where}: not a valid URL: {redact_url(url)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: expected an http:// or https:// URL with a host, got {redact_url(url)!r}")
    if not parts.hostname.isascii():  # what goes out in the Host header and to DNS
        raise ConfigError(
            f"{where}: the host must be ASCII (an internationalized name in its xn-- form), got {parts.hostname!r}"
        )
    if not all("!" <= char <= "~" for char in parts.path + parts.query):  # the request line sends them as they are
        raise ConfigError(
            f"{where}: the path and query must be printable ASCII, without spaces (percent-encode the rest: %20, "
            f"%C3%A9), got {redact_url(url)!r}"
        )
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
    if not colon or not re.match(HEADER_NAME, name):
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
        if not re.match(HEADER_NAME, name):
            raise ConfigError(f"{where}: {name!r} is not a valid header name")
        if name.lower() in RESERVED_HEADERS:
            raise ConfigError(f"{where}: {name} is set by the harness and cannot be overridden")
        if not isinstance(value, str) or not header_safe(value):
            raise ConfigError(f"{where}: the value of {name} must be one line of printable Latin-1 text")
    return fields
