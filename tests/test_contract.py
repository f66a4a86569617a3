"""The agent reply contract: which JSON objects are replies, and which are errors."""

from __future__ import annotations

import unittest
from typing import Any

from backends.contract import parse_reply, partial_reply
from harness.leaks import Secrets
from harness.records import BackendError, Reply, ToolCall

GET = {"name": "imageman.asset.get", "args": {"assetId": "a1"}}
LIST = {"name": "imageman.asset.list", "args": {"path": "/"}}

# (name, body, the Reply it parses to)
VALID: list[tuple[str, Any, Reply]] = [
    ("one toolCall", {"toolCall": GET}, Reply((ToolCall("imageman.asset.get", {"assetId": "a1"}),))),
    (
        "a toolCalls list keeps its order",
        {"toolCalls": [LIST, GET]},
        Reply((ToolCall("imageman.asset.list", {"path": "/"}), ToolCall("imageman.asset.get", {"assetId": "a1"}))),
    ),
    (
        "a toolCall repeating an entry of toolCalls is not counted twice",
        {"toolCall": GET, "toolCalls": [LIST, GET]},
        Reply((ToolCall("imageman.asset.list", {"path": "/"}), ToolCall("imageman.asset.get", {"assetId": "a1"}))),
    ),
    (
        "args as a JSON string (OpenAI style)",
        {"toolCall": {"name": "imageman.asset.get", "args": '{"assetId": "a1"}'}},
        Reply((ToolCall("imageman.asset.get", {"assetId": "a1"}),)),
    ),
    ("args left out are empty", {"toolCall": {"name": "ping"}}, Reply((ToolCall("ping", {}),))),
    ("an explicit null toolCall with text is an answer", {"toolCall": None, "text": "PNG."}, Reply(text="PNG.")),
    ("an explicit empty toolCalls with text is an answer", {"toolCalls": [], "text": "PNG."}, Reply(text="PNG.")),
    ("a refusal", {"refused": True, "text": "No."}, Reply(refused=True, text="No.", refusal_stated=True)),
    ("text alone is no call", {"text": "Which asset?"}, Reply(text="Which asset?")),
    (
        "text with a zero-width joiner is text",
        {"text": "\U0001f469\u200d\U0001f4bb"},
        Reply(text="\U0001f469\u200d\U0001f4bb"),
    ),
    ("a word that contains undefined is text", {"text": "undefined behaviour"}, Reply(text="undefined behaviour")),
    ("letters with combining marks are text", {"text": "e\u0301"}, Reply(text="e\u0301")),
    ("quoted words are text", {"text": '"No."'}, Reply(text='"No."')),
    ("unknown fields are ignored", {"text": "Hi", "traceId": "x"}, Reply(text="Hi")),
    (
        "the tokens the agent says it spent",
        {"text": "Hi", "usage": {"inputTokens": 1200, "outputTokens": 34}},
        Reply(text="Hi", usage=(1200, 34)),
    ),
    (
        "counts of 0 and of 2^53, the most a report adds exactly",
        {"text": "Hi", "usage": {"inputTokens": 0, "outputTokens": 2**53}},
        Reply(text="Hi", usage=(0, 2**53)),
    ),
    ("a null usage is no usage", {"text": "Hi", "usage": None}, Reply(text="Hi")),
    (
        "null optional fields count as absent",
        {"toolCall": GET, "refused": None, "text": None},
        Reply((ToolCall("imageman.asset.get", {"assetId": "a1"}),)),
    ),
]

FAILED = "reply:agent-error"
VALID += [
    (
        "calls made before the agent failed",
        {"toolCalls": [LIST, GET], "error": "model timed out"},
        Reply(
            (ToolCall("imageman.asset.list", {"path": "/"}), ToolCall("imageman.asset.get", {"assetId": "a1"})),
            error_code=FAILED,
            error="the agent failed: model timed out",
        ),
    ),
    ("an error alone", {"error": "boom"}, Reply(error_code=FAILED, error="the agent failed: boom")),
    (
        "an error beside blank text",
        {"toolCalls": [], "text": "", "error": " "},
        Reply(text="", error_code=FAILED, error="the agent failed, and said no more"),
    ),
    (
        "an error of invisible text",
        {"error": "\u200b"},
        Reply(error_code=FAILED, error="the agent failed, and said no more"),
    ),
    (
        "an error that says what a missing value prints as",
        {"error": "undefined"},
        Reply(error_code=FAILED, error="the agent failed, and said no more"),
    ),
    (
        "a long error, on one line and clipped",
        {"toolCall": None, "error": "line one\nline two " + "x" * 300},
        Reply(error_code=FAILED, error="the agent failed: line one line two " + "x" * 179 + "..."),
    ),
    ("a null error is no error", {"text": "Hi", "error": None}, Reply(text="Hi")),
]
BLANK = "a blank reply: no tool call, no refusal, no text"

