"""checkArgs "schema": each supported keyword passes and fails as JSON Schema says, anything else is refused at load,
and the verdicts agree with the jsonschema package's on generated schemas and arguments."""

from __future__ import annotations

import json
import re
import sys
import unittest
import warnings
from http.server import BaseHTTPRequestHandler
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.patterns import compile_pattern
from harness.schema import ANNOTATIONS, KEYWORDS, check, compile_schema
from tests.support import Received, TempDirTestCase, canonical_task_data, clean_env, run_cli, send_json

TOOL = "imageman.transform.url"
KEYWORD_NAMES = (*KEYWORDS, *sorted(ANNOTATIONS), "not", "nullable")


def under_x(schema: Any) -> dict[str, Any]:
    """A tool schema whose one property, x, has this schema."""
    return {"type": "object", "properties": {"x": schema}}


# (keyword, the tool's schema, arguments that validate, arguments that do not, the reason they do not)
KEYWORDS: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], str]] = [
    ("type string", under_x({"type": "string"}), {"x": "a"}, {"x": 1}, "x: expected string, got 1"),
    (
        "type integer takes 10.0",
        under_x({"type": "integer"}),
        {"x": 10.0},
        {"x": "10"},
        'x: expected integer, got "10"',
    ),
    (
        "type integer refuses 10.5",
        under_x({"type": "integer"}),
        {"x": -3},
        {"x": 10.5},
        "x: expected integer, got 10.5",
    ),
    ("type number", under_x({"type": "number"}), {"x": 1.5}, {"x": True}, "x: expected number, got true"),
    ("type boolean", under_x({"type": "boolean"}), {"x": False}, {"x": 0}, "x: expected boolean, got 0"),
    ("type object", under_x({"type": "object"}), {"x": {}}, {"x": []}, "x: expected object, got []"),
    ("type array", under_x({"type": "array"}), {"x": []}, {"x": {}}, "x: expected array, got {}"),
    ("type null", under_x({"type": "null"}), {"x": None}, {"x": ""}, 'x: expected null, got ""'),
    (
        "type list (nullable)",
        under_x({"type": ["string", "null"]}),
        {"x": None},
        {"x": 5},
        "x: expected string or null, got 5",
    ),
    ("enum", under_x({"enum": ["webp", 1]}), {"x": 1.0}, {"x": "gif"}, 'x: expected one of "webp", 1, got "gif"'),
    ("enum: true is not 1", under_x({"enum": [1]}), {"x": 1}, {"x": True}, "x: expected one of 1, got true"),
    (
        "const",
        under_x({"const": {"a": [1]}}),
        {"x": {"a": [1.0]}},
        {"x": {"a": [2]}},
        'x: expected {"a": [1]}, got {"a": [2]}',
    ),
    ("minimum", under_x({"minimum": 1}), {"x": 1}, {"x": 0.5}, "x: expected at least 1, got 0.5"),
    ("maximum", under_x({"maximum": 4000}), {"x": 4000}, {"x": 4001}, "x: expected at most 4000, got 4001"),
    ("exclusiveMinimum", under_x({"exclusiveMinimum": 0}), {"x": 0.1}, {"x": 0}, "x: expected more than 0, got 0"),
    ("exclusiveMaximum", under_x({"exclusiveMaximum": 1}), {"x": 0.9}, {"x": 1}, "x: expected less than 1, got 1"),
    (
        "multipleOf, as written",
        under_x({"multipleOf": 0.01}),
        {"x": 19.99},
        {"x": 19.995},
        "x: expected a multiple of 0.01, got 19.995",
    ),
    (
        "minLength",
        under_x({"minLength": 2}),
        {"x": "ab"},
        {"x": "a"},
        "x: expected at least 2 characters, got 1 character",
    ),
    (
        "maxLength counts characters",
        under_x({"maxLength": 2}),
        {"x": "😀😀"},
        {"x": "abc"},
        "x: expected at most 2 characters, got 3 characters",
    ),
    (
        "pattern searches",
        under_x({"pattern": "^ast_[a-z0-9]+$"}),
        {"x": "ast_7f3k"},
        {"x": "7f3k"},
        'x: expected text matching "^ast_[a-z0-9]+$", got "7f3k"',
    ),
    (
        "pattern is not anchored",
        under_x({"pattern": "[0-9]"}),
        {"x": "a1b"},
        {"x": "ab"},
        'x: expected text matching "[0-9]", got "ab"',
    ),
    ("items", under_x({"items": {"type": "string"}}), {"x": ["a"]}, {"x": ["a", 2]}, "x[1]: expected string, got 2"),
    ("minItems", under_x({"minItems": 1}), {"x": [0]}, {"x": []}, "x: expected at least 1 item, got 0 items"),
    ("maxItems", under_x({"maxItems": 1}), {"x": [0]}, {"x": [0, 1]}, "x: expected at most 1 item, got 2 items"),
    (
        "uniqueItems: 1 and 1.0 are the same, true and 1 are not",
        under_x({"uniqueItems": True}),
        {"x": [1, True, "1"]},
        {"x": [1, True, 1.0]},
        "x: expected unique items, got the same value at [0] and [2]: 1.0",
    ),
    (
        "required",
        {"type": "object", "properties": {"assetId": {"type": "string"}}, "required": ["assetId"]},
        {"assetId": "a"},
        {"width": 1},
        "assetId: missing, and the schema requires it",
    ),
    (
        "properties, nested",
        under_x(
            {"type": "object", "properties": {"size": {"type": "object", "properties": {"w": {"type": "integer"}}}}}
        ),
        {"x": {"size": {"w": 1}}},
        {"x": {"size": {"w": "1"}}},
        'x.size.w: expected integer, got "1"',
    ),
    (
        "required, nested",
        under_x({"type": "object", "required": ["w"]}),
        {"x": {"w": 1}},
        {"x": {"h": 1}},
        "x.w: missing, and the schema requires it",
    ),
    (
        "additionalProperties false",
        {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
        {"a": 1},
        {"a": 1, "b": 2},
        "b: not allowed (additionalProperties is false)",
    ),
    (
        "additionalProperties as a schema",
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"tag": "x"},
        {"tag": 1},
        "tag: expected string, got 1",
    ),
    (
        "anyOf",
        under_x({"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 2}]}),
        {"x": "ab"},
        {"x": "a"},
        "x: matches none of the 2 anyOf schemas (closest: expected at least 2 characters, got 1 character)",
    ),
    (
        "anyOf names the branch that read deepest",
        under_x({"anyOf": [{"type": "string"}, {"type": "object", "properties": {"w": {"type": "integer"}}}]}),
        {"x": {"w": 1}},
        {"x": {"w": "1"}},
        'x: matches none of the 2 anyOf schemas (closest: w: expected integer, got "1")',
    ),
    (
        "oneOf: more than one is a failure",
        under_x({"oneOf": [{"type": "number"}, {"type": "integer"}]}),
        {"x": 1.5},
        {"x": 1},
        "x: matches 2 of the oneOf schemas (0, 1), expected exactly one",
    ),
    (
        "oneOf: none",
        under_x({"oneOf": [{"type": "number"}, {"type": "null"}]}),
        {"x": None},
        {"x": "a"},
        'x: matches none of the 2 oneOf schemas (closest: expected number, got "a")',
    ),
    (
        "allOf",
        under_x({"allOf": [{"type": "string"}, {"maxLength": 1}]}),
        {"x": "a"},
        {"x": "ab"},
        "x: expected at most 1 character, got 2 characters",
    ),
    (
        "$ref to $defs",
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/Size"}}, "$defs": {"Size": {"type": "integer"}}},
        {"x": 1},
        {"x": "1"},
        'x: expected integer, got "1"',
    ),
    (
        "$ref to draft-07 definitions, with siblings that apply too",
        {
            "type": "object",
            "properties": {"x": {"$ref": "#/definitions/Size", "maximum": 10}},
            "definitions": {"Size": {"type": "integer"}},
        },
        {"x": 10},
        {"x": 11},
        "x: expected at most 10, got 11",
    ),
    (
        "$ref recursive through properties",
        {
            "type": "object",
            "properties": {"tree": {"$ref": "#/$defs/Node"}},
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                    "required": ["name"],
                }
            },
        },
        {"tree": {"name": "a", "kids": [{"name": "b", "kids": []}]}},
        {"tree": {"name": "a", "kids": [{"kids": []}]}},
        "tree.kids[0].name: missing, and the schema requires it",
    ),
    (
        "$ref with a percent-encoded, escaped pointer",
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/a~1b%20c"}}, "$defs": {"a/b c": {"type": "string"}}},
        {"x": "s"},
        {"x": 1},
        "x: expected string, got 1",
    ),
    (
        "prefixItems, then items for the rest",
        under_x({"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": {"type": "boolean"}}),
        {"x": [1, "a", True]},
        {"x": [1, "a", "b"]},
        'x[2]: expected boolean, got "b"',
    ),
    (
        "prefixItems",
        under_x({"prefixItems": [{"type": "integer"}, {"type": "integer"}], "minItems": 2}),
        {"x": [1, 2]},
        {"x": [1, 2.5]},
        "x[1]: expected integer, got 2.5",
    ),
    (
        "patternProperties, and additionalProperties past them",
        under_x({"patternProperties": {"^n_": {"type": "integer"}}, "additionalProperties": False}),
        {"x": {"n_a": 1}},
        {"x": {"n_a": 1, "b": 2}},
        "x.b: not allowed (additionalProperties is false)",
    ),
    (
        "patternProperties",
        under_x({"patternProperties": {"^n_": {"type": "integer"}}}),
        {"x": {"n_a": 1, "s": "x"}},
        {"x": {"n_a": "1"}},
        'x.n_a: expected integer, got "1"',
    ),
    (
        "propertyNames",
        under_x({"propertyNames": {"enum": ["w", "h"]}}),
        {"x": {"w": 1}},
        {"x": {"w": 1, "d": 2}},
        'x.d: not an allowed property name: expected one of "w", "h", got "d"',
    ),
    (
        "$ref to the root",
        {"type": "object", "properties": {"n": {"type": "integer"}, "child": {"$ref": "#"}}},
        {"n": 1, "child": {"n": 2, "child": {}}},
        {"child": {"child": {"n": "3"}}},
        'child.child.n: expected integer, got "3"',
    ),
    (
        "oneOf with OpenAPI's discriminator beside it (an annotation)",
        under_x(
            {
                "oneOf": [
                    {"properties": {"kind": {"const": "crop"}, "w": {"type": "integer"}}, "required": ["kind", "w"]},
                    {"properties": {"kind": {"const": "blur"}, "r": {"type": "number"}}, "required": ["kind", "r"]},
                ],
                "discriminator": {"propertyName": "kind"},
            }
        ),
        {"x": {"kind": "blur", "r": 1.5}},
        {"x": {"kind": "crop", "w": "10"}},
        'x: matches none of the 2 oneOf schemas (closest: w: expected integer, got "10")',
    ),
    ("a false subschema", under_x(False), {}, {"x": 1}, "x: not allowed here (its schema is false)"),
]

