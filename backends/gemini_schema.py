"""A tool's JSON Schema as Gemini's `parameters` take it: the OpenAPI 3.0 subset of generateContent's Schema object.

Gemini answers 400 to a keyword outside that subset, so what it does not know is dropped (and listed by validate),
a local $ref is written out in place, `const` becomes a one-value `enum`, and a list of types with "null" becomes
`nullable`. (Gemini's `parametersJsonSchema` would take the schema whole; `parameters` is what the issue chose.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.records import ConfigError

# The keywords generateContent's Schema object reads; properties and items hold schemas of their own.
KEPT = frozenset(
    {
        "description",
        "nullable",
        "maxItems",
        "minItems",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "propertyOrdering",
        "default",
        "minimum",
        "maximum",
        "title",
    }
)
TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
# The formats the Gemini API reads for each type; any other makes it answer 400.
FORMATS = {"string": {"enum", "date-time"}, "number": {"float", "double"}, "integer": {"int32", "int64"}}


def gemini_schema(tool: str, schema: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The schema Gemini accepts, and where (`.properties.x.additionalProperties`) each keyword it drops stood.

    A $ref that leads back to itself is a configuration error naming the tool: Gemini takes no recursive schema.
    """
    dropped: list[str] = []
    return _translate(tool, schema, schema, "", {}, dropped), dropped


def _translate(
    tool: str, root: Mapping[str, Any], node: Any, path: str, refs: Mapping[str, str], dropped: list[str]
) -> dict[str, Any]:
    """The node translated; refs: each $ref being written out, with where it was met."""
    if not isinstance(node, Mapping):
        dropped.append(path or ".")  # `true` or `false` as a schema: Gemini has no schema for anything or nothing
        return {}
    if isinstance(node.get("$ref"), str):
        ref = node["$ref"]
        if ref in refs:
            raise ConfigError(
                f"tools: {tool!r}: inputSchema{refs[ref]}.$ref {ref!r} leads back to itself; "
                "Gemini takes no recursive schema"
            )
        target = _resolve(root, ref)
        if target is None:
            dropped.append(f"{path}.$ref")
        else:
            rest = {key: value for key, value in node.items() if key != "$ref"}
            return {
                **_translate(tool, root, target, path, {**refs, ref: path}, dropped),
                **_translate(tool, root, rest, path, refs, dropped),
            }
    out: dict[str, Any] = {}
    types: list[str] = []
    for key, value in node.items():
        where = f"{path}.{key}"
        if key == "format":
            continue  # kept below when Gemini reads it for the type
        if key == "type":
            types = [value] if isinstance(value, str) else list(value) if isinstance(value, list) else []
            if not types or not set(types) <= TYPES:
                dropped.append(where)
                types = []
        elif key in ("enum", "const") and (key == "const" or isinstance(value, list)):
            values = value if key == "enum" else [value]
            out["enum"] = [item if isinstance(item, str) else json.dumps(item) for item in values]
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {
                name: _translate(tool, root, sub, f"{where}.{name}", refs, dropped) for name, sub in value.items()
            }
        elif key == "items" and isinstance(value, Mapping):
            out[key] = _translate(tool, root, value, where, refs, dropped)
        elif key in ("anyOf", "oneOf") and isinstance(value, list):
            # Gemini has anyOf only: oneOf's "exactly one" is left to the task's own argument checks.
            out["anyOf"] = [_translate(tool, root, sub, f"{where}[{i}]", refs, dropped) for i, sub in enumerate(value)]
        elif key in KEPT:
            out[key] = value
        else:
            dropped.append(where)
    if "format" in node:
        kinds = [kind for kind in types if kind != "null"]
        if len(kinds) == 1 and node["format"] in FORMATS.get(kinds[0], ()):
            out["format"] = node["format"]
        else:
            dropped.append(f"{path}.format")
    return {**_typed(types, out), **out} if types else out


def _typed(types: list[str], out: dict[str, Any]) -> dict[str, Any]:
    """`type` as Gemini writes it (upper case); "null" beside others is `nullable`, several others an anyOf."""
    others = [kind for kind in types if kind != "null"]
    nullable = {"nullable": True} if others and len(others) < len(types) else {}
    if len(others) > 1:
        out["anyOf"] = [{"type": kind.upper()} for kind in others]
        return nullable
    return {"type": (others[0] if others else "null").upper(), **nullable}


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    """What a local reference (`#/$defs/Asset`) points at in the schema, or None for one it cannot follow."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for token in ref[2:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node