# (name, body, error code, reason)
INVALID: list[tuple[str, Any, str, str]] = [
    ("a list", [GET], "reply:not-object", "expected a JSON object, got a list"),
    ("a string", "ok", "reply:not-object", 'expected a JSON object, got the string "ok"'),
    ("an empty object", {}, "reply:empty", "the reply holds none of toolCall, toolCalls, refused, text, error"),
    (
        "only unknown fields",
        {"status": "ok"},
        "reply:empty",
        "the reply holds none of toolCall, toolCalls, refused, text, error",
    ),
    ("empty text alone", {"text": ""}, "reply:empty", BLANK),
    ("an explicit null toolCall alone", {"toolCall": None}, "reply:empty", BLANK),
    ("an explicit empty toolCalls alone", {"toolCalls": []}, "reply:empty", BLANK),
    ("an empty toolCalls with empty text", {"toolCalls": [], "text": ""}, "reply:empty", BLANK),
    ("a null toolCall with blank text", {"toolCall": None, "text": "  "}, "reply:empty", BLANK),
    ("a null toolCall, not refused", {"toolCall": None, "refused": False}, "reply:empty", BLANK),
    ("blank text alone", {"text": " \n\t"}, "reply:empty", BLANK),
    ("not refused and nothing else", {"refused": False}, "reply:empty", BLANK),
    ("zero-width text alone", {"text": "\u200b\u200c\u200d\u2060\ufeff"}, "reply:empty", BLANK),
    ("NUL and other controls alone", {"text": "\x00 \x1b\u00ad\u202e"}, "reply:empty", BLANK),
    (
        "fillers and blank marks that render as nothing",
        {"text": "\u3164\u115f\u1160\uffa0\u2800\u034f\ufe0f\u180b\U000e0100"},
        "reply:empty",
        BLANK,
    ),
    ("a missing value printed by JavaScript", {"text": "undefined"}, "reply:empty", BLANK),
    ("a null printed as text", {"text": " null\n"}, "reply:empty", BLANK),
    ("a Python None printed as text", {"text": "None"}, "reply:empty", BLANK),
    ("combining marks on nothing", {"text": "\u0301\u0300 \u20dd"}, "reply:empty", BLANK),
    ("an empty string printed as JSON", {"text": '""'}, "reply:empty", BLANK),
    ("an empty string printed by Python's repr", {"text": "''"}, "reply:empty", BLANK),
    ("a nil printed by Go", {"text": "<nil>"}, "reply:empty", BLANK),
    (
        "every field null but toolCall, left out",
        {"toolCalls": None, "refused": None, "text": None},
        "reply:empty",
        BLANK,
    ),
    (
        "usage alone is no reply",
        {"usage": {"inputTokens": 1, "outputTokens": 1}},
        "reply:empty",
        "the reply holds none of toolCall, toolCalls, refused, text, error",
    ),
    (
        "usage as a number",
        {"text": "Hi", "usage": 12},
        "reply:bad-usage",
        "usage: expected an object with inputTokens and outputTokens, got a number",
    ),
    (
        "usage missing a count",
        {"text": "Hi", "usage": {"inputTokens": 12}},
        "reply:bad-usage",
        "usage.outputTokens: expected a whole number from 0 to 2^53, got null",
    ),
    (
        "usage with a negative count",
        {"text": "Hi", "usage": {"inputTokens": -1, "outputTokens": 2}},
        "reply:bad-usage",
        "usage.inputTokens: expected a whole number from 0 to 2^53, got -1",
    ),
    (
        "usage over 2^53, more than a report adds exactly",
        {"text": "Hi", "usage": {"inputTokens": 1, "outputTokens": 2**53 + 1}},
        "reply:bad-usage",
        "usage.outputTokens: expected a whole number from 0 to 2^53, got 9007199254740993",
    ),
    (
        "usage with a count that is not whole",
        {"text": "Hi", "usage": {"inputTokens": 1, "outputTokens": 2.5}},
        "reply:bad-usage",
        "usage.outputTokens: expected a whole number from 0 to 2^53, got a number",
    ),
    (
        "usage with a boolean count",
        {"text": "Hi", "usage": {"inputTokens": True, "outputTokens": 2}},
        "reply:bad-usage",
        "usage.inputTokens: expected a whole number from 0 to 2^53, got a boolean",
    ),
    (
        "refused as a string",
        {"refused": "yes"},
        "reply:bad-refused",
        'refused: expected a boolean, got the string "yes"',
    ),
    ("refused as a number", {"refused": 1}, "reply:bad-refused", "refused: expected a boolean, got a number"),
    (
        "error as an object",
        {"error": {"message": "boom"}},
        "reply:bad-error",
        "error: expected a string, got an object",
    ),
    ("text as an object", {"text": {"a": 1}}, "reply:bad-text", "text: expected a string, got an object"),
    (
        "toolCall without a name",
        {"toolCall": {"args": {}}},
        "reply:bad-call",
        "toolCall.name: expected a non-empty string, got null",
    ),
    (
        "toolCall as a string",
        {"toolCall": "imageman.asset.get"},
        "reply:bad-call",
        'toolCall: expected an object, got the string "imageman.asset.get"',
    ),
    ("toolCalls not a list", {"toolCalls": GET}, "reply:bad-call", "toolCalls: expected a list, got an object"),
    (
        "a bad entry in toolCalls",
        {"toolCalls": [GET, 3]},
        "reply:bad-call",
        "toolCalls[1]: expected an object, got a number",
    ),
    (
        "toolCall disagreeing with toolCalls",
        {"toolCall": GET, "toolCalls": [LIST]},
        "reply:bad-call",
        "toolCall is not one of toolCalls; send one list, or a toolCall that repeats an entry",
    ),
    (
        "args as a list",
        {"toolCall": {"name": "x", "args": [1]}},
        "reply:bad-args",
        "toolCall.args: expected an object, got a list",
    ),
    (
        "args as a string that is not JSON",
        {"toolCall": {"name": "x", "args": "{assetId: a1"}},
        "reply:bad-args",
        'toolCall.args: a string that is not JSON: "{assetId: a1"',
    ),
    (
        "args as a string nested past any parser",
        {"toolCall": {"name": "x", "args": "[" * 100_000}},
        "reply:bad-args",
        'toolCall.args: a string that is not JSON: "' + "[" * 77 + '..."',
    ),
    (
        "args as a JSON string of a list",
        {"toolCall": {"name": "x", "args": "[1, 2]"}},
        "reply:bad-args",
        "toolCall.args: expected an object, got a list",
    ),
]


