"""A tool's inputSchema as a check of a call's arguments: the JSON Schema keywords tool schemas use, nothing assumed."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sized
from fractions import Fraction
from typing import Any
from urllib.parse import unquote

from harness.records import InputSchema
from harness.text import canonical_json, clip, count, kind

TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
# What the checker checks. Every other keyword, but for the annotations below, is a problem at load time: a schema
# keyword skipped in silence would pass calls the tool rejects.
KEYWORDS = (
    "$ref", "$defs", "definitions", "type", "enum", "const",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern",
    "items", "prefixItems", "minItems", "maxItems", "uniqueItems",
    "properties", "patternProperties", "additionalProperties", "propertyNames", "required",
    "allOf", "anyOf", "oneOf",
)  # fmt: skip
# Keywords that describe and never constrain (`format` is an annotation in JSON Schema 2020-12; `discriminator` is
# OpenAPI's, which Pydantic writes beside a oneOf that already decides).
ANNOTATIONS = frozenset(
    ("title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
     "writeOnly", "format", "discriminator", "contentMediaType", "contentEncoding")
)  # fmt: skip
HINTS = {
    "nullable": ' (OpenAPI\'s; write "type": [..., "null"])',
}
MAX_DEPTH = 100  # schema levels at load, argument levels (and $ref hops) in a check: far past any real tool call
IGNORED_SYMBOLS = frozenset("^`|~")  # ASCII symbols (not category P) that loose matching drops too
Problem = tuple[str, str]  # (JSON path, what is wrong there)


def json_equal(a: Any, b: Any, fold: Callable[[str], str] | None = None) -> bool:
    """JSON equality: 1 equals 1.0 but never true; strings compared through `fold` (case, punctuation) when given."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return fold(a) == fold(b) if fold else a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y, fold) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k], fold) for k in a)
    return a is None and b is None


def loose(text: str) -> str:
    """The text case-folded, without spaces, punctuation (P), separators (Z), ^ ` | ~: "New York, NY" is newyorkny."""
    import unicodedata  # here: only a task with ignorePunctuation needs it, and a run starts without it

    return "".join(
        char
        for char in unicodedata.normalize("NFC", text.casefold())  # é is é however it was composed
        if not char.isspace() and unicodedata.category(char)[0] not in "PZ" and char not in IGNORED_SYMBOLS
    )


def compile_schema(tool: str, root: Mapping[str, Any]) -> tuple[InputSchema | None, list[Problem]]:
    """The schema ready to check calls, or every keyword it cannot check and every $ref it cannot follow."""
    walk = _Walk()
    walk.schema(root, (), 0)
    refs: dict[str, Any] = {}
    for ref, path in walk.refs:
        target = _resolve(ref, walk.locations)
        if isinstance(target, str):
            walk.problems.append((_dotted(path), target))
        else:
            refs[ref] = target
    if not walk.problems:
        loop = _ref_loop(walk.locations, refs)
        if loop is not None:
            walk.problems.append(loop)
    return (None if walk.problems else InputSchema(tool, root, refs, walk.patterns)), walk.problems


