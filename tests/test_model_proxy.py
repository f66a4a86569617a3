"""The model proxy: an in-app agent's own model client (the official SDKs, as real clients) pointed at its trial's base
URL on the run's proxy, against loopback fakes of the APIs that answer in each API's shape, streams included; what the
run records of its calls; its key kept out of every output; and bad input bounded."""

from __future__ import annotations

import gzip
import json
import os
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from unittest import mock

import anthropic
import openai

from harness.serving.models import ModelProxy, ProxiedTrial
from tests.providers import anthropic_message, conversation_fake, openai_completion
from tests.support import (
    CANNED,
    PROXY_VARIABLES,
    LoopbackProxy,
    Received,
    Respond,
    TempDirTestCase,
    canonical_task_data,
    clean_env,
    run_cli,
    send_json,
)
from tests.test_docs import CAREFUL, playing
from tests.test_frameworks import example, require
from tests.test_served_tools import WORLD_TASKS

OPENAI_KEY = "sk-proxied-openai-key-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-proxied-key-0123456789abcdef"
GOOGLE_KEY = "AIza-proxied-header-key-0123456789"
QUERY_KEY = "AIza-proxied-query-key-9876543210"
# A command agent whose model client reads its base URL from the environment, as an agent in eval mode does.
COMMAND_AGENT = """
import json, os, sys
import openai
body = json.load(sys.stdin)
client = openai.OpenAI(base_url=os.environ["EVAL_MODEL_BASE_URL"], max_retries=0, timeout=10)
client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": body["prompt"]}])
print(json.dumps({"toolCall": {"name": "imageman.asset.search", "args": {"tags": ["summer-campaign-2026"]}}}))
"""
WAIT = 10.0  # seconds: every wait in these tests is bounded by it


def send_events(handler: BaseHTTPRequestHandler, events: Iterator[bytes]) -> None:
    """A server-sent event stream, each event written (chunked) and flushed as it is made."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    try:
        for event in events:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
    except OSError:
        handler.close_connection = True


def sse(data: Any, event: str | None = None) -> bytes:
    return (f"event: {event}\n" if event else "").encode() + b"data: " + json.dumps(data).encode() + b"\n\n"


def chat_chunks(release: threading.Event | None = None) -> Iterator[bytes]:
    """Chat Completions' stream: deltas, then (stream_options.include_usage) a last chunk with no choices and the
    usage, then [DONE]."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764480000, "model": "fake-model"}
    yield sse(
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": None}]}
    )
    if release is not None:
        release.wait(WAIT)
    yield sse({**base, "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": None}]})
    yield sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    yield sse({**base, "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}})
    yield b"data: [DONE]\n\n"


def responses_object(text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1764480000,
        "status": status,
        "model": "fake-model",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 21,
            "output_tokens": 8,
            "total_tokens": 29,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def responses_events() -> Iterator[bytes]:
    created = {**responses_object(""), "status": "in_progress", "output": [], "usage": None}
    yield sse({"type": "response.created", "sequence_number": 0, "response": created}, "response.created")
    delta = {
        "type": "response.output_text.delta",
        "sequence_number": 1,
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": "Hello",
        "logprobs": [],
    }
    yield sse(delta, "response.output_text.delta")
    completed = {"type": "response.completed", "sequence_number": 2, "response": responses_object("Hello")}
    yield sse(completed, "response.completed")


def anthropic_events() -> Iterator[bytes]:
    """Messages' stream: message_start (the input tokens), a text block, message_delta (the output tokens so far), and
    message_stop."""
    start = {**anthropic_message([], None), "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": 30, "output_tokens": 1}
    yield sse({"type": "message_start", "message": start}, "message_start")
    yield sse(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        "content_block_start",
    )
    yield sse(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}},
        "content_block_delta",
    )
    yield sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
    yield sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 9},
        },
        "message_delta",
    )
    yield sse({"type": "message_stop"}, "message_stop")


def gemini_answer() -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hello"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 14, "candidatesTokenCount": 6, "totalTokenCount": 20},
        "modelVersion": "gemini-fake",
    }


class FakeApis:
    """The four APIs on one loopback server, routed by path, streaming when asked to."""

    def __init__(self) -> None:
        self.release: threading.Event | None = None  # a stream's second event waits on it, when set

    def __call__(self, received: Received, handler: BaseHTTPRequestHandler) -> None:
        path = received.path.partition("?")[0]
        body = received.json if received.body else {}
        streamed = body.get("stream") is True
        if path.endswith("/chat/completions"):
            if streamed:
                send_events(handler, chat_chunks(self.release))
            else:
                send_json(handler, openai_completion([], "Hello"))
        elif path.endswith("/responses"):
            if streamed:
                send_events(handler, responses_events())
            else:
                send_json(handler, responses_object("Hello"))
        elif path.endswith("/messages"):
            if streamed:
                send_events(handler, anthropic_events())
            else:
                send_json(handler, anthropic_message([], "Hello"))
        elif path.endswith(":generateContent"):
            send_json(handler, gemini_answer())
        elif path.endswith(":streamGenerateContent"):  # with alt=sse, each chunk a GenerateContentResponse
            first = {**gemini_answer(), "usageMetadata": {"promptTokenCount": 14, "candidatesTokenCount": 2}}
            send_events(handler, iter([sse(first), sse(gemini_answer())]))
        else:
            send_json(handler, {"error": {"message": "not found"}}, 404)