ANNOTATED = under_x(
    {
        "type": "string",
        "title": "X",
        "description": "d",
        "default": 5,
        "examples": [1],
        "$comment": "c",
        "deprecated": True,
        "readOnly": False,
        "writeOnly": False,
        "format": "email",
        "contentMediaType": "text/plain",
        "contentEncoding": "base64",
    }
)


class Keywords(unittest.TestCase):
    def test_each_keyword_passes_and_fails_as_tabled(self) -> None:
        for name, schema, good, bad, reason in KEYWORDS:
            with self.subTest(name):
                compiled, problems = compile_schema(TOOL, schema)
                self.assertEqual(problems, [])
                assert compiled is not None
                self.assertIsNone(check(compiled, good))
                self.assertEqual(check(compiled, bad), f"{TOOL} {reason}")
                # jsonschema agrees, but on multipleOf's float (see AgreesWithJsonschema)
                self.assertIs(jsonschema.Draft202012Validator(schema).is_valid(good), not name.startswith("multipleOf"))
                self.assertIs(jsonschema.Draft202012Validator(schema).is_valid(bad), False)

    def test_annotations_are_accepted_and_change_nothing(self) -> None:
        root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:t", **ANNOTATED}
        compiled, problems = compile_schema(TOOL, root)
        self.assertEqual(problems, [])
        assert compiled is not None
        self.assertIsNone(check(compiled, {"x": "not an email"}))  # format is an annotation
        self.assertEqual(check(compiled, {"x": 5}), f"{TOOL} x: expected string, got 5")

    def test_top_level_extra_arguments_are_allowed_unless_the_schema_says_otherwise(self) -> None:
        compiled, _ = compile_schema(TOOL, {"type": "object", "properties": {"a": {"type": "string"}}})
        assert compiled is not None
        self.assertIsNone(check(compiled, {"a": "x", "extra": [1]}))

    def test_a_too_deep_argument_fails_instead_of_overflowing(self) -> None:
        compiled, _ = compile_schema(
            TOOL,
            {
                "type": "object",
                "properties": {"x": {"$ref": "#/$defs/L"}},
                "$defs": {"L": {"type": "array", "items": {"$ref": "#/$defs/L"}}},
            },
        )
        assert compiled is not None
        deep: list[Any] = []
        for _ in range(500):
            deep = [deep]
        reason = check(compiled, {"x": deep})
        self.assertIsNotNone(reason)
        self.assertIn("nested more than 100 levels deep", reason or "")


