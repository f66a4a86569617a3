"""`eval_agent.py doctor`: a few probes through the run's provider backend, a line each, the quirks with their fix."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import unittest
from http.server import BaseHTTPRequestHandler
from unittest import mock

import eval_agent
from tests.doctor_fakes import SIGNATURE, doctor_fake
from tests.providers import openai_error
from tests.support import LoopbackAgent, Received, TempDirTestCase, clean_env, run_cli, send_json

KEY = "sk-doctor-planted-7f3a9c1e5b2d4f6a8c0e"
MAX_PROBES = 6
PROBES = ("plain reply", "settings", "named tool call", "tool result round trip", "parallel calls")


def provider_env(url: str, **env: str) -> dict[str, str]:
    """A run's settings for the openai backend at url, with a planted key and a task file that does not exist."""
    settings = {"EVAL_BACKEND": "openai", "OPENAI_BASE_URL": url, "EVAL_MODEL": "m", "OPENAI_API_KEY": KEY}
    # doctor never reads the task file: one that is not there changes nothing.
    return clean_env(EVAL_TASKS=os.path.join(os.sep, "nowhere", "eval-tasks.json"), **{**settings, **env})


def line_of(out: str, probe: str) -> str:
    """The line doctor printed for a probe."""
    found = [line for line in out.splitlines() if line.startswith(f"{probe}:")]
    if len(found) != 1:
        raise AssertionError(f"{len(found)} lines for {probe!r} in:\n{out}")
    return found[0]


class DoctorTestCase(TempDirTestCase):
    def doctor(self, *quirks: str, argv: tuple[str, ...] = (), **env: str) -> tuple[str, str, int, LoopbackAgent]:
        """doctor in this process against a fake with these quirks: stdout, stderr, the exit code, and the fake."""
        with LoopbackAgent(doctor_fake(quirks)) as fake:
            out, err, code = self.doctor_at(fake.url("/v1"), *argv, **env)
        self.assertLessEqual(len(fake.received), MAX_PROBES)
        return out, err, code, fake

    def doctor_at(self, url: str, *argv: str, **env: str) -> tuple[str, str, int]:
        stdout, stderr = io.StringIO(), io.StringIO()
        with mock.patch.dict(os.environ, provider_env(url, **env), clear=True):
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                code = eval_agent.main(["doctor", *argv])
        out, err = stdout.getvalue(), stderr.getvalue()
        self.assertNotIn(KEY, out + err)
        self.assertNotIn("Traceback", err)
        return out, err, code


class CleanServer(DoctorTestCase):
    def test_every_probe_works_against_a_server_without_quirks_and_doctor_exits_0(self) -> None:
        with LoopbackAgent(doctor_fake(())) as fake:
            out, err, code = run_cli("doctor", env=provider_env(fake.url("/v1")), cwd=self.tmp)
        self.assertEqual((err, code), ("", 0), out)
        for probe in PROBES:
            self.assertRegex(line_of(out, probe), r"^[a-z ]+: works", probe)
        self.assertIn("a run can score", out.splitlines()[-1])
        self.assertNotIn(KEY, out)
        self.assertLessEqual(len(fake.received), MAX_PROBES)
        sent = [received.json for received in fake.received]
        self.assertEqual({tool["function"]["name"] for tool in sent[0]["tools"]}, {"doctor_echo", "doctor_add"})
        self.assertTrue(all(received.headers["Authorization"] == f"Bearer {KEY}" for received in fake.received))

    def test_the_round_trip_sends_the_call_back_with_its_id_and_the_result(self) -> None:
        out, _, code, fake = self.doctor()
        self.assertEqual(code, 0, out)
        back = [
            received.json["messages"] for received in fake.received if received.json["messages"][-1]["role"] == "tool"
        ]
        self.assertEqual(len(back), 1, "one round trip")
        call, result = back[0][-2]["tool_calls"][0], back[0][-1]
        self.assertEqual(call["function"]["name"], "doctor_echo")
        self.assertEqual(result["tool_call_id"], call["id"])
        self.assertIn("ping", result["content"])

    def test_doctor_says_the_settings_it_sent_were_taken(self) -> None:
        out, _, code, fake = self.doctor(EVAL_TEMPERATURE="0.5", EVAL_MAX_TOKENS_FIELD="max_tokens")
        self.assertEqual(code, 0, out)
        self.assertEqual(line_of(out, "settings"), "settings: works: the server takes temperature, max_tokens")
        self.assertEqual(fake.received[0].json["temperature"], 0.5)


