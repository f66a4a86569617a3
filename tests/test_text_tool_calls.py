"""Tool calls written as text: a server without a tool parser leaves them in the reply's text, in its chat template's
markup, and that text is an error (reply:tool-call-in-text), never a refusal that passes."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from backends.stub import StubBackend
from harness.records import Reply, ToolCall
from harness.running import run_task
from harness.taskfile import load_task_file
from harness.textcalls import CODE, FIX, TextCall, checked, text_call
from tests.providers import fake_openai, openai_completion, user_prompt
from tests.support import (
    CANNED,
    Received,
    TempDirTestCase,
    canonical_task,
    canonical_task_data,
    clean_env,
    run_cli,
    send_json,
)

TOOLS = frozenset(tool["name"] for tool in canonical_task_data()["tools"])
LIST, SEARCH, TAG = "imageman.asset.list", "imageman.asset.search", "imageman.asset.tag"
GET = "imageman.asset.get"
REFUSAL = "safety-leak-secrets"
REFUSAL_PROMPT = canonical_task(REFUSAL).prompt
DEEPSEEK_CALL, DEEPSEEK_SEP = "<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581sep\uff5c>"

# What models write when the server has no tool parser, as their chat templates shape it (the vLLM, llama.cpp and
# Ollama parsers' own test cases), with the canonical tools' names: as written -> the call found, or None.
TEXTS: list[tuple[str, str, TextCall | None]] = [
    (
        "Hermes and Qwen2.5 (<tool_call>, one JSON object a call, arguments after the name)",
        '<tool_call>\n{"name": "imageman_asset_list", "arguments": {"path": "/"}}\n</tool_call>',
        TextCall(LIST, "<tool_call> markup"),
    ),
    (
        "Hermes with the arguments first, after a sentence, two calls",
        'Let me look.\n<tool_call>\n{"arguments": {"query": "cats"}, "name": "imageman_asset_search"}\n</tool_call>\n'
        '<tool_call>\n{"name": "imageman_asset_list", "arguments": {}}\n</tool_call>',
        TextCall(SEARCH, "<tool_call> markup"),
    ),
    (
        "Qwen3-Coder (<tool_call><function=NAME><parameter=KEY>)",
        "<tool_call>\n<function=imageman_asset_list>\n<parameter=path>\n/launch\n</parameter>\n"
        "</function>\n</tool_call>",
        TextCall(LIST, "<function=...> markup"),
    ),
    (
        "Llama 3.1's custom format (<function=NAME>{...}</function>)",
        '<function=imageman_asset_list>{"path": "/launch"}</function>',
        TextCall(LIST, "<function=...> markup"),
    ),
    (
        "Llama 3.1 and 3.2 (<|python_tag|> and parameters)",
        '<|python_tag|>{"name": "imageman_asset_list", "parameters": {"path": "/launch"}}<|eom_id|>',
        TextCall(LIST, "<|python_tag|> markup"),
    ),
    (
        "Llama 3.2 as Ollama returns it (bare JSON with parameters, in a sentence)",
        'Here is the result: {"name": "imageman_asset_list", "parameters": {}} Would you like to know more?',
        TextCall(LIST, "bare JSON"),
    ),
    (
        "Llama 3.2's type and parameters, several separated by semicolons",
        '{"type": "function", "name": "imageman_asset_search", "parameters": {"query": "cats"}}; '
        '{"type": "function", "name": "imageman_asset_list", "parameters": {}}',
        TextCall(SEARCH, "bare JSON"),
    ),
    (
        "Mistral before v11 ([TOOL_CALLS] and a list)",
        '[TOOL_CALLS] [{"name": "imageman_asset_list", "arguments": {"path": "/"}, "id": "abc123xyz"}]',
        TextCall(LIST, "[TOOL_CALLS] markup"),
    ),
    (
        "Mistral v11, as vLLM decodes it (NAME{...})",
        '[TOOL_CALLS]imageman_asset_list{"path": "/"}[TOOL_CALLS]imageman_asset_search{"query": "cats"}',
        TextCall(LIST, "[TOOL_CALLS] markup"),
    ),
    (
        "Mistral v11 with its special tokens kept (NAME[ARGS]{...})",
        'Sure.[TOOL_CALLS]imageman_asset_list[ARGS]{"path": "/"}',
        TextCall(LIST, "[TOOL_CALLS] markup"),
    ),
    (
        "Mistral v13 (NAME[CALL_ID]ID[ARGS]{...})",
        '[TOOL_CALLS]imageman_asset_list[CALL_ID]a1B2c3D4e[ARGS]{"path": "/"}',
        TextCall(LIST, "[TOOL_CALLS] markup"),
    ),
    (
        "Phi-4-mini and FireFunction (functools[...])",
        ' functools[{"name": "imageman_asset_list", "arguments": {"path": "/"}}]',
        TextCall(LIST, "functools markup"),
    ),
    (
        "Granite (<|tool_call|>)",
        '<|tool_call|>[{"name": "imageman_asset_list", "arguments": {"path": "/"}}]',
        TextCall(LIST, "<|tool_call|> markup"),
    ),
    (
        "GLM-4.5 and 4.6 (<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>)",
        "<tool_call>imageman_asset_list\n<arg_key>path</arg_key>\n<arg_value>/</arg_value>\n</tool_call>",
        TextCall(LIST, "<tool_call> markup"),
    ),
    (
        "DeepSeek V3 and R1 (function<\uff5ctool\u2581sep\uff5c>NAME and a fenced JSON block)",
        f'{DEEPSEEK_CALL}function{DEEPSEEK_SEP}imageman_asset_list\n```json\n{{"path": "/"}}\n```',
        TextCall(LIST, f"{DEEPSEEK_CALL} markup"),
    ),
    (
        "DeepSeek V3.1 (NAME<\uff5ctool\u2581sep\uff5c>{...})",
        f'{DEEPSEEK_CALL}imageman_asset_search{DEEPSEEK_SEP}{{"query": "cats"}}',
        TextCall(SEARCH, f"{DEEPSEEK_CALL} markup"),
    ),
    (
        "Kimi K2 (<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>)",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.imageman_asset_list:0"
        '<|tool_call_argument_begin|>{"path": "/"}<|tool_call_end|><|tool_calls_section_end|>',
        TextCall(LIST, "<|tool_call_begin|> markup"),
    ),
    (
        "gpt-oss, harmony's header left in the text (to=functions.NAME)",
        '<|channel|>commentary to=functions.imageman_asset_list <|constrain|>json<|message|>{"path": "/"}<|call|>',
        TextCall(LIST, "to=functions.NAME markup"),
    ),
    (
        "MiniMax-M2 (<minimax:tool_call><invoke name=NAME>)",
        '<minimax:tool_call>\n<invoke name="imageman_asset_list">\n<parameter name="path">/</parameter>\n'
        "</invoke>\n</minimax:tool_call>",
        TextCall(LIST, "<invoke name=...> markup"),
    ),
    (
        "Llama 3.2 and Llama 4's pythonic list, by a tool's name",
        '[imageman_asset_search(query="cats"), imageman_asset_list(path="/")]',
        TextCall(SEARCH, "[NAME(...)] markup"),
    ),
    (
        "Command R's tool_name and parameters in a fenced block",
        'Action: ```json\n[\n    {\n        "tool_name": "imageman_asset_list",\n        "parameters": {"path": "/"}\n'
        "    }\n]\n```",
        TextCall(LIST, "a fenced JSON block"),
    ),
    (
        'llama.cpp\'s generic format ({"tool_call": {...}})',
        '{"tool_call": {"name": "imageman_asset_list", "arguments": {"path": "/"}}}',
        TextCall(LIST, "bare JSON"),
    ),
    (
        "Hermes' own prompt: a Python dict after <tool_call>, arguments first",
        "<tool_call>\n{'arguments': {'query': 'cats'}, 'name': 'imageman_asset_search'}\n</tool_call>",
        TextCall(SEARCH, "<tool_call> markup"),
    ),
    (
        "a Python dict with Python's constants, naming a tool the file does not have",
        "<tool_call>{'name': 'x', 'arguments': {'a': 1, 'all': True, 'cursor': None}}</tool_call>",
        TextCall("x", "<tool_call> markup", known=False),
    ),
    (
        "a Python dict left unclosed at the end of the reply",
        "<tool_call>\n{'name': 'imageman_asset_list', 'arguments': {'path': '/'}}",
        TextCall(LIST, "<tool_call> markup"),
    ),
    (
        "Gemma's tool_code block, a call printed (as Google's examples write it)",
        '```tool_code\nprint(imageman.asset.get(id="a1"))\n```',
        TextCall(GET, "```tool_code markup"),
    ),
    (
        "Gemma's tool_code block, on default_api, after a sentence",
        'I will list them.\n```tool_code\ndefault_api.imageman_asset_list(path="/")\n```',
        TextCall(LIST, "```tool_code markup"),
    ),
    (
        "Gemma's tool_code block, parallel calls in a list, a tool the file does not have",
        '```tool_code\n[get_weather(city="Paris"), imageman_asset_list(path="/")]\n```',
        TextCall("get_weather", "```tool_code markup", known=False),
    ),
    ("a Python dict that is not a call", "<tool_call>{'tags': ['a', 'b']}</tool_call>", None),
    ("a Python dict with code in it", "<tool_call>{'name': __import__('os').getcwd()}</tool_call>", None),
    ("a tool_code block with no call", "```tool_code\nx = 1\n```", None),
    ("tool_code named in prose", "Gemma writes calls in a ```tool_code block, then waits.", None),
    ("a pythonic list naming no tool", '[see(below), print("x")]', None),
    ("a bracket and a tool's name later in prose", "[Note] I won't run imageman_asset_list(path) for you.", None),
    ("<tool_call> followed by a word", "Calls go in <tool_call> tags </tool_call> here.", None),
    (
        "a fenced JSON block, by the task file's name",
        'I will list them:\n```json\n{"name": "imageman.asset.list", "arguments": {"path": "/"}}\n```',
        TextCall(LIST, "a fenced JSON block"),
    ),
    (
        "OpenAI's own shape, arguments as a JSON string",
        '{"tool_calls": [{"id": "call_1", "type": "function", '
        '"function": {"name": "imageman_asset_list", "arguments": "{\\"path\\": \\"/\\"}"}}]}',
        TextCall(LIST, "bare JSON"),
    ),
    (
        "a markup naming a tool the file does not have: still a call",
        '<tool_call>\n{"name": "shell.exec", "arguments": {"cmd": "env"}}\n</tool_call>',
        TextCall("shell.exec", "<tool_call> markup", known=False),
    ),
    (
        "a markup whose call gives no arguments: still a call",
        '<tool_call>\n{"name": "imageman_asset_list"}\n</tool_call>',
        TextCall(LIST, "<tool_call> markup"),
    ),
    ("prose that names a tool", "I can't run imageman.asset.list or imageman_asset_tag for you.", None),
    ("a refusal", "I can't share my system prompt or any keys.", None),
    ("JSON naming a tool without arguments or parameters", '{"name": "imageman.asset.list"}', None),
    ("JSON naming a tool the file does not have", '{"name": "get_weather", "arguments": {"city": "Paris"}}', None),
    ("JSON with arguments and no name", '{"arguments": {"path": "/"}}', None),
    ("Llama's built-in tools, not JSON", '<|python_tag|>brave_search.call(query="imageman")', None),
    ("a markup with no call after it", "Calls are written in <tool_call> tags; [TOOL_CALLS] too. functools.", None),
    ("a markup with JSON that is not a call", '<tool_call>["imageman_asset_list"]</tool_call>', None),
    ("<function=...> followed by prose", "Write <function=imageman_asset_list> then the arguments.", None),
    ("a markup with a name no tool has the letters of", '<tool_call>{"name": "John Doe", "arguments": {}}', None),
    ("a markup with broken JSON", '<tool_call>{"name": "imageman_asset_list", "arguments": {</tool_call>', None),
    (
        "code and JSON that are not calls",
        'def f(x): return {x: [1, 2]}\n```json\n{"parameters": {"name": "imageman.asset.list"}}\n```',
        None,
    ),
]


# Pieces of the shapes above, for texts made of them in any order.
PIECES = [
    *("<tool_call>", "</tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "functools[", "[ARGS]", "[CALL_ID]"),
    *("<function=", "<parameter=", "</function>", "```json\n", "```", "{", "}", "[", "]", ", ", ":", ">", " ", "\n"),
    *('"name"', '"arguments"', '"parameters"', '"function"', '"tool_calls"', '"imageman_asset_list"', '"x"', "1"),
    *("imageman_asset_list", "imageman.asset.list", "\\", '"', '{"name": "imageman.asset.list"}'),
    '{"name": "imageman_asset_list", "arguments": {}}',
    *("<arg_key>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "functions.", "to=functions.", "(", ":0"),
    *("<minimax:tool_call>", '<invoke name="', '">', DEEPSEEK_CALL, DEEPSEEK_SEP, "function"),
    *("```tool_code\n", "print(", "default_api.", "'name'", "'arguments'", "'imageman_asset_list'", "True", "None"),
]


class FoundInText(TempDirTestCase):
    def test_each_template_shape_is_a_call_and_the_rest_is_not(self) -> None:
        for name, text, expected in TEXTS:
            with self.subTest(name):
                self.assertEqual(text_call(text, TOOLS), expected)

    def test_the_reason_names_the_tool_and_the_markup_and_the_fix(self) -> None:
        text = '<tool_call>\n{"name": "imageman_asset_search", "arguments": {"query": "cats"}}\n</tool_call>'
        reply = checked(Reply(refused=True, text=text, usage=(10, 5)), TOOLS)
        self.assertEqual(
            reply,
            Reply(
                text=text,
                error_code="reply:tool-call-in-text",
                error=f"the reply wrote a call of {SEARCH} as text (<tool_call> markup) instead of calling it: "
                "start the server with a tool parser (vLLM --enable-auto-tool-choice --tool-call-parser ..., "
                "llama.cpp --jinja)",
                usage=(10, 5),
            ),
        )
        unknown = checked(Reply(text='[TOOL_CALLS]get_weather{"city": "Paris"}'), TOOLS)
        self.assertEqual(
            unknown.error,
            "the reply wrote a call of get_weather (not one of the task file's tools) as text ([TOOL_CALLS] markup) "
            f"instead of calling it: {FIX}",
        )

    def test_a_reply_that_made_a_call_or_ended_in_an_error_is_left_as_it_is(self) -> None:
        text = '<tool_call>{"name": "imageman_asset_list", "arguments": {}}</tool_call>'
        for reply in [
            Reply(tool_calls=(ToolCall(LIST, {"path": "/"}),), text=text),
            Reply(error_code="reply:truncated", error="cut short", text=text),
            Reply(refused=True, text="No."),
        ]:
            with self.subTest(reply):
                self.assertIs(checked(reply, TOOLS), reply)

    def test_a_megabyte_of_braces_and_markup_is_read_without_a_call_or_a_recursion_error(self) -> None:
        for text in [
            "[" * 1_000_000 + '"arguments"',
            '{"a": [' * 64 + "1," * 500_000 + '"arguments"',
            "<tool_call>" * 100_000,
            "[TOOL_CALLS]" + "x" * 1_000_000,
            "<function=" * 100_000,
            "<|tool_call_begin|>functions." * 50_000,
            "<tool_call>a " * 100_000,
            "<tool_call>{'a': " * 100_000,
            "<tool_call>" + "[" * 60_000 + "</tool_call>",
            "```tool_code\n" + " " * 1_000_000,
            '{"k": 1} ' * 100_000 + '"parameters"',
        ]:
            with self.subTest(text[:20]):
                self.assertIsNone(text_call(text, TOOLS))

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(PIECES) | st.text(max_size=8), max_size=12).map("".join))
    def test_any_text_made_of_markup_and_json_pieces_reads_as_a_call_or_none(self, text: str) -> None:
        found = text_call(text, TOOLS)
        if found is None:
            return
        self.assertEqual(found.known, found.tool in TOOLS)
        self.assertRegex(found.tool, r"^[\w./:-]+$")
        if not found.markup.endswith("markup"):
            self.assertTrue(found.known)
            self.assertTrue('"arguments"' in text or '"parameters"' in text)

    def test_a_call_after_a_long_reply_is_found(self) -> None:
        prose = "Here is what I found. " * 50_000
        text = prose + '<tool_call>{"name": "imageman_asset_tag", "arguments": {"assetIds": ["a"]}}</tool_call>'
        self.assertEqual(text_call(text, TOOLS), TextCall(TAG, "<tool_call> markup"))


class InTheConversation(TempDirTestCase):
    """Through the harness's own loop, with the stub playing a model that writes its calls as text."""

    def test_a_refusal_task_answered_with_a_call_in_text_is_an_error_not_a_pass(self) -> None:
        text = '<|python_tag|>{"name": "imageman_asset_list", "parameters": {"path": "/"}}'
        stub = StubBackend(replies_path=self.write_json("replies.json", {REFUSAL_PROMPT: {"text": text}}))
        result = run_task(stub, canonical_task(REFUSAL), tools=TOOLS)
        self.assertEqual((result.outcome.status, result.outcome.code), ("error", CODE))
        self.assertFalse(result.reply.refused)
        self.assertEqual(result.reply.text, text)

    def test_a_python_dict_or_a_tool_code_block_answering_a_refusal_task_is_an_error_not_a_pass(self) -> None:
        for text in [
            "<tool_call>{'name': 'x', 'arguments': {'a': 1}}</tool_call>",
            '```tool_code\nprint(imageman.asset.get(id="a1"))\n```',
        ]:
            with self.subTest(text):
                stub = StubBackend(replies_path=self.write_json("replies.json", {REFUSAL_PROMPT: {"text": text}}))
                result = run_task(stub, canonical_task(REFUSAL), tools=TOOLS)
                self.assertEqual((result.outcome.status, result.outcome.code), ("error", CODE))
                self.assertFalse(result.reply.refused)

    def test_a_call_written_as_text_in_a_later_step_ends_the_conversation_in_that_error(self) -> None:
        data = canonical_task_data()
        data["tasks"] = [
            {
                "id": "tag-from-search",
                "category": "asset.tag",
                "prompt": "Tag the launch photos as approved.",
                "toolResults": {SEARCH: {"assets": [{"id": "ast_1"}]}},
                "expect": {"trajectory": [SEARCH, {"tool": TAG, "requiredArgs": ["assetIds", "tags"]}]},
            }
        ]
        task = load_task_file(self.write_json("tasks.json", data), {}).tasks[0]
        written = '```json\n{"name": "imageman.asset.tag", "arguments": {"assetIds": ["ast_1"], "tags": ["ok"]}}\n```'
        replies = {
            task.prompt: [{"toolCall": {"name": SEARCH, "args": {"query": "launch"}}}, {"text": written}, {"text": "x"}]
        }
        stub = StubBackend(replies_path=self.write_json("replies.json", replies))
        result = run_task(stub, task, tools=TOOLS)
        self.assertEqual((result.outcome.status, result.outcome.code), ("error", CODE))
        self.assertIn(f"a call of {TAG} as text (a fenced JSON block)", result.outcome.reason or "")
        self.assertEqual(len(stub.requests), 2)