# (the tool's schema, the problem's JSON path inside inputSchema, what it says)
PROBLEMS: list[tuple[dict[str, Any], str, str]] = [
    (
        under_x({"type": "string", "nullable": True}),
        "properties.x.nullable",
        'unsupported keyword "nullable": checkArgs "schema" cannot check it (OpenAPI\'s; write "type": [..., "null"])',
    ),
    (under_x({"if": {"type": "string"}}), "properties.x.if", 'unsupported keyword "if"'),
    ({"$defs": {"a": {"not": {}}}}, "$defs.a.not", 'unsupported keyword "not"'),
    (
        under_x({"items": [{"type": "string"}]}),
        "properties.x.items",
        "a list of schemas (draft-07's tuple form) is read as prefixItems: write that",
    ),
    (under_x({"$ref": "https://example.com/s.json"}), "properties.x.$ref", "a remote $ref cannot be followed"),
    (under_x({"$ref": "other.json#/a"}), "properties.x.$ref", "a remote $ref cannot be followed"),
    (under_x({"$ref": "#/$defs/Nope"}), "properties.x.$ref", '"#/$defs/Nope" points to no schema in this inputSchema'),
    (under_x({"$ref": "#/properties/x/enum/0", "enum": [{}]}), "properties.x.$ref", "points to no schema"),
    (under_x({"$ref": "#anchor"}), "properties.x.$ref", "an anchor $ref cannot be followed"),
    (
        {
            "properties": {"x": {"$ref": "#/$defs/a"}},
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
        },
        "$defs",
        "leads back to itself without reading into the arguments",
    ),
    (
        under_x({"type": "strin"}),
        "properties.x.type",
        'expected one of object, array, string, number, integer, boolean, null, or a list of them, got "strin"',
    ),
    (under_x({"minimum": "1"}), "properties.x.minimum", 'expected a finite number, got "1"'),
    (
        under_x({"exclusiveMinimum": True}),
        "properties.x.exclusiveMinimum",
        "the draft-04 form (true or false) is not supported",
    ),
    (under_x({"multipleOf": 0}), "properties.x.multipleOf", "expected a number above 0, got 0"),
    (under_x({"maxLength": -1}), "properties.x.maxLength", "expected a whole number, 0 or more, got -1"),
    (under_x({"pattern": "("}), "properties.x.pattern", "not a regular expression this checker can read"),
    (
        under_x({"pattern": "^(a+)\\1$"}),
        "properties.x.pattern",
        "a pattern this checker will not run: a backreference (\\1, (?P=name)) cannot be matched in linear time",
    ),
    (
        under_x({"patternProperties": {"^(?=\\w)": {}}}),
        "properties.x.patternProperties.^(?=\\w)",
        "a pattern this checker will not run: a lookahead",
    ),
    (
        under_x({"propertyNames": {"pattern": "^a{0,9999}$"}}),
        "properties.x.propertyNames.pattern",
        "a pattern this checker will not run: too large",
    ),
    (under_x({"anyOf": []}), "properties.x.anyOf", "expected a non-empty list of schemas"),
    (under_x({"required": "a"}), "properties.x.required", "expected a list of property names"),
    (under_x({"enum": "a"}), "properties.x.enum", "expected a list of values"),
    (under_x({"uniqueItems": 1}), "properties.x.uniqueItems", "expected true or false, got a number"),
    (under_x(5), "properties.x", "expected a schema (an object, true or false), got a number"),
]