class SdkClientsThroughTheProxy(TempDirTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.apis = FakeApis()
        self.upstream = self.serve(self.apis)
        self.proxy = ModelProxy(self.upstream.url("/v1"))
        self.addCleanup(self.proxy.close)
        self.trial = self.proxy.trial()

    def openai_client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.trial.base_url, api_key=OPENAI_KEY, max_retries=0, timeout=WAIT)

    def upstream_trial(self, respond: Respond, path: str = "/v1") -> ProxiedTrial:
        """A trial of a proxy of its own, in front of an upstream that answers as respond does."""
        proxy = ModelProxy(self.serve(respond).url(path))
        self.addCleanup(proxy.close)
        return proxy.trial()

    def test_openai_chat_completions_are_forwarded_and_recorded_with_their_tokens(self) -> None:
        completion = self.openai_client().chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}]
        )
        self.assertEqual(completion.choices[0].message.content, "Hello")
        [received] = self.upstream.received
        self.assertEqual(received.path, "/v1/chat/completions")
        self.assertEqual({k.lower(): v for k, v in received.headers.items()}["authorization"], f"Bearer {OPENAI_KEY}")
        [call] = self.trial.calls()
        self.assertEqual((call.form, call.model, call.status), ("openai-chat", "fake-model", 200))
        self.assertEqual((call.input_tokens, call.output_tokens, call.error), (120, 30, None))
        self.assertIn(OPENAI_KEY, self.trial.secrets())

    def test_a_streamed_chat_completion_is_passed_on_as_it_comes_and_its_last_chunk_gives_the_tokens(self) -> None:
        self.apis.release = threading.Event()
        stream = self.openai_client().chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = iter(stream)
        first = next(chunks)  # the fake sends the rest only once this is here: a proxy that buffered would hold it
        self.apis.release.set()
        rest = list(chunks)
        self.assertEqual(first.choices[0].delta.content, "Hel")
        self.assertEqual(rest[-1].usage.prompt_tokens, 12)
        [call] = self.wait_for_calls(1)
        self.assertEqual((call.form, call.input_tokens, call.output_tokens, call.error), ("openai-chat", 12, 5, None))

    def test_openai_responses_streamed_and_not_are_recorded_with_their_tokens(self) -> None:
        client = self.openai_client()
        response = client.responses.create(model="fake-model", input="hi")
        self.assertEqual(response.output_text, "Hello")
        events = list(client.responses.create(model="fake-model", input="hi", stream=True))
        self.assertEqual(events[-1].type, "response.completed")
        calls = self.wait_for_calls(2)
        self.assertEqual([(c.form, c.input_tokens, c.output_tokens) for c in calls], [("openai-responses", 21, 8)] * 2)

    def test_anthropic_messages_streamed_and_not_are_recorded_with_their_tokens(self) -> None:
        client = anthropic.Anthropic(base_url=self.trial.base_url, api_key=ANTHROPIC_KEY, max_retries=0, timeout=WAIT)
        message = client.messages.create(
            model="fake-model", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
        self.assertEqual(message.content[0].text, "Hello")
        with client.messages.stream(
            model="fake-model", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            self.assertEqual(stream.get_final_text(), "Hello")
        calls = self.wait_for_calls(2)
        self.assertEqual([(c.form, c.input_tokens, c.output_tokens) for c in calls], [
            ("anthropic-messages", 200, 40),
            ("anthropic-messages", 30, 9),
        ])  # fmt: skip
        self.assertIn(ANTHROPIC_KEY, " ".join(self.upstream.received[0].headers.values()))

    def test_an_anthropic_stream_s_cached_input_counts_though_its_last_event_says_only_the_uncached(self) -> None:
        def cached(received: Received, handler: BaseHTTPRequestHandler) -> None:
            def events() -> Iterator[bytes]:
                for event in anthropic_events():
                    if b'"message_start"' in event:  # the prompt mostly read from the cache
                        start = json.loads(event.split(b"data: ")[1])
                        start["message"]["usage"].update(cache_read_input_tokens=4000, cache_creation_input_tokens=0)
                        event = sse(start, "message_start")
                    elif b'"message_delta"' in event:  # which fields of its usage it says is its own
                        delta = json.loads(event.split(b"data: ")[1])
                        delta["usage"] = {"input_tokens": 30, "output_tokens": 9}
                        event = sse(delta, "message_delta")
                    yield event

            send_events(handler, events())

        trial = self.upstream_trial(cached)
        client = anthropic.Anthropic(base_url=trial.base_url, api_key=ANTHROPIC_KEY, max_retries=0, timeout=WAIT)
        messages: Any = [{"role": "user", "content": "hi"}]
        with client.messages.stream(model="fake-model", max_tokens=100, messages=messages) as stream:
            usage = stream.get_final_message().usage
        self.assertEqual((usage.input_tokens, usage.cache_read_input_tokens), (30, 4000))  # as the SDK adds it up
        [call] = trial.calls()
        self.assertEqual((call.input_tokens, call.output_tokens), (4030, 9))

    def test_gemini_generate_content_keeps_its_key_query_and_is_recorded(self) -> None:
        url = f"{self.trial.base_url}/models/gemini-fake:generateContent?key={QUERY_KEY}"
        request = urllib.request.Request(
            url, b'{"contents": []}', {"Content-Type": "application/json", "x-goog-api-key": GOOGLE_KEY}
        )
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            self.assertEqual(json.load(response)["usageMetadata"]["promptTokenCount"], 14)
        self.assertEqual(self.upstream.received[0].path, f"/v1/models/gemini-fake:generateContent?key={QUERY_KEY}")
        [call] = self.trial.calls()
        self.assertEqual(
            (call.form, call.model, call.input_tokens, call.output_tokens), ("gemini", "gemini-fake", 14, 6)
        )
        self.assertTrue({GOOGLE_KEY, QUERY_KEY} <= set(self.trial.secrets()))

    def test_a_gemini_answer_s_tool_use_prompt_tokens_count_as_input(self) -> None:
        grounded = {
            **gemini_answer(),
            "usageMetadata": {
                "promptTokenCount": 14,
                "candidatesTokenCount": 6,
                "toolUsePromptTokenCount": 300,  # what its google_search read: billed as input
                "thoughtsTokenCount": 10,
                "totalTokenCount": 330,
            },
        }
        trial = self.upstream_trial(lambda received, handler: send_json(handler, grounded), "/v1beta")
        request = urllib.request.Request(f"{trial.base_url}/models/gemini-fake:generateContent", b'{"contents": []}')
        urllib.request.urlopen(request, timeout=WAIT).close()
        [call] = trial.calls()
        self.assertEqual((call.input_tokens, call.output_tokens), (314, 16))

    def test_the_google_genai_sdk_streamed_and_not_is_recorded_with_its_tokens(self) -> None:
        from google import genai

        client = genai.Client(api_key=GOOGLE_KEY, http_options={"base_url": self.trial.base_url, "timeout": 10_000})
        self.assertEqual(client.models.generate_content(model="gemini-fake", contents="hi").text, "Hello")
        chunks = list(client.models.generate_content_stream(model="gemini-fake", contents="hi"))
        self.assertEqual(chunks[-1].usage_metadata.candidates_token_count, 6)
        calls = self.wait_for_calls(2)
        self.assertEqual([(c.form, c.model, c.input_tokens, c.output_tokens) for c in calls], [
            ("gemini", "gemini-fake", 14, 6),
            ("gemini", "gemini-fake", 14, 6),
        ])  # fmt: skip
        self.assertIn(GOOGLE_KEY, self.trial.secrets())

    def test_a_streamed_gemini_call_takes_its_tokens_from_the_last_chunk(self) -> None:
        url = f"{self.trial.base_url}/models/gemini-fake:streamGenerateContent?alt=sse"
        request = urllib.request.Request(
            url, b'{"contents": []}', {"Content-Type": "application/json", "x-goog-api-key": GOOGLE_KEY}
        )
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            events = [line for line in response.read().split(b"\n") if line.startswith(b"data: ")]
        self.assertEqual(len(events), 2)
        [call] = self.wait_for_calls(1)
        self.assertEqual((call.form, call.input_tokens, call.output_tokens), ("gemini", 14, 6))

    def test_the_upstream_is_reached_through_the_proxy_the_environment_names(self) -> None:
        forward = LoopbackProxy().__enter__()
        self.addCleanup(forward.__exit__, None, None, None)
        environ = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARIABLES}
        with mock.patch.dict(os.environ, {**environ, "http_proxy": forward.url}, clear=True):
            proxy = ModelProxy(self.upstream.url("/v1"))
        self.addCleanup(proxy.close)
        client = self.openai_client().with_options(base_url=proxy.trial().base_url)
        client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "hi"}])
        self.assertEqual(forward.request_lines, [f"POST {self.upstream.url('/v1/chat/completions')} HTTP/1.1"])

    def test_a_kept_alive_connection_the_upstream_closed_meanwhile_is_replaced_not_failed(self) -> None:
        def closing(received: Received, handler: BaseHTTPRequestHandler) -> None:
            send_json(handler, openai_completion([], "Hello"))
            handler.close_connection = True  # as an idle timeout does: closed after the answer, unannounced

        proxy = ModelProxy(self.serve(closing).url("/v1"))
        self.addCleanup(proxy.close)
        client = self.openai_client().with_options(base_url=proxy.trial().base_url)
        for _ in range(3):
            completion = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            self.assertEqual(completion.choices[0].message.content, "Hello")
            time.sleep(0.05)  # the upstream's close has arrived before the next call

    def test_an_answer_of_no_said_length_gives_its_tokens_chunked_or_closed_pretty_printed_or_not(self) -> None:
        completion = openai_completion([], "Hello")
        for framing, body in (
            ("chunked", json.dumps(completion, indent=2).encode()),
            ("closed", json.dumps(completion).encode()),
        ):
            with self.subTest(framing):

                def unsaid(
                    received: Received, handler: BaseHTTPRequestHandler, framing: str = framing, body: bytes = body
                ) -> None:
                    if framing == "closed":  # HTTP/1.0: the body ends where the connection does
                        handler.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body)
                        handler.close_connection = True
                        return
                    handler.send_response(200)
                    handler.send_header("Content-Type", "application/json")
                    handler.send_header("Transfer-Encoding", "chunked")
                    handler.end_headers()
                    for start in range(0, len(body), 50):
                        handler.wfile.write(b"%x\r\n%s\r\n" % (len(body[start : start + 50]), body[start : start + 50]))
                    handler.wfile.write(b"0\r\n\r\n")

                trial = self.upstream_trial(unsaid)
                client = self.openai_client().with_options(base_url=trial.base_url)
                answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
                self.assertEqual(answer.choices[0].message.content, "Hello")
                [call] = trial.calls()
                self.assertEqual((call.input_tokens, call.output_tokens, call.error), (120, 30, None))

    def test_an_interim_answer_before_the_final_one_is_not_taken_for_it(self) -> None:
        def hints_first(received: Received, handler: BaseHTTPRequestHandler) -> None:
            body = json.dumps(openai_completion([], "Hello")).encode()
            handler.wfile.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
            handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            handler.wfile.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

        trial = self.upstream_trial(hints_first)
        client = self.openai_client().with_options(base_url=trial.base_url)
        for _ in range(2):  # the connection kept for the next call is at the next answer's start
            answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            self.assertEqual(answer.choices[0].message.content, "Hello")
        self.assertEqual([(call.status, call.input_tokens) for call in trial.calls()], [(200, 120)] * 2)

    def test_an_answer_that_is_not_http_the_proxy_reads_is_a_502_saying_so(self) -> None:
        def oversized(received: Received, handler: BaseHTTPRequestHandler) -> None:
            handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Trace: " + b"a" * 70000 + b"\r\nContent-Length: 2\r\n\r\n{}")

        trial = self.upstream_trial(oversized)
        client = self.openai_client().with_options(base_url=trial.base_url)
        with self.assertRaises(openai.APIStatusError) as raised:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        self.assertEqual(raised.exception.status_code, 502)
        self.assertIn("the upstream API's answer could not be read (LineTooLong)", str(raised.exception))
        self.assertEqual([call.error for call in trial.calls()], ["upstream-gone"])

    def test_an_unreadable_answer_on_a_kept_alive_connection_is_not_asked_for_again(self) -> None:
        def second_oversized(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if len(upstream.received) == 1:
                send_json(handler, openai_completion([], "Hello"))
            else:  # the upstream answered, if oddly: the call was made, and is not to be made (and paid for) twice
                handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Trace: " + b"a" * 70000 + b"\r\n\r\n")

        upstream = self.serve(second_oversized)
        proxy = ModelProxy(upstream.url("/v1"))
        self.addCleanup(proxy.close)
        client = self.openai_client().with_options(base_url=proxy.trial().base_url)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        with self.assertRaises(openai.APIStatusError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        self.assertEqual(len(upstream.received), 2)

    def test_an_answer_the_upstream_cuts_short_is_a_502_and_recorded_so(self) -> None:
        def cut(received: Received, handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "1000")
            handler.end_headers()
            handler.wfile.write(b'{"id": "chatcmpl-1"')
            handler.wfile.flush()
            handler.close_connection = True

        trial = self.upstream_trial(cut)
        client = self.openai_client().with_options(base_url=trial.base_url)
        with self.assertRaises(openai.APIStatusError) as raised:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        self.assertEqual(raised.exception.status_code, 502)
        self.assertEqual([call.error for call in trial.calls()], ["upstream-gone"])

    def test_calls_in_flight_leave_room_for_a_new_agent_connection(self) -> None:
        release = threading.Event()
        self.addCleanup(release.set)

        def held(received: Received, handler: BaseHTTPRequestHandler) -> None:
            release.wait(WAIT)
            send_json(handler, openai_completion([], "Hello"))

        upstream = self.serve(held)
        upstream.server.socket.listen(256)  # all of them at once, not SYNs retried a second later
        proxy = ModelProxy(upstream.url("/v1"))
        self.addCleanup(proxy.close)
        path = proxy.trial().base_url.removeprefix(proxy.base) + "/chat/completions"
        host, port = proxy.base.removeprefix("http://").split(":")

        def call() -> None:
            with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
                sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}".encode())
                sock.recv(4096)

        callers = [threading.Thread(target=call, daemon=True) for _ in range(130)]
        for caller in callers:
            caller.start()
        upstream.wait_for_requests(130, WAIT)  # 130 agent connections, each with its upstream one, in flight
        with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
            sock.sendall(b"GET /no-such-trial/models HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertTrue(sock.recv(4096).startswith(b"HTTP/1.1 404"))
        release.set()
        for caller in callers:
            caller.join(WAIT)

    def test_an_offline_proxy_sends_nothing_upstream_even_outside_an_exchange(self) -> None:
        with ModelProxy(self.upstream.url("/v1"), offline=True) as proxy:
            trial = proxy.trial()  # no cassette's exchange under way: a call the agent makes after its reply
            client = self.openai_client().with_options(base_url=trial.base_url)
            with self.assertRaises(openai.BadRequestError) as raised:
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            self.assertIn("replay:miss", str(raised.exception))
            self.assertEqual(len(trial.misses()), 1)
        self.assertEqual(self.upstream.received, [])

    def test_a_path_no_trial_holds_is_a_404_that_sends_nothing(self) -> None:
        self.trial.end()
        with self.assertRaises(openai.NotFoundError):
            self.openai_client().chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        self.assertEqual(self.upstream.received, [])

    def test_an_upstream_it_cannot_reach_is_a_502_in_the_api_s_own_shape(self) -> None:
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            port = unused.getsockname()[1]
        with ModelProxy(f"http://127.0.0.1:{port}/v1") as proxy:
            trial = proxy.trial()
            client = anthropic.Anthropic(base_url=trial.base_url, api_key=ANTHROPIC_KEY, max_retries=0, timeout=WAIT)
            with self.assertRaises(anthropic.APIStatusError) as raised:
                client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
            self.assertEqual(raised.exception.status_code, 502)
            self.assertIn("could not reach the upstream", str(raised.exception))
            [call] = trial.calls()
            self.assertEqual((call.status, call.error), (502, "unreachable"))

    def test_a_body_of_100_mb_is_refused_with_413_without_a_hang(self) -> None:
        host, port = self.proxy.base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
            head = (
                f"POST /{self.trial.token}/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {100 * 1024 * 1024}"
            )
            sock.sendall(head.encode() + b"\r\nContent-Type: application/json\r\n\r\n" + b"x" * 65536)
            answer = sock.recv(4096)
        self.assertTrue(answer.startswith(b"HTTP/1.1 413"), answer[:40])
        self.assertEqual(self.upstream.received, [])

    def test_a_content_length_of_5000_digits_is_a_413_not_a_traceback(self) -> None:
        host, port = self.proxy.base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
            head = f"POST /{self.trial.token}/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {'9' * 5000}"
            sock.sendall(head.encode() + b"\r\n\r\n")
            answer = sock.recv(4096)
        self.assertTrue(answer.startswith(b"HTTP/1.1 413"), answer[:40])

    def test_a_stream_the_client_stops_reading_ends_the_call_and_close_returns(self) -> None:
        def endless(received: Received, handler: BaseHTTPRequestHandler) -> None:
            def events() -> Iterator[bytes]:
                deadline = time.monotonic() + WAIT
                while time.monotonic() < deadline:
                    yield sse({"choices": [{"index": 0, "delta": {"content": "x" * 1000}}]})
                    time.sleep(0.01)

            send_events(handler, events())

        upstream = self.serve(endless)
        proxy = ModelProxy(upstream.url("/v1"))
        trial = proxy.trial()
        client = self.openai_client().with_options(base_url=trial.base_url)
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        next(iter(stream))
        stream.close()  # the agent stops reading
        deadline = time.monotonic() + WAIT
        while not trial.calls() and time.monotonic() < deadline:
            time.sleep(0.02)
        [call] = trial.calls()
        self.assertEqual(call.error, "client-gone")
        closing = threading.Thread(target=proxy.close)
        closing.start()
        closing.join(WAIT)
        self.assertFalse(closing.is_alive())

    def wait_for_calls(self, count: int) -> tuple[Any, ...]:
        """The trial's calls once there are count of them: a streamed call is recorded as its stream ends."""
        deadline = time.monotonic() + WAIT
        while len(self.trial.calls()) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.trial.calls()


def latencies(document: dict[str, Any]) -> list[float]:
    """Each model call's latency, in the results' order."""
    trials = [trial for entry in document["results"] for trial in entry["trialResults"]]
    return [call["latencyMs"] for trial in trials for call in trial["modelCalls"]["calls"]]


def steady(document: dict[str, Any]) -> list[Any]:
    """A results document's trials but for what timing changes, and the conversations' ids (new every run)."""
    trials = [trial for entry in document["results"] for trial in entry["trialResults"]]
    for trial in trials:
        trial.pop("durationMs")
        trial.pop("conversationId", None)
        for call in trial.get("modelCalls", {}).get("calls", []):
            call.pop("latencyMs")
        trial.get("modelCalls", {}).pop("latencyMs", None)
    return trials


class RunsThroughTheProxy(TempDirTestCase):
    """The CLI run of an http agent whose own model client (the openai SDK) goes through modelProxy.baseUrl."""

    def setUp(self) -> None:
        super().setUp()
        self.apis = FakeApis()
        self.upstream = self.serve(self.apis)
        data = canonical_task_data()
        self.task = data["tasks"][0]
        data["tasks"] = [{**self.task, "expect": {**self.task["expect"], "budget": {"maxTokens": 500}}}]
        self.tasks = os.path.join(self.tmp, "tasks.json")
        with open(self.tasks, "w", encoding="utf-8") as f:
            json.dump(data, f)
        self.bodies: list[dict[str, Any]] = []

    def agent(
        self,
        calls: int = 1,
        echo: bool = False,
        usage: dict[str, int] | None = None,
        system: str = "You are careful.",
        streamed: bool = False,
    ) -> Any:
        """An agent that asks its model (through the proxy it is told of) before it answers as the stub would."""

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            body = received.json
            self.bodies.append(body)
            base = body["modelProxy"]["baseUrl"]
            client = openai.OpenAI(base_url=base, api_key=OPENAI_KEY, max_retries=0, timeout=WAIT)
            try:
                messages: Any = [{"role": "system", "content": system}, {"role": "user", "content": body["prompt"]}]
                for _ in range(calls):
                    client.chat.completions.create(model="fake-model", messages=messages)
                if streamed:
                    chunks = client.chat.completions.create(
                        model="fake-model", messages=messages, stream=True, stream_options={"include_usage": True}
                    )
                    self.assertEqual("".join(c.choices[0].delta.content or "" for c in chunks if c.choices), "Hello")
                if echo:
                    anthropic.Anthropic(
                        base_url=base, api_key="unused", default_headers={"x-api-key": ANTHROPIC_KEY}, max_retries=0
                    ).messages.create(model="fake-model", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
                    request = urllib.request.Request(
                        f"{base}/models/gemini-fake:generateContent?key={QUERY_KEY}",
                        b"{}",
                        {"Content-Type": "application/json", "x-goog-api-key": GOOGLE_KEY},
                    )
                    urllib.request.urlopen(request, timeout=WAIT).close()
            except openai.APIError as exc:
                send_json(handler, {"error": f"the model failed: {exc}"}, 500)
                return
            reply = dict(CANNED[body["prompt"]])
            if echo:
                reply["text"] = f"keys {OPENAI_KEY} {ANTHROPIC_KEY} {GOOGLE_KEY} {QUERY_KEY} at {base}"
            if usage is not None:
                reply["usage"] = usage
            send_json(handler, reply)

        return self.serve(respond)

    def run_with(self, agent: Any, upstream: str, *args: str) -> tuple[str, str, int, dict[str, Any]]:
        results = os.path.join(self.tmp, "results.json")
        env = clean_env(
            EVAL_TASKS=self.tasks,
            EVAL_BACKEND="http",
            EVAL_AGENT_URL=agent.url(),
            EVAL_MODEL_PROXY=upstream,
            EVAL_RESULTS=results,
        )
        out, err, code = run_cli(*args, env=env)
        document: dict[str, Any] = {}
        if os.path.exists(results):
            with open(results, encoding="utf-8") as f:
                document = json.load(f)
        return out, err, code, document

    def test_the_model_calls_and_their_tokens_are_recorded_and_judge_the_token_budget(self) -> None:
        _out, err, code, document = self.run_with(self.agent(calls=2), self.upstream.url("/v1"))
        self.assertEqual(code, 0, err)
        [trial] = document["results"][0]["trialResults"]
        self.assertEqual(trial["usage"], {"inputTokens": 240, "outputTokens": 60})
        calls = trial["modelCalls"]
        self.assertEqual((calls["count"], calls["models"], calls["inputTokens"]), (2, ["fake-model"], 240))
        self.assertEqual([call["format"] for call in calls["calls"]], ["openai-chat"] * 2)
        self.assertNotIn("reportedUsage", trial)
        self.assertTrue(self.bodies[0]["modelProxy"]["baseUrl"].startswith("http://127.0.0.1:"))

        _out, err, code, document = self.run_with(self.agent(calls=4), self.upstream.url("/v1"))
        [trial] = document["results"][0]["trialResults"]
        self.assertEqual((trial["status"], trial["code"]), ("fail", "budget:tokens"), err)
        self.assertIn("600 tokens, over the budget of 500", trial["reason"])

    def test_a_command_agent_is_told_its_base_url_in_its_environment(self) -> None:
        script = os.path.join(self.tmp, "agent.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(COMMAND_AGENT)
        results = os.path.join(self.tmp, "results.json")
        env = clean_env(
            EVAL_TASKS=self.tasks,
            EVAL_BACKEND="command",
            EVAL_AGENT_CMD=f"{sys.executable} {script}",
            EVAL_MODEL_PROXY=self.upstream.url("/v1"),
            EVAL_RESULTS=results,
            OPENAI_API_KEY=OPENAI_KEY,
        )
        _out, err, code = run_cli(env=env)
        self.assertEqual(code, 0, err)
        with open(results, encoding="utf-8") as f:
            [trial] = json.load(f)["results"][0]["trialResults"]
        self.assertEqual((trial["modelCalls"]["count"], trial["usage"]["inputTokens"]), (1, 120))

    def test_the_proxy_s_tokens_are_what_token_growth_is_measured_on(self) -> None:
        upstream = self.upstream.url("/v1")
        _out, err, code, baseline = self.run_with(self.agent(calls=1), upstream)
        self.assertEqual(code, 0, err)
        path = os.path.join(self.tmp, "baseline.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(baseline, f)
        _out, err, code, grown = self.run_with(
            self.agent(calls=3), upstream, "--baseline", path, "--max-token-growth", "50%"
        )
        self.assertEqual(code, 1, err)
        self.assertEqual((grown["growth"]["tokens"]["then"], grown["growth"]["tokens"]["now"]), (150, 450))
        self.assertIn("token-growth", grown["gateFailedBecause"])

    def test_usage_the_agent_reports_otherwise_is_kept_beside_the_proxy_s(self) -> None:
        agent = self.agent(usage={"inputTokens": 1, "outputTokens": 2})
        _out, _err, _code, document = self.run_with(agent, self.upstream.url("/v1"))
        [trial] = document["results"][0]["trialResults"]
        self.assertEqual(trial["usage"], {"inputTokens": 120, "outputTokens": 30})
        self.assertEqual(trial["reportedUsage"], {"inputTokens": 1, "outputTokens": 2})

    def test_tokens_the_proxy_could_not_read_are_not_known_whatever_the_agent_reports(self) -> None:
        def stream_without_usage(received: Received, handler: BaseHTTPRequestHandler) -> None:
            send_events(handler, (chunk for chunk in chat_chunks() if b'"usage"' not in chunk))

        upstream = self.serve(stream_without_usage)
        agent = self.agent(streamed=True, calls=0, usage={"inputTokens": 1, "outputTokens": 1})
        _out, err, code, document = self.run_with(agent, upstream.url("/v1"))
        self.assertEqual(code, 1, err)
        [trial] = document["results"][0]["trialResults"]
        self.assertEqual((trial["status"], trial["code"]), ("error", "budget:no-usage"))
        self.assertEqual(
            trial["reason"],
            "the model proxy could not read the tokens of 1 of the 1 model calls it answered, so the budget of 500"
            " tokens cannot be checked",
        )
        self.assertEqual((trial["usage"], trial["reportedUsage"]), (None, {"inputTokens": 1, "outputTokens": 1}))

    def test_a_call_that_is_no_generation_and_says_no_tokens_costs_none(self) -> None:
        def counting(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.path.endswith("/messages/count_tokens"):
                send_json(handler, {"input_tokens": 12})
            else:
                self.apis(received, handler)

        def counts_then_asks(received: Received, handler: BaseHTTPRequestHandler) -> None:
            base, messages = received.json["modelProxy"]["baseUrl"], [{"role": "user", "content": "hi"}]
            counter = anthropic.Anthropic(base_url=base, api_key=ANTHROPIC_KEY, max_retries=0, timeout=WAIT)
            counter.messages.count_tokens(model="fake-model", messages=messages)  # free, and says no usage
            client = openai.OpenAI(base_url=base, api_key=OPENAI_KEY, max_retries=0, timeout=WAIT)
            client.chat.completions.create(model="fake-model", messages=messages)
            send_json(handler, dict(CANNED[received.json["prompt"]]))

        _out, err, code, document = self.run_with(self.serve(counts_then_asks), self.serve(counting).url("/v1"))
        self.assertEqual(code, 0, err)
        [trial] = document["results"][0]["trialResults"]
        self.assertEqual((trial["usage"], trial["modelCalls"]["count"]), ({"inputTokens": 120, "outputTokens": 30}, 2))

    def test_the_agent_s_keys_and_its_path_are_in_no_output(self) -> None:
        junit, html = os.path.join(self.tmp, "junit.xml"), os.path.join(self.tmp, "report.html")
        out, err, _code, document = self.run_with(
            self.agent(echo=True), self.upstream.url("/v1"), "--junit", junit, "--html", html
        )
        self.assertEqual(len(self.upstream.received), 3, err)
        token = self.bodies[0]["modelProxy"]["baseUrl"].rpartition("/")[2]
        with open(junit, encoding="utf-8") as f, open(html, encoding="utf-8") as g:
            written = [out, err, json.dumps(document), f.read(), g.read()]
        for secret in (OPENAI_KEY, ANTHROPIC_KEY, GOOGLE_KEY, QUERY_KEY, token):
            for text in written:
                self.assertNotIn(secret, text)
        self.assertIn("keys *** *** *** ***", document["results"][0]["trialResults"][0]["text"])

    def test_the_agent_s_keys_and_its_path_are_not_in_the_cassette(self) -> None:
        cassette = os.path.join(self.tmp, "cassette.jsonl")
        _out, err, code, _document = self.run_with(
            self.agent(echo=True), self.upstream.url("/v1"), "--record", cassette
        )
        self.assertEqual(code, 0, err)
        token = self.bodies[0]["modelProxy"]["baseUrl"].rpartition("/")[2]
        with open(cassette, encoding="utf-8") as f:
            recorded = f.read()
        for secret in (OPENAI_KEY, ANTHROPIC_KEY, GOOGLE_KEY, QUERY_KEY, token):
            self.assertNotIn(secret, recorded)

    def test_a_replay_answers_the_live_agent_s_model_calls_from_the_cassette_with_the_upstream_stopped(self) -> None:
        cassette = os.path.join(self.tmp, "cassette.jsonl")
        upstream = self.upstream.url("/v1")
        agent = self.agent(calls=2, streamed=True)
        wide = ("--runs", "2", "--concurrency", "4")
        _out, err, code, recorded = self.run_with(agent, upstream, "--record", cassette, *wide)
        self.assertEqual(code, 0, err)
        self.upstream.__exit__(None, None, None)  # nothing answers there now
        _out, err, code, replayed = self.run_with(agent, upstream, "--replay", cassette, *wide)
        self.assertEqual(code, 0, err)
        self.assertEqual(len(self.bodies), 4)  # the agent ran in the replay too
        self.assertEqual(latencies(replayed), latencies(recorded))  # each model call lasts as long as recorded
        self.assertEqual(steady(replayed), steady(recorded))
        [trial, _] = replayed["results"][0]["trialResults"]
        self.assertEqual((trial["modelCalls"]["count"], trial["usage"]), (3, {"inputTokens": 252, "outputTokens": 65}))

    def test_a_replay_whose_agent_asks_its_model_otherwise_is_a_replay_miss_naming_what_changed(self) -> None:
        cassette = os.path.join(self.tmp, "cassette.jsonl")
        upstream = self.upstream.url("/v1")
        _out, err, code, _document = self.run_with(self.agent(), upstream, "--record", cassette)
        self.assertEqual(code, 0, err)
        changed = self.agent(system="You are reckless.")
        _out, err, code, replayed = self.run_with(changed, upstream, "--replay", cassette)
        self.assertEqual(code, 1, err)
        [trial] = replayed["results"][0]["trialResults"]
        self.assertEqual(trial["code"], "replay:miss")
        self.assertIn("body.messages[0].content differs from the recorded one", trial["reason"])
        self.assertEqual(len(self.upstream.received), 1)  # the replay sent nothing upstream

    def test_a_replay_whose_agent_asks_its_model_fewer_times_is_a_replay_miss(self) -> None:
        cassette = os.path.join(self.tmp, "cassette.jsonl")
        upstream = self.upstream.url("/v1")
        _out, err, code, _document = self.run_with(self.agent(calls=2), upstream, "--record", cassette)
        self.assertEqual(code, 0, err)
        _out, err, code, replayed = self.run_with(self.agent(calls=1), upstream, "--replay", cassette)
        self.assertEqual(code, 1, err)
        [trial] = replayed["results"][0]["trialResults"]
        self.assertEqual(
            (trial["code"], trial["reason"]),
            ("replay:miss", "the recorded model call POST /chat/completions was not made in this exchange"),
        )

    def test_a_gzipped_answer_gives_its_tokens_and_replays_as_it_read(self) -> None:
        def gzipped(received: Received, handler: BaseHTTPRequestHandler) -> None:
            body = gzip.compress(json.dumps(openai_completion([], "Hello")).encode())
            handler.send_response(200)  # though the proxy asked for no encoding, as some gateways do
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Encoding", "gzip")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)

        upstream, cassette = self.serve(gzipped), os.path.join(self.tmp, "cassette.jsonl")
        _out, err, code, recorded = self.run_with(self.agent(), upstream.url("/v1"), "--record", cassette)
        self.assertEqual(code, 0, err)
        upstream.__exit__(None, None, None)
        _out, err, code, replayed = self.run_with(self.agent(), upstream.url("/v1"), "--replay", cassette)
        self.assertEqual(code, 0, err)
        for document in (recorded, replayed):
            self.assertEqual(
                document["results"][0]["trialResults"][0]["usage"], {"inputTokens": 120, "outputTokens": 30}
            )

    def test_a_replay_whose_agent_asks_for_another_beta_or_api_version_is_a_replay_miss(self) -> None:
        def asks(beta: str) -> Any:
            def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
                base = received.json["modelProxy"]["baseUrl"]
                client = anthropic.Anthropic(base_url=base, api_key=ANTHROPIC_KEY, max_retries=0, timeout=WAIT)
                try:
                    client.messages.create(
                        model="fake-model",
                        max_tokens=10,
                        messages=[{"role": "user", "content": "hi"}],
                        extra_headers={"anthropic-beta": beta},  # what the model may do: part of what was asked
                    )
                except anthropic.APIError as exc:
                    send_json(handler, {"error": f"the model failed: {exc}"}, 500)
                    return
                send_json(handler, dict(CANNED[received.json["prompt"]]))

            return self.serve(respond)

        cassette, upstream = os.path.join(self.tmp, "cassette.jsonl"), self.upstream.url("/v1")
        _out, err, code, _document = self.run_with(asks("context-1m-2025-08-07"), upstream, "--record", cassette)
        self.assertEqual(code, 0, err)
        _out, err, code, replayed = self.run_with(asks("context-1m-2025-08-07"), upstream, "--replay", cassette)
        self.assertEqual(code, 0, err)
        _out, err, code, replayed = self.run_with(asks("context-1m-2025-08-70"), upstream, "--replay", cassette)
        [trial] = replayed["results"][0]["trialResults"]
        self.assertEqual((code, trial["code"]), (1, "replay:miss"), err)
        self.assertIn("headers.anthropic-beta differs from the recorded one", trial["reason"])

    def test_record_missing_fills_the_calls_a_cassette_lacks_from_the_upstream(self) -> None:
        cassette = os.path.join(self.tmp, "cassette.jsonl")
        upstream = self.upstream.url("/v1")
        _out, err, code, _document = self.run_with(self.agent(), upstream, "--record", cassette)
        self.assertEqual(code, 0, err)
        changed = self.agent(system="You are reckless.")
        _out, err, code, _document = self.run_with(changed, upstream, "--replay", cassette, "--record-missing")
        self.assertEqual((code, len(self.upstream.received)), (0, 2), err)
        self.upstream.__exit__(None, None, None)
        _out, err, code, replayed = self.run_with(changed, upstream, "--replay", cassette)
        self.assertEqual(code, 0, err)
        self.assertEqual(replayed["results"][0]["trialResults"][0]["modelCalls"]["count"], 1)

    def test_an_upstream_nobody_reaches_is_exit_3(self) -> None:
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            port = unused.getsockname()[1]
        _out, err, code, document = self.run_with(self.agent(), f"http://127.0.0.1:{port}/v1")
        self.assertEqual(code, 3, err)
        self.assertIn(f"the model proxy could not reach http://127.0.0.1:{port}/v1", err)
        [trial] = document["results"][0]["trialResults"]
        self.assertEqual(
            (trial["code"], trial["modelCalls"]["calls"][0]["error"]), ("model:unreachable", "unreachable")
        )

    def test_an_upstream_that_is_not_a_url_is_one_line_and_exit_2(self) -> None:
        env = clean_env(
            EVAL_TASKS=self.tasks, EVAL_BACKEND="http", EVAL_AGENT_URL="http://127.0.0.1:9/run", EVAL_MODEL_PROXY="api"
        )
        _out, err, code = run_cli(env=env)
        self.assertEqual(code, 2)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("EVAL_MODEL_PROXY", err)

    def test_an_upstream_with_credentials_is_one_line_and_exit_2_without_them(self) -> None:
        upstream = "https://gateway:pw-0123456789@llm.example.com/v1"
        env = clean_env(
            EVAL_TASKS=self.tasks,
            EVAL_BACKEND="http",
            EVAL_AGENT_URL="http://127.0.0.1:9/run",
            EVAL_MODEL_PROXY=upstream,
        )
        _out, err, code = run_cli(env=env)
        self.assertEqual((code, len(err.splitlines())), (2, 1), err)
        self.assertIn("EVAL_MODEL_PROXY: the model proxy sends the agent's own key upstream", err)
        self.assertNotIn("pw-0123456789", err)

    def test_a_run_without_the_setting_tells_the_agent_of_no_proxy(self) -> None:
        env = clean_env(EVAL_TASKS=self.tasks, EVAL_BACKEND="http", EVAL_AGENT_URL=self.serve(self.record).url())
        _out, err, code = run_cli(env=env)
        self.assertEqual(code, 1, err)  # the token budget: with no proxy and no usage reported, budget:no-usage
        self.assertNotIn("modelProxy", self.bodies[0])

    def record(self, received: Received, handler: BaseHTTPRequestHandler) -> None:
        self.bodies.append(received.json)
        send_json(handler, CANNED[received.json["prompt"]])


BASELINE = {"system": "You are careful.", "description": "Search assets by tag.", "model": "fake-model", "result": "3"}


class ReplayMisses(TempDirTestCase):
    """A replay fails closed on what changes what the agent asks its model, for exactly the trials it changes."""

    def setUp(self) -> None:
        super().setUp()
        self.upstream = self.serve(FakeApis())
        data = canonical_task_data()
        data["tasks"] = data["tasks"][:2]
        self.changed_task = data["tasks"][1]["id"]
        self.tasks = os.path.join(self.tmp, "tasks.json")
        with open(self.tasks, "w", encoding="utf-8") as f:
            json.dump(data, f)
        self.cassette = os.path.join(self.tmp, "cassette.jsonl")

    def agent(self, changed: dict[str, str], refactored: bool = False) -> Any:
        """An agent that calls a tool, then asks its model with the tool's result; `changed` applies to the second
        task only. Refactored, it builds the same request another way."""

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            body = received.json
            made = {**BASELINE, **(changed if body["taskId"] == self.changed_task else {})}
            tool = {"type": "function", "function": {"name": "search", "description": made["description"]}}
            messages: Any = [
                {"role": "system", "content": made["system"]},
                {"role": "user", "content": body["prompt"]},
                {"role": "tool", "tool_call_id": "call_1", "content": made["result"]},
            ]
            if refactored:  # the same request, made otherwise
                messages = [dict(reversed(list(message.items()))) for message in messages]
            client = openai.OpenAI(base_url=body["modelProxy"]["baseUrl"], api_key="dummy", max_retries=0)
            try:
                client.chat.completions.create(model=made["model"], messages=messages, tools=[tool])
            except openai.APIError as exc:
                send_json(handler, {"error": f"the model failed: {exc}"}, 500)
                return
            send_json(handler, CANNED[body["prompt"]])

        return self.serve(respond)

    def run_with(self, agent: Any, *args: str) -> tuple[int, str, dict[str, Any]]:
        results = os.path.join(self.tmp, "results.json")
        env = clean_env(
            EVAL_TASKS=self.tasks,
            EVAL_BACKEND="http",
            EVAL_AGENT_URL=agent.url(),
            EVAL_MODEL_PROXY=self.upstream.url("/v1"),
            EVAL_RESULTS=results,
        )
        _out, err, code = run_cli(*args, env=env)
        with open(results, encoding="utf-8") as f:
            return code, err, json.load(f)

    def test_a_changed_request_misses_for_exactly_its_trials_and_a_refactor_replays_clean(self) -> None:
        code, err, _ = self.run_with(self.agent({}), "--record", self.cassette)
        self.assertEqual(code, 0, err)
        cases = [
            ("the system prompt", {"system": "You are reckless."}, "body.messages[0].content"),
            ("a tool's description", {"description": "Find assets."}, "body.tools[0].function.description"),
            ("the model", {"model": "other-model"}, "body.model"),
            ("a tool result", {"result": "4"}, "body.messages[2].content"),
        ]
        for what, changed, path in cases:
            with self.subTest(what):
                code, err, document = self.run_with(self.agent(changed), "--replay", self.cassette)
                verdicts = {e["id"]: e["trialResults"][0] for e in document["results"]}
                self.assertEqual([t["code"] for i, t in verdicts.items() if i != self.changed_task], [None], err)
                missed = verdicts[self.changed_task]
                self.assertEqual(missed["code"], "replay:miss")
                self.assertIn(f"{path} differs from the recorded one", missed["reason"])
        code, err, document = self.run_with(self.agent({}, refactored=True), "--replay", self.cassette)
        self.assertEqual(code, 0, err)
        self.assertEqual(len(self.upstream.received), 2)  # the recording's: no replay sent anything upstream


class AnAgentsSdkAgentReplayed(TempDirTestCase):
    """The OpenAI Agents SDK agent of examples/frameworks/ (its tools served over MCP), its model client through the
    proxy: multi-step tasks in tool worlds recorded with the model up, then replayed with it stopped."""

    def test_a_replay_with_the_model_stopped_gives_the_recorded_results(self) -> None:
        require("agents")
        from agents import set_tracing_disabled
        from openai import AsyncOpenAI

        set_tracing_disabled(True)  # traces would go to OpenAI's platform
        invalid: list[str] = []
        self.addCleanup(lambda: self.assertEqual(invalid, []))
        model = self.serve(conversation_fake("openai", playing(CAREFUL), invalid))
        adapter_module = example("openai_agents_mcp")
        # Its own client points nowhere that answers: every model call it makes goes through the proxy.
        adapter = adapter_module.Adapter(AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-test"), "gpt-5.5")
        self.addCleanup(adapter.close)
        server = adapter_module.serve(adapter)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        cassette = os.path.join(self.tmp, "cassette.jsonl")
        runs = []
        for mode in ("--record", "--replay"):
            results = os.path.join(self.tmp, f"results{mode}.json")
            env = clean_env(
                EVAL_TASKS=WORLD_TASKS,
                EVAL_AGENT_URL=f"http://127.0.0.1:{server.server_port}/run",
                EVAL_TOOL_NAMES="safe",
                EVAL_MODEL_PROXY=model.url("/v1"),
                EVAL_RESULTS=results,
            )
            _out, err, code = run_cli(mode, cassette, "--runs", "2", "--concurrency", "4", env=env, cwd=self.tmp)
            with open(results, encoding="utf-8") as f:
                runs.append((json.load(f), code, err))
            model.__exit__(None, None, None)  # the replay has no model to reach
        (recorded, code, err), (replayed, replay_code, replay_err) = runs
        self.assertEqual((code, recorded["passed"]), (0, 6), err)
        self.assertEqual(replay_code, 0, replay_err)
        self.assertEqual(steady(replayed), steady(recorded))
        calls = [trial["modelCalls"]["count"] for e in replayed["results"] for trial in e["trialResults"]]
        self.assertTrue(all(count >= 2 for count in calls), calls)  # multi-step: a model call after the tools' results