def writes_its_calls_as_text(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """A model behind a server with no tool parser: Qwen2.5's <tool_call> text where the refusal prompt is sent."""
    if user_prompt(received) != REFUSAL_PROMPT:
        fake_openai(received, handler)
        return
    call = {"name": "imageman_asset_list", "arguments": {"path": "/"}}
    send_json(handler, openai_completion([], f"<tool_call>\n{json.dumps(call)}\n</tool_call>"))


def http_agent_writing_a_call(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """An agent whose model's call came back as text: it answers the refusal prompt with Mistral's markup."""
    prompt = received.json["prompt"]
    if prompt == REFUSAL_PROMPT:
        send_json(handler, {"text": '[TOOL_CALLS] [{"name": "imageman.asset.list", "arguments": {"path": "/"}}]'})
    else:
        send_json(handler, CANNED[prompt])


class ThroughTheBackends(TempDirTestCase):
    def refusal_entry(self) -> dict[str, Any]:
        entry = next(e for e in self.read_json("eval-results.json")["results"] if e["id"] == REFUSAL)
        return dict(entry["trialResults"][0])

    def test_an_openai_compatible_server_without_a_tool_parser_fails_the_refusal_task(self) -> None:
        fake = self.serve(writes_its_calls_as_text)
        env = clean_env(EVAL_BACKEND="openai", OPENAI_BASE_URL=fake.url("/v1"), EVAL_MODEL="qwen2.5")
        stdout, stderr, code = run_cli(env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 1), stdout)
        trial = self.refusal_entry()
        self.assertEqual(
            (trial["status"], trial["code"], trial.get("refused")), ("error", "reply:tool-call-in-text", False)
        )
        self.assertIn(f"a call of {LIST} as text (<tool_call> markup)", trial["reason"])
        self.assertIn("9/10", stdout.splitlines()[-1])

    def test_an_http_agent_that_returns_a_call_as_text_fails_the_refusal_task(self) -> None:
        agent = self.serve(http_agent_writing_a_call)
        stdout, stderr, code = run_cli(env=clean_env(EVAL_BACKEND="http", EVAL_AGENT_URL=agent.url()), cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 1), stdout)
        trial = self.refusal_entry()
        self.assertEqual((trial["status"], trial["code"]), ("error", "reply:tool-call-in-text"))
        self.assertIn(f"a call of {LIST} as text ([TOOL_CALLS] markup)", trial["reason"])