class _Walk:
    """Every subschema by its place, every $ref and where it stands, every problem: one pass over a schema."""

    def __init__(self) -> None:
        self.locations: dict[tuple[str, ...], Any] = {}
        self.refs: list[tuple[str, tuple[str, ...]]] = []
        self.problems: list[Problem] = []
        self.patterns: dict[str, Callable[[str], bool]] = {}

    def problem(self, path: tuple[str, ...], message: str) -> None:
        self.problems.append((_dotted(path), message))

    def schema(self, node: Any, path: tuple[str, ...], depth: int) -> None:
        if isinstance(node, bool):
            self.locations[path] = node
            return
        if not isinstance(node, dict):
            self.problem(path, f"expected a schema (an object, true or false), got {kind(node)}")
            return
        if depth > MAX_DEPTH:
            self.problem(path, f"nested more than {MAX_DEPTH} levels deep")
            return
        self.locations[path] = node
        for keyword, value in node.items():
            where = (*path, keyword)
            if keyword in ANNOTATIONS:
                continue
            if keyword not in KEYWORDS:
                hint = HINTS.get(keyword, "")
                self.problem(
                    where, f'unsupported keyword {json.dumps(keyword)}: checkArgs "schema" cannot check it{hint}'
                )
                continue
            self.keyword(keyword, value, where, depth)

    def keyword(self, keyword: str, value: Any, where: tuple[str, ...], depth: int) -> None:
        if keyword in ("properties", "patternProperties", "$defs", "definitions"):
            if not isinstance(value, dict):
                self.problem(where, f"expected an object of schemas, got {kind(value)}")
                return
            for name, subschema in value.items():
                if keyword == "patternProperties":
                    self.pattern(name, (*where, name))
                self.schema(subschema, (*where, name), depth + 1)
        elif keyword in ("items", "additionalProperties", "propertyNames"):
            if isinstance(value, list):
                self.problem(where, "a list of schemas (draft-07's tuple form) is read as prefixItems: write that")
            else:
                self.schema(value, where, depth + 1)
        elif keyword in ("allOf", "anyOf", "oneOf", "prefixItems"):
            if not isinstance(value, list) or not value:
                self.problem(where, f"expected a non-empty list of schemas, got {kind(value)}")
                return
            for i, subschema in enumerate(value):
                self.schema(subschema, (*where, str(i)), depth + 1)
        elif keyword == "$ref":
            if isinstance(value, str):
                self.refs.append((value, where))
            else:
                self.problem(where, f"expected a reference such as #/$defs/NAME, got {kind(value)}")
        elif keyword == "type":
            names = value if isinstance(value, list) else [value]
            if not names or any(name not in TYPES for name in names) or len(set(names)) != len(names):
                self.problem(where, f"expected one of {', '.join(TYPES)}, or a list of them, got {_shown(value)}")
        elif keyword == "enum":
            if not isinstance(value, list):
                self.problem(where, f"expected a list of values, got {kind(value)}")
        elif keyword == "required":
            if not isinstance(value, list) or not all(isinstance(key, str) for key in value):
                self.problem(where, f"expected a list of property names, got {kind(value)}")
        elif keyword == "pattern":
            self.pattern(value, where)
        elif keyword == "uniqueItems":
            if not isinstance(value, bool):
                self.problem(where, f"expected true or false, got {kind(value)}")
        elif keyword in ("minLength", "maxLength", "minItems", "maxItems"):
            if not _non_negative_whole(value):
                self.problem(where, f"expected a whole number, 0 or more, got {_shown(value)}")
        elif keyword != "const":  # a bound: minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf
            if isinstance(value, bool) and keyword.startswith("exclusive"):
                self.problem(where, f"the draft-04 form (true or false) is not supported; write {keyword}: NUMBER")
            elif not _number(value) or not _finite(value) or (keyword == "multipleOf" and value <= 0):
                wanted = "a number above 0" if keyword == "multipleOf" else "a finite number"
                self.problem(where, f"expected {wanted}, got {_shown(value)}")

    def pattern(self, value: Any, where: tuple[str, ...]) -> None:
        if not isinstance(value, str):
            self.problem(where, f"expected a regular expression, got {kind(value)}")
            return
        try:
            re.compile(value)
        except (re.error, RecursionError, OverflowError) as error:
            self.problem(where, f"not a regular expression this checker can read: {error}")
            return
        from harness import patterns  # only a schema with a pattern needs it

        try:
            self.patterns[value] = patterns.compile_pattern(value).search
        except patterns.Unsupported as error:
            self.problem(where, f"a pattern this checker will not run: {error}")


def _resolve(ref: str, locations: Mapping[tuple[str, ...], Any]) -> Any:
    """The subschema a local $ref points to, or why it cannot be followed (a str)."""
    if not ref.startswith("#"):
        return "a remote $ref cannot be followed: only local ones (#/$defs/NAME, #/definitions/NAME) can"
    pointer = unquote(ref[1:])
    if pointer and not pointer.startswith("/"):
        return "an anchor $ref cannot be followed: write a JSON pointer (#/$defs/NAME)"
    path = tuple(part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:])
    if path not in locations:
        return f"{json.dumps(ref)} points to no schema in this inputSchema"
    return locations[path]