class Problems(unittest.TestCase):
    def test_each_schema_that_cannot_be_checked_is_refused_with_its_path(self) -> None:
        for schema, path, message in PROBLEMS:
            with self.subTest(path=path, message=message):
                compiled, problems = compile_schema(TOOL, schema)
                self.assertIsNone(compiled)
                self.assertEqual(len(problems), 1, problems)
                self.assertTrue(problems[0][0].startswith(path), problems)
                self.assertIn(message, problems[0][1])

    def test_every_problem_is_reported_not_just_the_first(self) -> None:
        _, problems = compile_schema(
            TOOL, {"properties": {"a": {"if": {}}, "b": {"nullable": True}}, "$defs": {"c": {"not": {}}}}
        )
        self.assertEqual([path for path, _ in problems], ["properties.a.if", "properties.b.nullable", "$defs.c.not"])


# Patterns whose backtracking in re is exponential or a high power of the argument's length, each with an argument
# that takes re seconds or more (the first five hung a run past SIGTERM): the linear matcher reads them as any other.
EVIL = [
    (r"^(?:[a-z0-9_]+){1,8}$", "a" * 80 + "!"),
    (r"^(a+)(a+)(a+)(a+)(a+)(a+)(a+)(a+)b$", "a" * 60),
    (r"^.*.*.*.*.*.*.*.*=.*$", "a" * 60),
    (r"^(?:a+){1,8}$", "a" * 60 + "!"),
    (r"^(a?){25}a{25}$", "a" * 25),
    (r"^(a+)+$", "a" * 40 + "!"),
    (r"^(\w+\s?)+$", "word " * 30 + ","),
    (r"(x+x+)+y", "x" * 60),
    (r"^(a|aa)+$", "a" * 60 + "b"),
]
# Patterns a set of states cannot follow, or too large once their repeats are written out: refused at load.
REFUSED = [
    (r"^(a+)\1$", "a backreference"),
    (r"(?P<x>a)(?P=x)", "a backreference"),
    (r"^(?=(a+)+$)", "a lookahead or lookbehind"),
    (r"(?<=a)b", "a lookahead or lookbehind"),
    (r"^(?!\s)(?!.*\s$).*$", "a negative lookahead or lookbehind"),
    (r"^(?!^[-+.]*$)[+-]?0*\d*\.?\d*$", "a negative lookahead"),  # Decimal, as some Pydantic 2 versions wrote it
    (r"(a)?(?(1)b|c)", "a conditional"),
    (r"((((((a{8}){8}){8}){8}){8}){8})", "too large"),
    (r"^.{0,5000}$", "too large"),
    (r"((?:\b){999}){999}", "too large"),
]
if sys.version_info >= (3, 11):  # re reads them from 3.11 on; before, they are no pattern at all
    REFUSED += [(r"(?>a+)a", "an atomic group"), (r"a*+a", "a possessive repeat")]
