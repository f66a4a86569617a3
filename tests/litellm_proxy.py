"""A real LiteLLM proxy on loopback in front of the provider fakes: a gateway nobody here wrote, between the harness and
a deterministic model, as teams run one between their agent and the providers they swap.

LiteLLM is a test-only tool (requirements-test.txt); without it the tests that need it skip, and fail under CI=true.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from tests.providers import Event, provider_name
from tests.support import CANNED, LoopbackProxy

LOOPBACK_PICKED_PORT = ("--host", "127.0.0.1", "--port", "0")  # uvicorn binds a free port and says which
STARTUP_TIMEOUT = 120  # seconds: LiteLLM imports for several seconds, far longer on a machine busy with the suite
LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
# The master key the proxy requires (this version refuses to start without one): the harness sends it as its API key.
# Made afresh for each test process, so no key-shaped string sits in the repository.
MASTER_KEY = f"sk-{secrets.token_hex(32)}"
# LiteLLM fetches a few tables from GitHub at startup unless told to use the copies it ships with; no telemetry either.
OFFLINE = {
    **{
        f"LITELLM_LOCAL_{table}": "True"
        for table in (
            "MODEL_COST_MAP",
            "ANTHROPIC_BETA_HEADERS",
            "BLOG_POSTS",
            "POLICY_TEMPLATES",
            "AUTOROUTER_PRESETS",
        )
    },
    "LITELLM_TELEMETRY_DISABLED": "true",
}


def require_litellm() -> None:
    """Skip without LiteLLM, but under CI=true fail: CI installs the test requirements."""
    if importlib.util.find_spec("litellm") is None:
        why = "the LiteLLM tests need litellm[proxy]: make test installs it from requirements-test.txt"
        if os.environ.get("CI") == "true":
            raise AssertionError(f"{why} (under CI=true a missing LiteLLM is a failure)")
        raise unittest.SkipTest(why)


def canned_policy(events: list[Event]) -> tuple[list[Any], str | None]:
    """The stub's canned replies played as a model: for the newest user message, the reply of the step it has reached.

    An unknown prompt raises, so the fake drops the request and the task cannot pass."""
    last_user = max(index for index, event in enumerate(events) if event[0] == "user")
    canned = CANNED[events[last_user][1]]
    steps = canned if isinstance(canned, list) else [canned]
    reply = steps[sum(event[0] == "assistant" for event in events[last_user:])]
    calls = reply.get("toolCalls") or ([reply["toolCall"]] if "toolCall" in reply else [])
    return [(provider_name(call["name"]), call["args"]) for call in calls], reply.get("text")


class LiteLLMProxy:
    """`litellm --config` on 127.0.0.1 in a child process, serving `models` (model name -> litellm_params); the child's
    output goes to a file in `folder`. Any request it makes past loopback goes to a recording forward proxy."""

    def __init__(self, models: Mapping[str, Mapping[str, str]], folder: str) -> None:
        self.config = os.path.join(folder, "litellm.yaml")
        with open(self.config, "w", encoding="utf-8") as f:  # JSON is YAML
            json.dump(
                {
                    "model_list": [
                        {"model_name": name, "litellm_params": dict(params)} for name, params in models.items()
                    ],
                    "general_settings": {"master_key": MASTER_KEY},
                    # /v1/messages for an openai/ model: to its chat completions, not to its Responses API.
                    "litellm_settings": {"use_chat_completions_url_for_anthropic_messages": True},
                },
                f,
            )
        self.log_path = os.path.join(folder, "litellm.log")
        self.egress = LoopbackProxy().__enter__()
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.startup = 0.0  # seconds from start to listening

    def start(self) -> None:
        """Start the proxy on a port it picks, wait (bounded) until it answers; RuntimeError with its output if not."""
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("EVAL_", "LITELLM_"))
            and key.lower() not in ("http_proxy", "https_proxy", "no_proxy")
        }
        env.update(OFFLINE, HTTP_PROXY=self.egress.url, HTTPS_PROXY=self.egress.url, NO_PROXY="127.0.0.1,localhost")
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "litellm.proxy.proxy_cli", "--config", self.config, *LOOPBACK_PICKED_PORT],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=os.path.dirname(self.config),
            )
        deadline = started + STARTUP_TIMEOUT
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the LiteLLM proxy did not start within {STARTUP_TIMEOUT}s:\n{self.output()}")
            time.sleep(0.1)
        self.startup = time.monotonic() - started

    def answers(self) -> bool:
        """Whether the proxy is listening (it says on which port) and its liveness probe answers."""
        if not self.port:
            found = LISTENING.search(self.output())
            if not found:
                return False
            self.port = int(found.group(1))
        try:
            with urllib.request.urlopen(self.url("/health/liveliness"), timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def post(self, path: str, body: Any, key: str = MASTER_KEY) -> tuple[int, Any]:
        """POST JSON with the key as a bearer token and as x-api-key: the status and the JSON body it answered."""
        request = urllib.request.Request(
            self.url(path),
            json.dumps(body).encode(),
            {"Content-Type": "application/json", "Authorization": f"Bearer {key}", "x-api-key": key},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            with error:
                return error.code, json.load(error)

    def output(self) -> str:
        """Everything the proxy printed so far."""
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self) -> None:
        """Stop the proxy (killed if it does not stop within 10 s) and the recording forward proxy."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.egress.__exit__()