def _ref_loop(locations: Mapping[tuple[str, ...], Any], refs: Mapping[str, Any]) -> Problem | None:
    """$refs and allOf/anyOf/oneOf that come back where they started without reading into the arguments (a check
    would never end), or that lead further than a check follows."""
    place = {id(node): path for path, node in locations.items() if isinstance(node, dict)}
    state: dict[int, str] = {}

    def visit(node: dict[str, Any], depth: int, start: str) -> Problem | None:
        where = _dotted((*place[id(node)], "$ref") if "$ref" in node else place[id(node)])
        if depth > MAX_DEPTH:
            return start, f"$ref, allOf, anyOf and oneOf lead more than {MAX_DEPTH} schemas deep from here"
        state[id(node)] = "open"
        nexts = [refs[node["$ref"]]] if isinstance(node.get("$ref"), str) else []
        nexts += [sub for key in ("allOf", "anyOf", "oneOf") for sub in node.get(key, ())]
        for sub in nexts:
            if not isinstance(sub, dict):
                continue
            if state.get(id(sub)) == "open":
                return where, "this $ref leads back to itself without reading into the arguments"
            if id(sub) not in state:
                found = visit(sub, depth + 1, start)
                if found is not None:
                    return found
        state[id(node)] = "done"
        return None

    for path, node in list(locations.items()):
        if isinstance(node, dict) and id(node) not in state:
            found = visit(node, 0, _dotted((*path, "$ref") if "$ref" in node else path))
            if found is not None:
                return found
    return None


def check(schema: InputSchema, args: Mapping[str, Any]) -> str | None:
    """Why these arguments do not validate against the tool's schema (`width: expected integer, got "800"`), or None."""
    problem = _check(schema.root, args, "", schema, 0)
    if problem is None:
        return None
    path, message = problem
    return f"{schema.tool} {path}: {message}" if path else f"{schema.tool}: {message}"


def check_value(schema: InputSchema, key: str, value: Any) -> str | None:
    """Why this value of a top-level argument could never validate (`width: expected integer, got 8.5`), or None."""
    properties = schema.root.get("properties", {})
    problem = _check(properties.get(key, True), value, _child("", key), schema, 0)
    return None if problem is None else f"{problem[0]}: {problem[1]}"


def _check(node: Any, value: Any, path: str, compiled: InputSchema, depth: int) -> Problem | None:
    """The first way the value breaks the schema, or None: keywords in a fixed order, so one call gives one reason."""
    if node is True:
        return None
    if node is False:
        return path, "not allowed here (its schema is false)"
    if depth > MAX_DEPTH:
        return path, f"nested more than {MAX_DEPTH} levels deep, past what this checker follows"
    return _first(
        checker(node[keyword], value, path, node, compiled, depth) for keyword, checker in _CHECKERS if keyword in node
    )


def _ref(ref: str, value: Any, path: str, node: Any, compiled: InputSchema, depth: int) -> Problem | None:
    return _check(compiled.refs[ref], value, path, compiled, depth + 1)


def _type(wanted: Any, value: Any, path: str, *_: Any) -> Problem | None:
    names = wanted if isinstance(wanted, list) else [wanted]
    if any(_is(name, value) for name in names):
        return None
    return path, f"expected {' or '.join(names)}, got {_shown(value)}"


def _is(name: str, value: Any) -> bool:
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if name == "number":
        return _number(value)
    return isinstance(value, PYTHON_TYPES[name])


PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def _enum(accepted: list[Any], value: Any, path: str, *_: Any) -> Problem | None:
    if any(json_equal(value, item) for item in accepted):
        return None
    shown = ", ".join(_shown(item) for item in accepted[:10]) + (", ..." if len(accepted) > 10 else "")
    return path, f"expected one of {shown}, got {_shown(value)}"


def _const(accepted: Any, value: Any, path: str, *_: Any) -> Problem | None:
    return None if json_equal(value, accepted) else (path, f"expected {_shown(accepted)}, got {_shown(value)}")


def _bound(name: str, holds: Callable[[Any, Any], bool], words: str) -> Callable[..., Problem | None]:
    def checker(limit: Any, value: Any, path: str, *_: Any) -> Problem | None:
        if not _number(value) or holds(value, limit):
            return None
        return path, f"expected {words} {_shown(limit)}, got {_shown(value)}"

    checker.__name__ = f"_{name}"
    return checker