# Patterns tool schemas carry (identifiers, dates, e-mail addresses, URLs, versions, IPv4 addresses, Pydantic's base64,
# colours), and those of this suite, each with texts it matches and texts it does not.
EVERYDAY: list[tuple[str, list[str], list[str]]] = [
    (r"^ast_[a-z0-9]+$", ["ast_9f2", "ast_x"], ["ast_", "AST_1", "ast_1 ", "xast_1"]),
    (r"[0-9]", ["a1", "9"], ["", "abc"]),
    (r"^n_", ["n_1", "n_"], ["an_", "N_"]),
    (r"a|b", ["xbx", "a"], ["", "c"]),
    (r"^[a-zA-Z0-9_-]{1,64}$", ["get_user-2", "a" * 64], ["", "a" * 65, "a b", "é"]),
    (r"^\d{4}-\d{2}-\d{2}$", ["2026-12-02", "2026-12-02\n"], ["2026-12-2", "26-12-02", "2026-12-02x"]),
    (
        r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$",
        ["2026-12-02T01:53:10Z", "2026-12-02T01:53:10.25+01:00"],
        ["2026-12-02T01:53:10", "2026-12-02 01:53:10Z", "2026-12-02T01:53:10.Z"],
    ),
    (
        r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
        ["123e4567-e89b-12d3-a456-426614174000"],
        ["123e4567-e89b-12d3-a456-42661417400", "123E4567-e89b-12d3-a456-426614174000"],
    ),
    (r"^[^@\s]+@[^@\s]+\.[^@\s]+$", ["ada@example.org"], ["ada@example", "ada @example.org", "a@b@c.d"]),
    (
        r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$",
        ["first.last+tag@mail.example.co"],
        ["first@example.c", "@example.org", "first@exa mple.org"],
    ),
    (r"^[\w.+-]+@[\w-]+\.[\w.-]+$", ["ada_l@example.org", "ñ@ü.de"], ["ada@.org", "ada@example"]),
    (r"^.+@.+$", ["a@b", "a@@"], ["@", "a@", "a\n@b"]),
    (
        r"^https?://[^\s/$.?#].[^\s]*$",
        ["https://example.org/a?b=c", "http://x.y"],
        ["ftp://x.y", "https://", "http://x y z"],
    ),
    (r"^([a-z0-9]+(-[a-z0-9]+)*\.)+[a-z]{2,}$", ["cdn.example-1.org"], ["example", "-a.org", "a..org"]),
    (r"^[a-z]+(?:[-_][a-z]+)*$", ["snake_case", "kebab-case"], ["trailing-", "Upper", "a--b"]),
    (r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$", ["pkg.mod_1.name"], ["pkg.", "1pkg", "pkg..mod"]),
    (r"^[^\s]+(\s+[^\s]+)*$", ["one two  three"], [" lead", "trail ", ""]),
    (r"^#?([a-fA-F0-9]{6}|[a-fA-F0-9]{3})$", ["#a1B2c3", "fff"], ["#ffff", "#ggg"]),
    (r"^(\+\d{1,3})?\d{10}$", ["+441234567890", "1234567890"], ["+12345678901234", "123456789"]),
    (r"^(\d{1,3}\.){3}\d{1,3}$", ["192.168.0.1"], ["192.168.0", "1.2.3.4.5", "1234.1.1.1"]),
    (r"^((25[0-5]|(2[0-4]|1\d|[1-9]|)\d)\.?\b){4}$", ["255.255.255.255", "10.0.0.1"], ["256.1.1.1", "1.2.3"]),
    (
        r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
        r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$",
        ["1.0.0", "2.10.3-rc.1+build.5", "1.0.0-alpha"],
        ["1.0", "01.0.0", "1.0.0-", "1.0.0+"],
    ),
    (
        r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
        ["", "aGk=", "aGVsbG8gd29ybGQ="],
        ["aGk", "a==="],
    ),
    (r"(?i)^(red|green|blue)$", ["Red", "BLUE"], ["redd", "purple"]),
    (r"^\$?\d+(\.\d{2})?$", ["$19.99", "5"], ["19.9", "$"]),
    (r"^(\w|\d)+$", ["abc_1", "٣"], ["a-b", ""]),
    (r"(?m)^end$", ["start\nend\nmore"], ["ending", "the end"]),
    (r"\bcat\b", ["a cat.", "cat"], ["concat", "cats"]),
    (r"\Bcat", ["concat"], ["cat", "a cat"]),
    (r"^\A\w+\Z", ["word"], ["word\n", "two words"]),
]
# The parts of a generated pattern: classes, categories, every anchor, and the scoped flags that change them.
CLASSES = ["a", "b", "ab", ".", "[ab]", "[^a]", "\\d", "\\w", "\\W", "\\s", "(?i:A)", "(?s:.)", "(?a:\\w)"]
ANCHORS = ["^", "$", "\\b", "\\B", "\\A", "\\Z", "(?m:^)", "(?m:$)", "(?a:\\b)", "(?a:\\B)"]
REGEX_PARTS = st.sampled_from([*CLASSES, *ANCHORS])


def regexes() -> st.SearchStrategy[str]:
    """Patterns of the supported grammar over a small alphabet: parts, sequences, alternatives, groups, repeats."""

    def nest(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(lambda parts: "".join(parts), st.lists(inner, min_size=2, max_size=3)),
            st.builds(lambda parts: "|".join(parts), st.lists(inner, min_size=2, max_size=3)),
            st.builds(lambda part, group: f"({group}{part})", inner, st.sampled_from(["", "?:"])),
            st.builds(
                lambda part, repeat, lazy: f"(?:{part}){repeat}{lazy}",
                inner,
                st.sampled_from(["*", "+", "?", "{2}", "{0,2}", "{1,3}", "{2,}"]),
                st.sampled_from(["", "?"]),
            ),
        )

    return st.recursive(REGEX_PARTS, nest, max_leaves=6)


class Patterns(TempDirTestCase):
    def test_a_pattern_it_cannot_match_in_linear_time_is_refused_at_load_with_its_reason(self) -> None:
        for pattern, reason in REFUSED:
            with self.subTest(pattern):
                compiled, problems = compile_schema(TOOL, under_x({"type": "string", "pattern": pattern}))
                self.assertIsNone(compiled)
                ((path, message),) = problems
                self.assertEqual(path, "properties.x.pattern")
                self.assertTrue(message.startswith(f"a pattern this checker will not run: {reason}"), message)

    def test_everyday_patterns_match_as_re_does(self) -> None:
        for pattern, matching, other in EVERYDAY:
            with self.subTest(pattern):
                compiled, problems = compile_schema(TOOL, under_x({"pattern": pattern}))
                self.assertEqual(problems, [])
                assert compiled is not None
                for text in matching:
                    self.assertIsNone(check(compiled, {"x": text}), text)
                for text in other:
                    self.assertIn("x: expected text matching ", check(compiled, {"x": text}) or "", text)
                self.assertEqual(
                    [re.search(pattern, text) is not None for text in matching + other],
                    [True] * len(matching) + [False] * len(other),
                    "the samples say what re says",
                )

    def test_patterns_that_backtrack_for_long_in_re_load_and_match_as_re_would(self) -> None:
        for pattern, argument in EVIL:
            with self.subTest(pattern):
                search = compile_pattern(pattern).search
                self.assertEqual(search(argument), pattern == r"^(a?){25}a{25}$")
                for short in ("", "a", "aa!", "ab", "aaab", "xxy", "word word", argument[:8]):
                    self.assertEqual(search(short), re.search(pattern, short) is not None, short)

    def test_a_bounded_repeat_is_written_out_as_long_as_it_stays_small(self) -> None:
        search = compile_pattern("a?" * 200 + "a" * 200).search
        self.assertEqual([search("a" * n) for n in (199, 200, 400, 401)], [False, True, True, True])
        # Optional copies nest, (X(X)?)?, so that each links to the next only: 1,500 of them are 1,500 edges, not 10**6.
        search = compile_pattern("^[ab]{0,1500}c").search
        self.assertEqual(
            [search(text) for text in ("c", "ab" * 750 + "c", "ab" * 750 + "ac", "abd")], [True, True, False, False]
        )

    def test_the_linear_matcher_agrees_with_re_on_generated_patterns_and_texts(self) -> None:
        verdicts = {True: 0, False: 0}

        @settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(pattern=regexes(), text=st.text(alphabet="abA1 _\n-é", max_size=8))
        def agree(pattern: str, text: str) -> None:
            theirs = re.search(pattern, text) is not None
            self.assertEqual(compile_pattern(pattern).search(text), theirs, f"{pattern!r} on {text!r}")
            verdicts[theirs] += 1

        agree()
        # Both verdicts must be common, or the agreement would say little.
        self.assertGreater(min(verdicts.values()), 400, verdicts)

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet="()[]{}*+?|.^$\\-,0123aAbsdwW:=!<>P", max_size=16))
    def test_any_pattern_loads_or_is_one_problem(self, pattern: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # re's, of a "[[" it reads as it always has
            compiled, problems = compile_schema(TOOL, under_x({"pattern": pattern}))
        self.assertLessEqual(len(problems), 1)
        if compiled is not None:
            for text in ("", "a", "aA1 b", "0,0"):
                self.assertEqual(check(compiled, {"x": text}) is None, re.search(pattern, text) is not None, text)

    def test_a_task_file_with_one_is_refused_before_any_agent_is_asked(self) -> None:
        data = canonical_task_data()
        tool = next(tool for tool in data["tools"] if tool["name"] == "imageman.asset.search")
        tool["inputSchema"]["properties"]["query"]["pattern"] = "^(\\w+)\\1$"
        data["checkArgs"] = "schema"
        path = self.write_json("tasks.json", data)
        _, stderr, code = run_cli(env=clean_env(EVAL_TASKS=path, EVAL_AGENT_URL="http://127.0.0.1:9/run"))
        self.assertEqual(code, 2)
        self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertIn(f"{path}: tools[", stderr)
        self.assertIn(
            ".inputSchema.properties.query.pattern: a pattern this checker will not run: a backreference", stderr
        )

    def test_a_run_given_arguments_that_hang_re_ends_with_its_verdict(self) -> None:
        properties: dict[str, Any] = {f"p{i}": {"pattern": pattern} for i, (pattern, _) in enumerate(EVIL)}
        properties["keys"] = {"patternProperties": {EVIL[0][0]: {}}, "additionalProperties": False}
        arguments: dict[str, Any] = {f"p{i}": argument for i, (_, argument) in enumerate(EVIL)}
        arguments["keys"] = {EVIL[0][1]: 1}
        data = {
            "version": 1,
            "checkArgs": "schema",
            "tools": [{"name": "lookup", "description": "Look up.", "inputSchema": {"properties": properties}}],
            "tasks": [
                {"id": name, "category": "lookup", "prompt": name, "expect": {"tool": "lookup"}} for name in arguments
            ],
        }

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            name = received.json["prompt"]
            send_json(handler, {"toolCall": {"name": "lookup", "args": {name: arguments[name]}}})

        agent = self.serve(respond)
        env = clean_env(EVAL_TASKS=self.write_json("tasks.json", data), EVAL_AGENT_URL=agent.url())
        _, stderr, code = run_cli("--out", "results.json", env=env, cwd=self.tmp)
        self.assertEqual(code, 1, stderr)
        results = {entry["id"]: entry for entry in self.read_json("results.json")["results"]}
        self.assertEqual(
            {name: entry["status"] for name, entry in results.items()},
            {name: "pass" if name == "p4" else "fail" for name in arguments},
        )


# The generated schemas draw on small pools, so that a generated value often validates and often does not.
STRINGS = st.sampled_from(["", "a", "ab", "abc", "A", "ba", "1"])
NUMBERS = st.sampled_from([-1, 0, 1, 2, 3, 10, 0.5, 1.0, 1.5, 2.5, -0.25, 1e20])
KEYS = st.sampled_from(["a", "b", "c"])
SCALARS = st.one_of(STRINGS, NUMBERS, st.booleans(), st.none())
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=6,
)
TYPE_NAMES = st.sampled_from(["object", "array", "string", "number", "integer", "boolean", "null"])