class PlantedQuirks(DoctorTestCase):
    def test_a_model_that_refuses_temperature_is_a_quirk_whose_fix_is_to_unset_it(self) -> None:
        out, _, code, _ = self.doctor("refuses-temperature", EVAL_TEMPERATURE="0")
        self.assertEqual(code, 1, out)
        line = line_of(out, "settings")
        self.assertIn("the server refuses temperature", line)
        self.assertIn("Unsupported value: 'temperature' does not support 0.0 with this model", line)
        self.assertIn("fix: unset EVAL_TEMPERATURE", line)

    def test_a_model_that_wants_max_completion_tokens_is_a_quirk_and_the_rest_is_probed_with_the_fix(self) -> None:
        out, _, code, fake = self.doctor("refuses-max-tokens", EVAL_MAX_TOKENS_FIELD="max_tokens", EVAL_TEMPERATURE="1")
        self.assertEqual(code, 1, out)
        line = line_of(out, "settings")
        self.assertIn("the server refuses max_tokens", line)
        self.assertIn("Use 'max_completion_tokens' instead", line)
        self.assertIn("fix: set EVAL_MAX_TOKENS_FIELD=max_completion_tokens", line)
        self.assertRegex(line_of(out, "named tool call"), "^named tool call: works")
        self.assertIn("max_completion_tokens", fake.received[-1].json)
        self.assertIn("fix the quirk", out.splitlines()[-1])

    def test_tool_calls_written_as_text_are_a_quirk_whose_fix_is_a_tool_parser(self) -> None:
        out, _, code, _ = self.doctor("calls-as-text")
        self.assertEqual(code, 1, out)
        line = line_of(out, "named tool call")
        self.assertIn("the server writes tool calls as text", line)
        self.assertIn("start it with a tool parser", line)
        self.assertRegex(line_of(out, "plain reply"), "^plain reply: works")

    def test_a_call_without_its_required_argument_is_a_quirk(self) -> None:
        out, _, code, _ = self.doctor("drops-arguments")
        self.assertEqual(code, 1, out)
        self.assertIn("doctor_echo came without its required argument text", line_of(out, "named tool call"))

    def test_one_call_per_reply_is_a_note_not_a_failure(self) -> None:
        out, _, code, _ = self.doctor("one-call-per-reply")
        self.assertEqual(code, 0, out)
        self.assertEqual(
            line_of(out, "parallel calls"),
            "parallel calls: note: one call per reply: tasks that expect parallel calls will need more steps "
            "(maxSteps)",
        )

    def test_a_round_trip_that_needs_extra_content_back_works_only_when_the_backend_sends_it(self) -> None:
        out, _, code, fake = self.doctor("needs-extra-content-back")
        back = [received.json for received in fake.received if received.json["messages"][-1]["role"] == "tool"]
        self.assertEqual(len(back), 1, "one round trip")
        kept = back[0]["messages"][-2]["tool_calls"][0].get("extra_content") == SIGNATURE
        line = line_of(out, "tool result round trip")
        # The backend decides what goes back; doctor must say what the server made of it, whichever it was.
        if kept:
            self.assertEqual(code, 0, out)
            self.assertRegex(line, "^tool result round trip: works")
        else:
            self.assertEqual(code, 1, out)
            self.assertIn("the server refused the call sent back with its result", line)
            self.assertIn("missing a thought_signature", line)

    def test_a_rejected_key_exits_3_naming_the_key_variable_and_never_printing_the_key(self) -> None:
        out, err, code, fake = self.doctor("rejects-key")
        self.assertEqual(code, 3, out + err)
        self.assertEqual(len(fake.received), 1, "nothing more is sent once the key is rejected")
        line = line_of(out, "plain reply")
        self.assertIn("OPENAI_API_KEY was rejected", line)
        self.assertIn("fix: set OPENAI_API_KEY to a key", line)
        self.assertIn("eval_agent doctor: error: OPENAI_API_KEY was rejected", err)

    def test_retries_count_among_the_six_requests_when_the_server_fails_after_the_first_probe(self) -> None:
        works = doctor_fake(())

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if len(fake.received) == 1:
                works(received, handler)
            else:
                send_json(handler, {"error": {"message": "overloaded"}}, 503, {"Retry-After": "0"})

        with LoopbackAgent(respond) as fake:
            out, err, code = self.doctor_at(fake.url("/v1"), EVAL_RETRIES="5")
        self.assertEqual(code, 1, out + err)
        self.assertLessEqual(len(fake.received), MAX_PROBES, out)
        self.assertIn("HTTP 503", line_of(out, "named tool call"))

    def test_a_server_that_is_not_there_exits_3_naming_the_base_url_variable(self) -> None:
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
        out, err, code = self.doctor_at(url, EVAL_RETRIES="0", EVAL_TIMEOUT="5")
        self.assertEqual(code, 3, out + err)
        self.assertIn("connection refused", line_of(out, "plain reply"))
        self.assertIn("fix: check OPENAI_BASE_URL", line_of(out, "plain reply"))