class ParseReply(unittest.TestCase):
    def test_valid_bodies_parse_to_their_reply(self) -> None:
        for name, body, reply in VALID:
            with self.subTest(name):
                self.assertEqual(parse_reply(body), reply)

    def test_invalid_bodies_are_errors_with_a_code_and_reason(self) -> None:
        for name, body, code, reason in INVALID:
            with self.subTest(name):
                with self.assertRaises(BackendError) as caught:
                    parse_reply(body)
                self.assertEqual((caught.exception.code, caught.exception.reason), (code, reason))

    def test_the_agents_error_is_masked_before_it_is_clipped(self) -> None:
        hidden = Secrets({"sk-live-4f9a2c": "EVAL_AGENT_TOKEN"})
        reply = parse_reply({"toolCall": GET, "error": "401 from the model with key sk-live-4f9a2c"}, hidden=hidden)
        self.assertEqual(reply.error, "the agent failed: 401 from the model with key ***")

    def test_a_failed_exchanges_output_is_a_partial_reply_when_it_says_what_the_agent_did(self) -> None:
        for output, partial in [
            (b'{"toolCalls": [], "error": "boom"}', True),
            (b'{"text": "Half done.", "error": ""}', True),
            (b'{"error": "boom"}', False),  # nothing of what it did: the status says as much
            (b'{"toolCalls": [], "error": {"message": "boom"}}', False),
            (b'{"toolCalls": []}', False),
            (b"<html>500</html>", False),
            (b'[{"error": "boom"}]', False),
            (b"\xff", False),
        ]:
            with self.subTest(output):
                self.assertEqual(partial_reply(output) is not None, partial)


if __name__ == "__main__":
    unittest.main()