def schemas(refs: bool) -> st.SearchStrategy[Any]:
    """Schemas over the supported keywords: leaves are one keyword or two, and the applicators nest them."""
    leaf = st.one_of(
        st.builds(lambda t: {"type": t}, TYPE_NAMES),
        st.builds(lambda ts: {"type": ts}, st.lists(TYPE_NAMES, min_size=1, max_size=3, unique=True)),
        st.builds(lambda vs: {"enum": vs}, st.lists(SCALARS, min_size=1, max_size=3)),
        st.builds(lambda v: {"const": v}, VALUES),
        st.builds(
            lambda k, n: {k: n},
            st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]),
            NUMBERS,
        ),
        st.builds(lambda n: {"multipleOf": n}, st.sampled_from([1, 2, 3, 0.5, 0.25])),
        st.builds(
            lambda k, n: {k: n}, st.sampled_from(["minLength", "maxLength", "minItems", "maxItems"]), st.integers(0, 3)
        ),
        st.builds(lambda p: {"pattern": p}, st.sampled_from(["^a", "b$", "[0-9]", "^$", "a|b"])),
        st.builds(lambda u: {"uniqueItems": u}, st.booleans()),
        st.builds(lambda p: {"propertyNames": {"pattern": p}}, st.sampled_from(["^a", "b$", "^[ab]$"])),
        st.builds(lambda ks: {"required": ks}, st.lists(KEYS, max_size=2, unique=True)),
        st.booleans(),
        *([st.just({"$ref": "#/$defs/S"}), st.just({"$ref": "#/definitions/N"})] if refs else []),
    )

    def nest(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.builds(lambda ps: {"type": "object", "properties": ps}, st.dictionaries(KEYS, inner, max_size=3)),
            st.builds(
                lambda ps, ap: {"properties": ps, "additionalProperties": ap},
                st.dictionaries(KEYS, inner, max_size=2),
                inner,
            ),
            st.builds(lambda i: {"type": "array", "items": i}, inner),
            st.builds(lambda ps, i: {"prefixItems": ps, "items": i}, st.lists(inner, min_size=1, max_size=2), inner),
            st.builds(
                lambda pp, ap: {"patternProperties": pp, "additionalProperties": ap},
                st.dictionaries(st.sampled_from(["^a", "b", "^[bc]$"]), inner, max_size=2),
                inner,
            ),
            st.builds(
                lambda k, xs: {k: xs},
                st.sampled_from(["anyOf", "oneOf", "allOf"]),
                st.lists(inner, min_size=1, max_size=3),
            ),
            st.builds(lambda a, b: {**a, **b} if isinstance(a, dict) and isinstance(b, dict) else a, inner, inner),
        )

    return st.recursive(leaf, nest, max_leaves=8)