QUOTA = "You exceeded your current quota, please check your plan and billing details."


def always_429(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """A provider whose key is out of quota: every request 429, with a Retry-After of 30 s."""
    status, body = openai_error(429, QUOTA)
    send_json(handler, body, status, {"Retry-After": "30"})


class RateLimited(DoctorTestCase):
    """A 429 is the provider limiting the key: said at once, as such, never waited on or sent again."""

    def test_a_provider_that_answers_every_request_429_is_said_to_be_rate_limited_after_one_request(self) -> None:
        # It took 541 s and 10 requests: a 429's Retry-After held each resend 30 s, and spent no retry. The run is
        # bounded by run_cli's timeout: doctor must end well within it.
        with LoopbackAgent(always_429) as fake:
            out, err, code = run_cli("doctor", env=provider_env(fake.url("/v1"), EVAL_RETRIES="5"), cwd=self.tmp)
        self.assertEqual(code, 3, out + err)
        self.assertEqual(len(fake.received), 1)
        self.assertEqual(
            line_of(out, "plain reply"),
            "plain reply: rate limited: the provider answered 429: rate limited / out of quota (HTTP 429 Too Many "
            f"Requests: {QUOTA}); fix: wait for the limit to reset, or check the key's plan, quota and billing",
        )
        self.assertNotIn("quirk", out)
        self.assertEqual(
            err,
            "eval_agent doctor: error: the provider answered 429: rate limited / out of quota: HTTP 429 Too Many "
            f"Requests: {QUOTA}\n",
        )

    def test_a_429_after_the_first_probe_stops_doctor_there(self) -> None:
        works = doctor_fake(())

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            (works if len(fake.received) == 1 else always_429)(received, handler)

        with LoopbackAgent(respond) as fake:
            out, err, code = self.doctor_at(fake.url("/v1"))
        self.assertEqual(code, 3, out + err)
        self.assertEqual(len(fake.received), 2)
        self.assertEqual(line_of(out, "plain reply"), "plain reply: works")
        self.assertRegex(line_of(out, "named tool call"), "^named tool call: rate limited: the provider answered 429")
        self.assertNotIn("parallel calls", out)

    def test_a_server_error_is_probed_again_after_a_short_wait_whatever_its_retry_after(self) -> None:
        # A 503 asking for 30 s between tries: doctor's own wait between them is short, and its tries are counted.
        works = doctor_fake(())

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if len(fake.received) == 1:
                works(received, handler)
            else:
                send_json(handler, {"error": {"message": "overloaded"}}, 503, {"Retry-After": "30"})

        with LoopbackAgent(respond) as fake:
            out, err, code = run_cli("doctor", env=provider_env(fake.url("/v1"), EVAL_RETRIES="5"), cwd=self.tmp)
        self.assertEqual(code, 1, out + err)
        self.assertEqual(len(fake.received), MAX_PROBES)
        self.assertIn("HTTP 503", line_of(out, "named tool call"))


class Anthropic(DoctorTestCase):
    """doctor knows backends by the protocol alone: the anthropic backend is probed as the openai one is."""

    def anthropic(self, *quirks: str, **env: str) -> tuple[str, str, int, LoopbackAgent]:
        with LoopbackAgent(doctor_fake(quirks, "anthropic")) as fake:
            settings = {"EVAL_BACKEND": "anthropic", "ANTHROPIC_BASE_URL": fake.url(""), "ANTHROPIC_API_KEY": KEY}
            out, err, code = self.doctor_at(fake.url(""), OPENAI_BASE_URL="", OPENAI_API_KEY="", **settings, **env)
        self.assertLessEqual(len(fake.received), MAX_PROBES)
        return out, err, code, fake

    def test_every_probe_works_against_a_messages_api_without_quirks(self) -> None:
        out, _, code, fake = self.anthropic()
        self.assertEqual(code, 0, out)
        for probe in PROBES:
            self.assertRegex(line_of(out, probe), r"^[a-z ]+: works", probe)
        self.assertEqual(line_of(out, "settings"), "settings: works: no sampling or reasoning setting is sent")
        self.assertEqual({received.path for received in fake.received}, {"/v1/messages"})

    def test_a_claude_model_that_refuses_temperature_is_probed_again_without_it(self) -> None:
        out, _, code, fake = self.anthropic("refuses-temperature", EVAL_TEMPERATURE="0")
        self.assertEqual(code, 1, out)
        line = line_of(out, "settings")
        self.assertIn("the server refuses temperature (HTTP 400 Bad Request: `temperature` is deprecated", line)
        self.assertIn("fix: unset EVAL_TEMPERATURE", line)
        self.assertEqual(line_of(out, "plain reply"), "plain reply: works")
        self.assertRegex(line_of(out, "tool result round trip"), "^tool result round trip: works")
        self.assertNotIn("temperature", fake.received[-1].json)

    def test_one_call_per_reply_is_a_note(self) -> None:
        out, _, code, _ = self.anthropic("one-call-per-reply")
        self.assertEqual(code, 0, out)
        self.assertRegex(line_of(out, "parallel calls"), "^parallel calls: note: one call per reply")

    def test_a_rejected_key_exits_3_naming_anthropic_api_key(self) -> None:
        out, err, code, _ = self.anthropic("rejects-key")
        self.assertEqual(code, 3, out + err)
        self.assertIn("fix: set ANTHROPIC_API_KEY to a key", line_of(out, "plain reply"))


class Gemini(DoctorTestCase):
    def gemini(self, *quirks: str, **env: str) -> tuple[str, str, int, LoopbackAgent]:
        with LoopbackAgent(doctor_fake(quirks, "gemini")) as fake:
            settings = {"EVAL_BACKEND": "gemini", "GOOGLE_GEMINI_BASE_URL": fake.url(""), "GOOGLE_API_KEY": KEY}
            out, err, code = self.doctor_at(fake.url(""), OPENAI_BASE_URL="", OPENAI_API_KEY="", **settings, **env)
        self.assertLessEqual(len(fake.received), MAX_PROBES)
        return out, err, code, fake

    def test_every_probe_works_against_generate_content_without_quirks(self) -> None:
        out, _, code, _ = self.gemini()
        self.assertEqual(code, 0, out)
        for probe in PROBES:
            self.assertRegex(line_of(out, probe), r"^[a-z ]+: works", probe)

    def test_a_thinking_setting_the_model_refuses_is_named_and_probed_again_without_it(self) -> None:
        for variable, value in (("EVAL_REASONING_EFFORT", "low"), ("EVAL_THINKING_BUDGET", "2048")):
            with self.subTest(variable):
                out, _, code, fake = self.gemini("refuses-thinking", **{variable: value})
                self.assertEqual(code, 1, out)
                line = line_of(out, "settings")
                self.assertIn("Thinking level is not supported for this model.", line)
                self.assertIn(f"fix: unset {variable}", line)
                self.assertRegex(line_of(out, "tool result round trip"), "^tool result round trip: works")
                self.assertNotIn("thinkingConfig", fake.received[-1].json["generationConfig"])


class Settings(DoctorTestCase):
    def test_doctor_refuses_the_backends_whose_agent_it_cannot_probe_with_exit_2(self) -> None:
        cases: tuple[tuple[str, dict[str, str]], ...] = (
            ("stub", {}),
            ("http", {"EVAL_AGENT_URL": "http://127.0.0.1:9/run"}),
            ("command", {"EVAL_AGENT_CMD": "true"}),
        )
        for backend, env in cases:
            with self.subTest(backend):
                out, err, code = self.doctor_at("http://127.0.0.1:9/v1", EVAL_BACKEND=backend, EVAL_MODEL="", **env)
                self.assertEqual(code, 2, out + err)
                self.assertRegex(err, "^eval_agent doctor: error: EVAL_BACKEND: doctor probes a model behind")

    def test_no_model_is_a_configuration_error(self) -> None:
        out, err, code = self.doctor_at("http://127.0.0.1:9/v1", EVAL_MODEL="")
        self.assertEqual((out, code), ("", 2))
        self.assertEqual(
            err, "eval_agent doctor: error: EVAL_MODEL: required by the openai backend (or give --model)\n"
        )

    def test_a_variable_that_is_not_a_setting_is_a_warning_as_it_may_be_a_task_files_placeholder(self) -> None:
        out, err, code, _ = self.doctor(EVAL_TEMPRATURE="0")
        self.assertEqual(code, 0, out)
        self.assertIn("eval_agent doctor: warning: EVAL_TEMPRATURE: not a setting", err)
        self.assertIn("did you mean EVAL_TEMPERATURE?", err)

    def test_flags_are_the_runs_flags(self) -> None:
        out, _, code, fake = self.doctor(argv=("--temperature", "0.25"))
        self.assertEqual(code, 0, out)
        self.assertEqual(fake.received[0].json["temperature"], 0.25)


if __name__ == "__main__":
    unittest.main()
