"""checkArgs "schema": each supported keyword passes and fails as JSON Schema says, anything else is refused at load,
and the verdicts agree with the jsonschema package's on generated schemas and arguments."""

from __future__ import annotations

import json
import unittest
import warnings
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.schema import ANNOTATIONS, KEYWORDS, check, compile_schema
from tests.support import TempDirTestCase, canonical_task_data, clean_env, run_cli

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
        under_x({"pattern": "^(a+)+$"}),
        "properties.x.pattern",
        "a pattern this checker will not run: it can match the same text in two ways under a repeat",
    ),
    (
        under_x({"patternProperties": {"^(\\w+\\s?)+$": {}}}),
        "properties.x.patternProperties.^(\\w+\\s?)+$",
        "a pattern this checker will not run",
    ),
    (
        under_x({"propertyNames": {"pattern": "^(a|a)*$"}}),
        "properties.x.propertyNames.pattern",
        "a pattern this checker will not run",
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


# Patterns that re may take an exponential time to fail on: the classic shapes, bounded repeats past what is written
# out, lookarounds, backreferences.
CATASTROPHIC = [
    r"^(a+)+$",
    r"(a|a)*$",
    r"(.*)*$",
    r"(a|aa)+$",
    r"^(\w+\s?)+$",
    r"^(([a-z])+.)+[A-Z]([a-z])+$",
    r"(x+x+)+y",
    r"(a*)*b",
    r"^([a-zA-Z]+)*$",
    r"^(a|a?)+$",
    r"^(a+)+?$",
    r"(\d+|\d+\.\d+)*$",
    r"^(\s*,?\s*\w+)*$",
    r"^(a|a){1,30}$",
    r"^(a{1,10}){1,10}$",
    r"(.*a){12}",
    r"^(?=(a+)+$)",
    r"^(a+)\1$",
    "^([\u0400-\u0450]x?|[\u0440-\u0460]y?)+$",  # two classes that share only characters no probe is
]
# Patterns tool schemas carry (identifiers, dates, e-mail addresses, URLs, versions, Pydantic's decimals and durations,
# base64), and those of this suite: each loads.
EVERYDAY = [
    r"^ast_[a-z0-9]+$",
    r"[0-9]",
    r"^n_",
    r"a|b",
    r"^[a-zA-Z0-9_-]{1,64}$",
    r"^\d{4}-\d{2}-\d{2}$",
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$",
    r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
    r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
    r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$",
    r"^[\w.+-]+@[\w-]+\.[\w.-]+$",
    r"^https?://[^\s/$.?#].[^\s]*$",
    r"^([a-z0-9]+(-[a-z0-9]+)*\.)+[a-z]{2,}$",
    r"^[a-z]+(?:[-_][a-z]+)*$",
    r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$",
    r"^[^\s]+(\s+[^\s]+)*$",
    r"^#?([a-fA-F0-9]{6}|[a-fA-F0-9]{3})$",
    r"^(\+\d{1,3})?\d{10}$",
    r"^(\d{1,3}\.){3}\d{1,3}$",
    r"^((25[0-5]|(2[0-4]|1\d|[1-9]|)\d)\.?\b){4}$",
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$",
    r"^(?!^[-+.]*$)[+-]?0*\d*\.?\d*$",
    r"^P(?!$)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+S)?)?$",
    r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
    r"(?i)^(red|green|blue)$",
    r"^(?!\s)(?!.*\s$).*$",
    r"^\$?\d+(\.\d{2})?$",
    r"^(\w|\d)+$",  # re reads \w|\d as one class: one way through
]


class Patterns(TempDirTestCase):
    def test_a_pattern_that_can_backtrack_exponentially_is_refused_at_load(self) -> None:
        for pattern in CATASTROPHIC:
            with self.subTest(pattern):
                compiled, problems = compile_schema(TOOL, under_x({"type": "string", "pattern": pattern}))
                self.assertIsNone(compiled)
                ((path, message),) = problems
                self.assertEqual(path, "properties.x.pattern")
                self.assertTrue(message.startswith("a pattern this checker will not run: "), message)

    def test_everyday_patterns_load(self) -> None:
        for pattern in EVERYDAY:
            with self.subTest(pattern):
                self.assertEqual(compile_schema(TOOL, under_x({"pattern": pattern}))[1], [])

    def test_a_pattern_too_intricate_to_tell_is_refused_not_waited_for(self) -> None:
        for pattern in ("((((((a{8}){8}){8}){8}){8}){8})", "a?" * 200 + "a" * 200):
            with self.subTest(pattern[:20]):
                _, problems = compile_schema(TOOL, under_x({"pattern": pattern}))
                self.assertIn("too intricate to tell that re matches it in bounded time", problems[0][1])

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet="()[]{}*+?|.^$\\-,0123aAbsdwW:=!<>P", max_size=16))
    def test_any_pattern_loads_or_is_one_problem(self, pattern: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # re's, of a "[[" it reads as it always has
            _, problems = compile_schema(TOOL, under_x({"pattern": pattern}))
        self.assertLessEqual(len(problems), 1)

    def test_a_task_file_with_one_is_refused_before_any_agent_is_asked(self) -> None:
        data = canonical_task_data()
        tool = next(tool for tool in data["tools"] if tool["name"] == "imageman.asset.search")
        tool["inputSchema"]["properties"]["query"]["pattern"] = "^(\\w+\\s?)+$"
        data["checkArgs"] = "schema"
        path = self.write_json("tasks.json", data)
        _, stderr, code = run_cli(env=clean_env(EVAL_TASKS=path, EVAL_AGENT_URL="http://127.0.0.1:9/run"))
        self.assertEqual(code, 2)
        self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertIn(f"{path}: tools[", stderr)
        self.assertIn(".inputSchema.properties.query.pattern: a pattern this checker will not run", stderr)


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


if __name__ == "__main__":
    unittest.main()


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