DEFS = {"$defs": {"S": {"type": "string", "maxLength": 2}}, "definitions": {"N": {"type": ["integer", "null"]}}}


class AgreesWithJsonschema(unittest.TestCase):
    """Our verdict and jsonschema's (Draft 2020-12, formats not asserted) agree on generated schemas and arguments.

    The one deliberate difference, kept out of the generated bounds: multipleOf reads numbers as they are written
    (19.99 is a multiple of 0.01), where jsonschema divides floats (19.99 / 0.01 = 1998.9999999999998: not a
    multiple). With multipleOf 1, 2, 3, 0.5 or 0.25, exact in binary, both agree; the keyword table pins the case
    where they differ.
    """

    def test_valid_and_invalid_alike_on_generated_schemas(self) -> None:
        verdicts = {True: 0, False: 0}

        @settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(property_schema=schemas(refs=True), value=VALUES, extra=st.dictionaries(KEYS, VALUES, max_size=2))
        def agree(property_schema: Any, value: Any, extra: dict[str, Any]) -> None:
            root = {"type": "object", "properties": {"x": property_schema}, **DEFS}
            args = {**extra, "x": value}
            compiled, problems = compile_schema(TOOL, root)
            self.assertEqual(problems, [], json.dumps(root))
            assert compiled is not None
            ours = check(compiled, args) is None
            theirs = jsonschema.Draft202012Validator(root).is_valid(args)
            self.assertEqual(
                ours, theirs, f"schema {json.dumps(root)}, arguments {json.dumps(args)}: {check(compiled, args)}"
            )
            verdicts[ours] += 1

        agree()
        # Both verdicts must be common, or the agreement would say little.
        self.assertGreater(min(verdicts.values()), 300, verdicts)

    def test_whole_schemas_at_the_top_level_too(self) -> None:
        @settings(max_examples=500, deadline=None)
        @given(schema=schemas(refs=False), args=st.dictionaries(KEYS, VALUES, max_size=3))
        def agree(schema: Any, args: dict[str, Any]) -> None:
            root = {**schema, "type": "object"} if isinstance(schema, dict) else {"type": "object", "allOf": [schema]}
            compiled, problems = compile_schema(TOOL, root)
            self.assertEqual(problems, [])
            assert compiled is not None
            self.assertEqual(
                check(compiled, args) is None,
                jsonschema.Draft202012Validator(root).is_valid(args),
                json.dumps([root, args]),
            )

        agree()