def _multiple_of(step: Any, value: Any, path: str, *_: Any) -> Problem | None:
    # As the numbers are written: 19.99 is a multiple of 0.01, which float division (1998.9999999999998) denies.
    if not _number(value) or (_finite(value) and Fraction(repr(value)) % Fraction(repr(step)) == 0):
        return None
    return path, f"expected a multiple of {_shown(step)}, got {_shown(value)}"


def _length(most: bool, unit: str, of: type[Sized]) -> Callable[..., Problem | None]:
    def checker(limit: int, value: Any, path: str, *_: Any) -> Problem | None:
        if not isinstance(value, of) or (len(value) <= limit if most else len(value) >= limit):
            return None
        words = "at most" if most else "at least"
        return path, f"expected {words} {count(int(limit), unit)}, got {count(len(value), unit)}"

    return checker


def _pattern(pattern: str, value: Any, path: str, node: Any, compiled: InputSchema, depth: int) -> Problem | None:
    if not isinstance(value, str) or compiled.patterns[pattern](value):
        return None
    return path, f"expected text matching {_shown(pattern)}, got {_shown(value)}"


def _unique(unique: bool, value: Any, path: str, *_: Any) -> Problem | None:
    if not unique or not isinstance(value, list):
        return None
    seen: dict[str, int] = {}
    for index, item in enumerate(value):
        first = seen.setdefault(canonical_json(_canonical(item)), index)
        if first != index:
            return path, f"expected unique items, got the same value at [{first}] and [{index}]: {_shown(item)}"
    return None


def _canonical(value: Any) -> Any:
    """The value with 1.0 written 1, so that equal JSON values encode alike (true stays true)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items()}
    return value


def _prefix_items(
    schemas: list[Any], value: Any, path: str, node: Any, compiled: InputSchema, depth: int
) -> Problem | None:
    if not isinstance(value, list):
        return None
    pairs = enumerate(zip(schemas, value, strict=False))
    return _first(_check(schema, item, f"{path}[{index}]", compiled, depth + 1) for index, (schema, item) in pairs)


def _items(schema: Any, value: Any, path: str, node: Any, compiled: InputSchema, depth: int) -> Problem | None:
    if not isinstance(value, list):
        return None
    rest = range(len(node.get("prefixItems", ())), len(value))  # items covers what prefixItems does not
    return _first(_check(schema, value[index], f"{path}[{index}]", compiled, depth + 1) for index in rest)


def _required(keys: list[str], value: Any, path: str, *_: Any) -> Problem | None:
    if not isinstance(value, dict):
        return None
    missing = next((key for key in keys if key not in value), None)
    return None if missing is None else (_child(path, missing), "missing, and the schema requires it")


def _properties(
    schemas: dict[str, Any], value: Any, path: str, node: Any, compiled: InputSchema, depth: int
) -> Problem | None:
    if not isinstance(value, dict):
        return None
    given = (key for key in schemas if key in value)
    return _first(_check(schemas[key], value[key], _child(path, key), compiled, depth + 1) for key in given)


def _pattern_properties(
    schemas: dict[str, Any], value: Any, path: str, node: Any, compiled: InputSchema, depth: int
) -> Problem | None:
    if not isinstance(value, dict):
        return None
    matches = ((key, schema) for key in value for pattern, schema in schemas.items() if compiled.patterns[pattern](key))
    return _first(_check(schema, value[key], _child(path, key), compiled, depth + 1) for key, schema in matches)


def _property_names(schema: Any, value: Any, path: str, node: Any, compiled: InputSchema, depth: int) -> Problem | None:
    if not isinstance(value, dict):
        return None
    for key in value:
        problem = _check(schema, key, _child(path, key), compiled, depth + 1)
        if problem is not None:
            return problem[0], f"not an allowed property name: {problem[1]}"
    return None


def _additional(schema: Any, value: Any, path: str, node: Any, compiled: InputSchema, depth: int) -> Problem | None:
    if not isinstance(value, dict):
        return None
    named, patterns = node.get("properties", {}), node.get("patternProperties", {})
    for key in value:
        if key in named or any(compiled.patterns[pattern](key) for pattern in patterns):
            continue
        if schema is False:
            return _child(path, key), "not allowed (additionalProperties is false)"
        problem = _check(schema, value[key], _child(path, key), compiled, depth + 1)
        if problem is not None:
            return problem
    return None


def _all_of(schemas: list[Any], value: Any, path: str, node: Any, compiled: InputSchema, depth: int) -> Problem | None:
    return _first(_check(schema, value, path, compiled, depth + 1) for schema in schemas)


def _any_of(schemas: list[Any], value: Any, path: str, node: Any, compiled: InputSchema, depth: int) -> Problem | None:
    problems = [_check(schema, value, path, compiled, depth + 1) for schema in schemas]
    if any(problem is None for problem in problems):
        return None
    return path, _none_matches("anyOf", schemas, value, problems, path)


def _one_of(schemas: list[Any], value: Any, path: str, node: Any, compiled: InputSchema, depth: int) -> Problem | None:
    problems = [_check(schema, value, path, compiled, depth + 1) for schema in schemas]
    matched = [str(i) for i, problem in enumerate(problems) if problem is None]
    if len(matched) == 1:
        return None
    if not matched:
        return path, _none_matches("oneOf", schemas, value, problems, path)
    return path, f"matches {len(matched)} of the oneOf schemas ({', '.join(matched)}), expected exactly one"


def _none_matches(keyword: str, schemas: list[Any], value: Any, problems: list[Problem | None], path: str) -> str:
    """`matches none of the 2 anyOf schemas (closest: size: expected integer, got "8")`: of the schemas for the
    value's type, the one that read deepest into it."""

    def closeness(index: int) -> tuple[int, bool]:
        schema, problem = schemas[index], problems[index]
        typed = isinstance(schema, dict) and "type" in schema and _type(schema["type"], value, path) is None
        return len(problem[0]) if problem else 0, typed

    closest = problems[max(range(len(problems)), key=closeness)]
    assert closest is not None
    where = closest[0]
    if where == path:
        where = ""
    elif path and where.startswith(f"{path}."):
        where = where[len(path) + 1 :]
    elif path and where.startswith(f"{path}["):
        where = where[len(path) :]
    detail = f"{where}: {closest[1]}" if where else closest[1]
    return f"matches none of the {len(problems)} {keyword} schemas (closest: {detail})"