ANY_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**400), max_value=10**400),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
        st.sampled_from(list(KEYWORD_NAMES)),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(list(KEYWORD_NAMES)), st.text(max_size=3)), inner, max_size=4),
    ),
    max_leaves=12,
)


class NeverRaises(unittest.TestCase):
    """Whatever a task file holds and whatever an agent sends (NaN, Infinity, 400-digit numbers), the checker gives
    a verdict or a load problem: never an exception, which would be exit 4."""

    @settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        root=st.dictionaries(st.sampled_from(list(KEYWORD_NAMES)), ANY_JSON, max_size=4),
        args=st.dictionaries(KEYS, ANY_JSON, max_size=3),
    )
    def test_any_schema_and_any_arguments(self, root: dict[str, Any], args: dict[str, Any]) -> None:
        compiled, problems = compile_schema(TOOL, root)
        self.assertEqual(compiled is None, bool(problems))
        if compiled is not None:
            self.assertIn(type(check(compiled, args)), (str, type(None)))

    @settings(max_examples=400, deadline=None)
    @given(schema=schemas(refs=True), value=ANY_JSON)
    def test_supported_schemas_and_any_arguments(self, schema: Any, value: Any) -> None:
        compiled, problems = compile_schema(TOOL, {"properties": {"x": schema}, **DEFS})
        assert compiled is not None, problems
        self.assertIn(type(check(compiled, {"x": value})), (str, type(None)))

    def test_numbers_past_floats_and_not_numbers_at_all(self) -> None:
        inf, nan = float("inf"), float("nan")
        compiled, _ = compile_schema(TOOL, under_x({"multipleOf": 0.5, "minimum": 0}))
        assert compiled is not None
        self.assertEqual(check(compiled, {"x": inf}), f"{TOOL} x: expected a multiple of 0.5, got Infinity")
        self.assertEqual(check(compiled, {"x": nan}), f"{TOOL} x: expected at least 0, got NaN")
        self.assertIsNone(check(compiled, {"x": 10**400}))
        for bound in ({"minimum": inf}, {"maximum": -inf}, {"multipleOf": nan}, {"exclusiveMinimum": nan}):
            with self.subTest(bound=str(bound)):
                _, problems = compile_schema(TOOL, under_x(bound))
                self.assertEqual(len(problems), 1, problems)
                self.assertIn("expected a", problems[0][1])
        compiled, problems = compile_schema(TOOL, under_x({"maxLength": 10**400, "minItems": 1.0}))
        self.assertEqual(problems, [])
        assert compiled is not None
        self.assertIsNone(check(compiled, {"x": "abc"}))

    def test_a_long_chain_of_refs_is_a_problem_not_an_overflow(self) -> None:
        defs = {f"a{i}": {"$ref": f"#/$defs/a{i + 1}"} for i in range(3000)}
        defs["a3000"] = {"type": "string"}
        compiled, problems = compile_schema(TOOL, {"properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": defs})
        self.assertIsNone(compiled)
        self.assertEqual(
            problems, [("properties.x.$ref", "$ref, allOf, anyOf and oneOf lead more than 100 schemas deep from here")]
        )


if __name__ == "__main__":
    unittest.main()