_CHECKERS: tuple[tuple[str, Callable[..., Problem | None]], ...] = (
    ("$ref", _ref),
    ("type", _type),
    ("enum", _enum),
    ("const", _const),
    ("minimum", _bound("minimum", lambda v, limit: v >= limit, "at least")),
    ("maximum", _bound("maximum", lambda v, limit: v <= limit, "at most")),
    ("exclusiveMinimum", _bound("exclusive_minimum", lambda v, limit: v > limit, "more than")),
    ("exclusiveMaximum", _bound("exclusive_maximum", lambda v, limit: v < limit, "less than")),
    ("multipleOf", _multiple_of),
    ("minLength", _length(False, "character", str)),
    ("maxLength", _length(True, "character", str)),
    ("pattern", _pattern),
    ("minItems", _length(False, "item", list)),
    ("maxItems", _length(True, "item", list)),
    ("uniqueItems", _unique),
    ("required", _required),
    ("propertyNames", _property_names),
    ("properties", _properties),
    ("patternProperties", _pattern_properties),
    ("additionalProperties", _additional),
    ("prefixItems", _prefix_items),
    ("items", _items),
    ("allOf", _all_of),
    ("anyOf", _any_of),
    ("oneOf", _one_of),
)


def _first(problems: Iterator[Problem | None]) -> Problem | None:
    """The first problem, checking no further than it: one call gives one reason."""
    return next((problem for problem in problems if problem is not None), None)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(number: float) -> bool:
    return isinstance(number, int) or math.isfinite(number)  # an int is, however long (isfinite would overflow)


def _non_negative_whole(value: Any) -> bool:
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return _number(value) and whole and value >= 0


def _child(path: str, key: str) -> str:
    key = clip(key, 60) if key.isidentifier() or key.replace("-", "_").isidentifier() else json.dumps(clip(key, 60))
    return f"{path}.{key}" if path else key


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


def _shown(value: Any) -> str:
    return clip(json.dumps(value, ensure_ascii=False), 60)
