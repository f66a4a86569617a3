"""Settings: a bad flag or variable is one line naming it (tables, in-process); each subcommand's wiring of exit 2."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import unittest
from decimal import Decimal
from http.server import BaseHTTPRequestHandler

from backends import BACKENDS
from eval_agent import DECLARED, configure
from harness.config import RUN_SETTINGS
from harness.records import ConfigError, Outputs
from harness.selection import select_tasks, shard_of
from harness.settings import refuse_unknown
from harness.taskfile import load_task_file
from tests.support import (
    CANONICAL_TASKS,
    DATA,
    ROOT,
    SHIPPED_TASKS,
    Received,
    TempDirTestCase,
    canned,
    canonical_task_data,
    clean_env,
    run_cli,
)

AUTO_RUNS = "expected auto or auto:MAX, MAX a whole number from 1 to 100"
HTTP = {"EVAL_BACKEND": "http", "EVAL_AGENT_URL": "http://127.0.0.1:9/run"}
SECRET = "hdr-0b8d41-secret"
MISSING = os.path.join(DATA, "no-such-folder", "r.json")

# (name, argv, environment, the one line that names what is wrong)
RUN_ERRORS: list[tuple[str, list[str], dict[str, str], str]] = [
    (
        "a gate that is not a number",
        [],
        {"EVAL_GATE": "abc"},
        "EVAL_GATE: expected a percentage from 0 to 100, got 'abc'",
    ),
    *[
        (f"a gate of {gate}", ["--gate", gate], {}, f"--gate: expected a percentage from 0 to 100, got {gate!r}")
        for gate in ("101", "-1", "nan", "inf")
    ],
    (
        "an unknown backend",
        [],
        {"EVAL_BACKEND": "opneai"},
        "EVAL_BACKEND: unknown backend 'opneai'"
        " (choose from: stub, http, openai, openai-responses, anthropic, command, gemini)",
    ),
    ("an unknown flag", ["--gates", "90"], {}, "unrecognized arguments: --gates 90 (see --help)"),
    ("a flag without its value", ["--gate"], {}, "argument --gate: expected one argument (see --help)"),
    ("no runs", ["--runs", "0"], {}, "--runs: expected a whole number from 1 to 100, auto or auto:MAX, got '0'"),
    (
        "runs in words",
        [],
        {"EVAL_RUNS": "many"},
        "EVAL_RUNS: expected a whole number from 1 to 100, auto or auto:MAX, got 'many'",
    ),
    (
        "auto in capitals",
        [],
        {"EVAL_RUNS": "AUTO"},
        "EVAL_RUNS: expected a whole number from 1 to 100, auto or auto:MAX, got 'AUTO'",
    ),
    ("an unknown gate-on", ["--gate-on", "all"], {}, "--gate-on: expected trials or pass-all, got 'all'"),
    *[
        (
            f"runs {value}",
            ["--runs", value],
            {},
            f"--runs: expected auto or auto:MAX, MAX a whole number from 1 to 100, got {value!r}",
        )
        for value in ("auto:0", "auto:x", "auto:101", "auto:", "auto10")
    ],
    (
        "auto runs in the variable",
        [],
        {"EVAL_RUNS": "auto:0"},
        "EVAL_RUNS: expected auto or auto:MAX, MAX a whole number from 1 to 100, got 'auto:0'",
    ),
    *[
        (
            f"a confidence of {value}",
            ["--runs", "auto"],
            {"EVAL_CONFIDENCE": value},
            f"EVAL_CONFIDENCE: expected a percentage above 50 and below 100, got {value!r}",
        )
        for value in ("100", "50", "abc", "99.999999999999")
    ],
    *[
        (
            f"a reliability of {value}",
            ["--runs", "auto"],
            {"EVAL_RELIABILITY": value},
            f"EVAL_RELIABILITY: expected a percentage above 0 and below 100, got {value!r}",
        )
        for value in ("abc", "0", "100", "-5")
    ],
    (
        "a confidence without auto runs",
        ["--confidence", "99"],
        {"EVAL_RUNS": "5"},
        "--confidence: only with --runs auto (or EVAL_RUNS=auto), which it is the confidence of",
    ),
    (
        "a reliability without auto runs",
        [],
        {"EVAL_RELIABILITY": "80"},
        "EVAL_RELIABILITY: only with --runs auto (or EVAL_RUNS=auto), which it is the target of",
    ),
    (
        "concurrency 0",
        [],
        {"EVAL_CONCURRENCY": "0"},
        "EVAL_CONCURRENCY: expected a whole number from 1 to 256, got '0'",
    ),
    *[
        (
            f"a shard of {value}",
            ["--shard", value],
            {},
            f"--shard: expected K/N with 1 <= K <= N, e.g. 2/4, got {value!r}",
        )
        for value in ("0/4", "5/4", "2")
    ],
    ("a dry run of maybe", [], {"EVAL_DRY_RUN": "maybe"}, "EVAL_DRY_RUN: expected 1 or 0, got 'maybe'"),
    (
        "results in a missing folder",
        ["--out", MISSING],
        {},
        f"--out: cannot write {MISSING}: no folder {os.path.dirname(MISSING)}",
    ),
    (
        "JUnit in a missing folder",
        [],
        {"EVAL_JUNIT": MISSING},
        f"EVAL_JUNIT: cannot write {MISSING}: no folder {os.path.dirname(MISSING)}",
    ),
    (
        "a step summary in a missing folder",
        [],
        {"GITHUB_STEP_SUMMARY": MISSING},
        f"GITHUB_STEP_SUMMARY: cannot write {MISSING}: no folder {os.path.dirname(MISSING)}",
    ),
    ("results into a folder", ["--out", DATA], {}, f"--out: cannot write {DATA}: it is a folder"),
    ("results over a device", ["--out", "/dev/null"], {}, "--out: cannot write /dev/null: not a regular file"),
    ("JUnit over a device", [], {"EVAL_JUNIT": "/dev/zero"}, "EVAL_JUNIT: cannot write /dev/zero: not a regular file"),
    (
        "results over the task file",
        ["--out", CANONICAL_TASKS, "--tasks", CANONICAL_TASKS],
        {},
        f"--out: {CANONICAL_TASKS} is the task file (--tasks); a run never writes over what it reads",
    ),
    (
        "results over the baseline",
        ["--baseline", "base.json"],
        {"EVAL_RESULTS": "./base.json"},
        "EVAL_RESULTS: ./base.json is the baseline (--baseline); a run never writes over what it reads",
    ),
    (
        "JUnit over the results",
        ["--junit", "r.json", "--out", "r.json"],
        {},
        "--junit: r.json is also --out; each report needs a file of its own",
    ),
    (
        "the HTML page over the task file",
        ["--tasks", "t.json"],
        {"EVAL_HTML": "t.json"},
        "EVAL_HTML: t.json is the task file (--tasks); a run never writes over what it reads",
    ),
    (
        "a system prompt file that is not there",
        ["--system-prompt-file", "nope.txt"],
        {},
        "--system-prompt-file: cannot read nope.txt: No such file or directory",
    ),
]

HTTP_ERRORS: list[tuple[str, dict[str, str], str]] = [
    ("no URL", {"EVAL_AGENT_URL": ""}, "EVAL_AGENT_URL: required by the http backend (or give --agent-url)"),
    (
        "not http",
        {"EVAL_AGENT_URL": "ftp://host/run"},
        "EVAL_AGENT_URL: expected an http:// or https:// URL with a host, got 'ftp://host/run'",
    ),
    (
        "no scheme",
        {"EVAL_AGENT_URL": "localhost:3000/run"},
        "EVAL_AGENT_URL: expected an http:// or https:// URL with a host, got 'localhost:3000/run'",
    ),
    (
        "a bad port, its credentials hidden",
        {"EVAL_AGENT_URL": "http://u:pw@host:99999/run"},
        "EVAL_AGENT_URL: not a valid URL: http://***@host:99999/run",
    ),
    ("a URL that does not parse", {"EVAL_AGENT_URL": "http://[::1"}, "EVAL_AGENT_URL: not a valid URL: http://[::1"),
    (
        "a token of spaces",
        {"EVAL_AGENT_TOKEN": "   "},
        "EVAL_AGENT_TOKEN: only whitespace; leave it unset to send none",
    ),
    ("a timeout of 0", {"EVAL_TIMEOUT": "0"}, "EVAL_TIMEOUT: expected a number from 0.001 to 3600.0, got '0'"),
    (
        "a timeout in words",
        {"EVAL_TIMEOUT": "soon"},
        "EVAL_TIMEOUT: expected a number from 0.001 to 3600.0, got 'soon'",
    ),
    ("retries in words", {"EVAL_RETRIES": "two"}, "EVAL_RETRIES: expected a whole number from 0 to 10, got 'two'"),
    (
        "a size with a unit",
        {"EVAL_MAX_RESPONSE_BYTES": "10MB"},
        "EVAL_MAX_RESPONSE_BYTES: expected a whole number from 1 to 1099511627776, got '10MB'",
    ),
    (
        "a body that sets the prompt",
        {"EVAL_AGENT_BODY": '{"prompt": "hi"}'},
        "EVAL_AGENT_BODY: cannot set 'prompt'; the harness sends it",
    ),
    ("a body that is a list", {"EVAL_AGENT_BODY": "[1]"}, "EVAL_AGENT_BODY: expected a JSON object"),
    (
        "a body nested past any reader",
        {"EVAL_AGENT_BODY": '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}"},
        "EVAL_AGENT_BODY: JSON nested too deeply to read",
    ),
    ("a body with NaN", {"EVAL_AGENT_BODY": '{"a": NaN}'}, "EVAL_AGENT_BODY: NaN is not JSON"),
    (
        "a body with a lone surrogate",
        {"EVAL_AGENT_BODY": '{"a": "\\ud800"}'},
        "EVAL_AGENT_BODY: not Unicode text: a lone surrogate (\\ud800)",
    ),
    (
        "headers nested past any reader",
        {"EVAL_AGENT_HEADERS": "[" * 50_000 + "]" * 50_000},
        "EVAL_AGENT_HEADERS: expected a JSON object of header names to strings, got invalid JSON",
    ),
    (
        "a token that breaks the request line",
        {"EVAL_AGENT_TOKEN": "abc\r\nX-Injected: 1"},
        "EVAL_AGENT_TOKEN: must be one line of printable Latin-1 text",
    ),
    (
        "a token beside an Authorization header",
        {"EVAL_AGENT_TOKEN": "t", "EVAL_AGENT_HEADERS": '{"Authorization": "Basic x"}'},
        "EVAL_AGENT_TOKEN: set, and EVAL_AGENT_URL or EVAL_AGENT_HEADERS carries credentials too; give one",
    ),
    (
        "headers that are not JSON, their value not echoed",
        {"EVAL_AGENT_HEADERS": "{not json " + SECRET},
        "EVAL_AGENT_HEADERS: expected a JSON object of header names to strings, got invalid JSON",
    ),
    (
        "a header value that is not text, not echoed",
        {"EVAL_AGENT_HEADERS": json.dumps({"X-Key": ["a", SECRET]})},
        "EVAL_AGENT_HEADERS: the value of X-Key must be one line of printable Latin-1 text",
    ),
    (
        "a header the harness owns",
        {"EVAL_AGENT_HEADERS": json.dumps({"Content-Type": SECRET})},
        "EVAL_AGENT_HEADERS: Content-Type is set by the harness and cannot be overridden",
    ),
]

OTHER_BACKEND_ERRORS: list[tuple[str, dict[str, str], str]] = [
    (
        "openai without a model",
        {"EVAL_BACKEND": "openai"},
        "EVAL_MODEL: required by the openai backend (or give --model)",
    ),
    (
        "anthropic without a model",
        {"EVAL_BACKEND": "anthropic"},
        "EVAL_MODEL: required by the anthropic backend (or give --model)",
    ),
    (
        "a temperature out of range",
        {"EVAL_BACKEND": "openai", "EVAL_MODEL": "m", "EVAL_TEMPERATURE": "3"},
        "EVAL_TEMPERATURE: expected a number from 0.0 to 2.0, got '3'",
    ),
    (
        "a base URL that is not one",
        {"EVAL_BACKEND": "anthropic", "EVAL_MODEL": "m", "ANTHROPIC_BASE_URL": "api.anthropic.com"},
        "ANTHROPIC_BASE_URL: expected an http:// or https:// URL with a host, got 'api.anthropic.com'",
    ),
    (
        "a key that breaks a header",
        {"EVAL_BACKEND": "openai", "EVAL_MODEL": "m", "OPENAI_API_KEY": "sk-1\n"},
        "OPENAI_API_KEY: must be one line of printable Latin-1 text",
    ),
    (
        "max tokens of 0",
        {"EVAL_BACKEND": "anthropic", "EVAL_MODEL": "m", "EVAL_MAX_TOKENS": "0"},
        "EVAL_MAX_TOKENS: expected a whole number from 1 to 1000000, got '0'",
    ),
    (
        "a command with no command",
        {"EVAL_BACKEND": "command", "EVAL_AGENT_CMD": ""},
        "EVAL_AGENT_CMD: required by the command backend (or give --agent-cmd)",
    ),
    (
        "a command that is not there",
        {"EVAL_BACKEND": "command", "EVAL_AGENT_CMD": "no-such-agent --x"},
        "EVAL_AGENT_CMD: 'no-such-agent' is not an executable file or a command on PATH",
    ),
    (
        "a command that does not split",
        {"EVAL_BACKEND": "command", "EVAL_AGENT_CMD": "python 'unclosed"},
        "EVAL_AGENT_CMD: cannot split the command: No closing quotation",
    ),
]


# (name, argv, environment, the backend chosen, or the one line that says why none can be)
CHOICES: list[tuple[str, list[str], dict[str, str], str]] = [
    ("no backend setting: the stub", [], {}, "stub"),
    ("an agent URL: http", [], {"EVAL_AGENT_URL": "http://127.0.0.1:9/run"}, "http"),
    ("a command: command", [], {"EVAL_AGENT_CMD": sys.executable}, "command"),
    ("a model and an OpenAI key: openai", [], {"EVAL_MODEL": "m", "OPENAI_API_KEY": "sk-1234"}, "openai"),
    ("a model and an Anthropic key: anthropic", ["--model", "m"], {"ANTHROPIC_API_KEY": "ak-1234"}, "anthropic"),
    ("a model and a Gemini key: gemini", ["--model", "m"], {"GEMINI_API_KEY": "gk-1234"}, "gemini"),
    ("a provider's key set for other tools chooses nothing", [], {"OPENAI_API_KEY": "sk-1234"}, "stub"),
    ("and conflicts with nothing", [], {"EVAL_AGENT_URL": "http://127.0.0.1:9/run", "ANTHROPIC_API_KEY": "ak"}, "http"),
    (
        "a model alone could be either provider",
        [],
        {"EVAL_MODEL": "m"},
        "EVAL_MODEL: read by the openai, anthropic and gemini backends alike;"
        " choose one with EVAL_BACKEND (or --backend)",
    ),
    (
        "a model with both providers' keys",
        [],
        {"EVAL_MODEL": "m", "OPENAI_API_KEY": "sk-1234", "ANTHROPIC_API_KEY": "ak-1234"},
        "EVAL_MODEL: read by the openai, anthropic and gemini backends alike;"
        " choose one with EVAL_BACKEND (or --backend)",
    ),
    (
        "a timeout alone",
        [],
        {"EVAL_TIMEOUT": "5"},
        "EVAL_TIMEOUT: read by the http, openai, anthropic, command and gemini backends alike;"
        " choose one with EVAL_BACKEND (or --backend)",
    ),
    (
        "settings of two backends",
        ["--agent-cmd", sys.executable],
        {"EVAL_AGENT_URL": "http://127.0.0.1:9/run"},
        "EVAL_AGENT_URL (http), --agent-cmd (command): no one backend reads all of these;"
        " choose one with EVAL_BACKEND (or --backend)",
    ),
    (
        "a URL for the stub",
        ["--backend", "stub", "--agent-url", "http://127.0.0.1:9/run"],
        {},
        "--agent-url: set, but the stub backend does not read it",
    ),
    (
        "a command and a token for openai",
        [],
        {"EVAL_BACKEND": "openai", "EVAL_MODEL": "m", "EVAL_AGENT_CMD": "x", "EVAL_AGENT_TOKEN": "t0ken"},
        "EVAL_AGENT_TOKEN, EVAL_AGENT_CMD: set, but the openai backend does not read them",
    ),
]


class ConfigurationTables(unittest.TestCase):
    def assert_config_error(self, argv: list[str], environ: dict[str, str], message: str) -> None:
        with self.assertRaises(ConfigError) as caught:
            configure(argv, environ)
        self.assertEqual(str(caught.exception), message)

    def test_each_bad_run_setting_is_one_line_naming_it(self) -> None:
        for name, argv, environ, message in RUN_ERRORS:
            with self.subTest(name):
                self.assert_config_error(argv, environ, message)

    def test_each_bad_http_setting_is_one_line_naming_it_and_no_secret(self) -> None:
        for name, environ, message in HTTP_ERRORS:
            with self.subTest(name):
                self.assert_config_error([], {**HTTP, **environ}, message)
                self.assertNotIn(SECRET, message)

    def test_each_bad_provider_or_command_setting_is_one_line_naming_it(self) -> None:
        for name, environ, message in OTHER_BACKEND_ERRORS:
            with self.subTest(name):
                self.assert_config_error([], environ, message)

    def test_the_backend_is_the_one_named_else_the_one_its_settings_belong_to_else_the_stub(self) -> None:
        for name, argv, environ, expected in CHOICES:
            with self.subTest(name):
                if expected in BACKENDS:
                    self.assertEqual(configure(argv, environ)[1], expected)
                else:
                    self.assert_config_error(argv, environ, expected)

    def test_a_flag_names_itself_when_it_is_the_bad_one(self) -> None:
        self.assert_config_error(
            ["--timeout", "soon"], HTTP, "--timeout: expected a number from 0.001 to 3600.0, got 'soon'"
        )
        self.assert_config_error(
            ["--agent-url", "ftp://x/"],
            HTTP,
            "--agent-url: expected an http:// or https:// URL with a host, got 'ftp://x/'",
        )


class SettingsResolve(unittest.TestCase):
    def test_a_flag_wins_over_its_variable(self) -> None:
        config, _, settings = configure(
            ["--gate", "90", "--timeout", "5"], {**HTTP, "EVAL_GATE": "abc", "EVAL_TIMEOUT": "soon"}
        )
        self.assertEqual((config.gate, settings.timeout), (Decimal(90), 5.0))

    def test_an_empty_variable_counts_as_unset(self) -> None:
        config, backend, _ = configure([], {"EVAL_GATE": "", "EVAL_BACKEND": "", "EVAL_RUNS": ""})
        self.assertEqual((config.gate, backend, config.runs), (Decimal(80), "stub", 1))

    def test_auto_runs_read_their_most_trials_confidence_and_reliability(self) -> None:
        from harness.adaptive import Auto

        table = [
            (["--runs", "auto"], {}, Auto(10, Decimal(95), Decimal(90))),
            ([], {"EVAL_RUNS": "auto:25"}, Auto(25, Decimal(95), Decimal(90))),
            (["--runs", "auto:3", "--confidence", "99", "--reliability", "80"], {}, Auto(3, Decimal(99), Decimal(80))),
            ([], {"EVAL_RUNS": " AUTO ", "EVAL_CONFIDENCE": "90", "EVAL_RELIABILITY": "99.5"}, None),
        ]
        for argv, environ, expected in table:
            with self.subTest(argv=argv, environ=environ):
                if expected is None:
                    with self.assertRaises(ConfigError):
                        configure(argv, environ)
                    continue
                config, _, _ = configure(argv, environ)
                self.assertEqual((config.auto, config.runs), (expected, expected.most))
        config, _, _ = configure(["--runs", "4"], {})
        self.assertEqual((config.auto, config.runs), (None, 4))

    def test_an_agent_url_alone_selects_the_http_backend(self) -> None:
        _, backend, settings = configure([], {"EVAL_AGENT_URL": "http://127.0.0.1:9/run"})
        self.assertEqual(
            (backend, settings.url, settings.retries, settings.timeout), ("http", "http://127.0.0.1:9/run", 2, 60.0)
        )

    def test_outputs_come_from_flags_and_variables_and_the_ci_summary_is_added(self) -> None:
        config, _, _ = configure(
            ["--junit", "j.xml", "--html", "page.html"],
            {"EVAL_RESULTS": "r.json", "EVAL_SUMMARY_MD": "s.md", "GITHUB_STEP_SUMMARY": "step.md"},
        )
        self.assertEqual(
            config.outputs,
            Outputs(
                {"results": ("r.json",), "junit": ("j.xml",), "summary": ("s.md", "step.md"), "html": ("page.html",)}
            ),
        )

    def test_globs_come_from_repeated_flags_or_a_comma_separated_variable(self) -> None:
        config, _, _ = configure(["--task", "a*", "--task", "b*"], {"EVAL_CATEGORY_GLOB": "safety, asset.get,"})
        self.assertEqual((config.task_globs, config.category_globs), (("a*", "b*"), ("safety", "asset.get")))

    def test_secrets_have_no_flag_so_they_show_in_no_process_list_or_history(self) -> None:
        declared = [*RUN_SETTINGS, *(setting for backend in BACKENDS.values() for setting in backend.SETTINGS)]
        secrets = {setting.var for setting in declared if setting.secret}
        self.assertEqual(
            secrets,
            {
                "EVAL_AGENT_TOKEN",
                "EVAL_AGENT_HEADERS",
                "OPENAI_API_KEY",
                "ANTHROPIC_API_KEY",
                "GOOGLE_API_KEY",
                "GEMINI_API_KEY",
            },
        )
        self.assertEqual([setting.var for setting in declared if setting.secret and setting.flag], [])

    def test_secrets_stay_out_of_the_settings_repr(self) -> None:
        _, _, settings = configure(
            [],
            {
                **HTTP,
                "EVAL_AGENT_URL": "http://u:pw-1@h/run?key=q-2",
                "EVAL_AGENT_HEADERS": json.dumps({"X-K": SECRET}),
            },
        )
        for secret in ("pw-1", "q-2", SECRET):
            self.assertNotIn(secret, repr(settings))


# (name, environment, the placeholders the task file uses, the one line that names what is wrong)
UNKNOWN_VARIABLES: list[tuple[str, dict[str, str], frozenset[str], str]] = [
    (
        "a misspelt backend setting",
        {"EVAL_AGENT_URI": "http://127.0.0.1:9/run"},
        frozenset(),
        "EVAL_AGENT_URI: not a setting, nor a placeholder in the task file; did you mean EVAL_AGENT_URL?",
    ),
    (
        "a misspelt run setting",
        {"EVAL_GAT": "90"},
        frozenset(),
        "EVAL_GAT: not a setting, nor a placeholder in the task file; did you mean EVAL_GATE?",
    ),
    (
        "nothing near it",
        {"EVAL_COLOUR": "blue"},
        frozenset(),
        "EVAL_COLOUR: not a setting, nor a placeholder in the task file",
    ),
    (
        "a variable for a placeholder this task file does not have",
        {"EVAL_ASSET_ID": "ast_1"},
        frozenset({"EVAL_CANARY"}),
        "EVAL_ASSET_ID: not a setting, nor a placeholder in the task file",
    ),
    (
        "a misspelt canary, with a task file that has none",
        {"EVAL_CANRY": "canary-1"},
        frozenset(),
        "EVAL_CANRY: not a setting, nor a placeholder in the task file; did you mean EVAL_CANARY?",
    ),
    (
        "a misspelt placeholder variable",
        {"EVAL_CANARI": "canary-1"},
        frozenset({"EVAL_CANARY"}),
        "EVAL_CANARI: not a setting, nor a placeholder in the task file; did you mean EVAL_CANARY?",
    ),
    (
        "several at once, in one line",
        {"EVAL_XYZZY": "1", "EVAL_AGENT_URI": "u", "EVAL_RUN": "3"},
        frozenset(),
        "EVAL_AGENT_URI (did you mean EVAL_AGENT_URL?), EVAL_RUN (did you mean EVAL_RUNS?), EVAL_XYZZY:"
        " not settings, nor placeholders in the task file",
    ),
]


# Where the project sets or reads EVAL_ variables outside the settings' declarations.
PROJECT_FILES = (
    "Makefile",
    "action.yml",
    "action/run.sh",
    ".github/workflows/agent-eval.yml",
    ".github/workflows/test.yml",
    ".ci/run",
    "bench/scaling.py",
    "tests/support.py",
)


class UnknownVariables(TempDirTestCase):
    """An EVAL_ variable no setting declares and the task file does not use is exit 2, never silently ignored."""

    def test_each_unknown_variable_is_named_with_the_setting_it_is_nearest(self) -> None:
        for name, environ, placeholders, message in UNKNOWN_VARIABLES:
            with self.subTest(name):
                with self.assertRaises(ConfigError) as caught:
                    refuse_unknown({"PATH": "/bin", **environ}, DECLARED, placeholders)
                self.assertEqual(str(caught.exception), message)

    def test_every_declared_setting_of_every_backend_and_subcommand_is_known_whichever_backend_runs(self) -> None:
        declared = {"EVAL_BACKEND", "EVAL_MCP_HEADERS", *(setting.var for setting in RUN_SETTINGS)}
        declared |= {setting.var for backend in BACKENDS.values() for setting in backend.SETTINGS}
        environ = {name: "x" for name in declared}
        # An empty variable counts as unset; names outside EVAL_ are other tools'; EVAL_TEST_ is the test suite's.
        environ |= {"EVAL_GAT": "", "EVALUATE": "1", "OPENAI_API_KEY": "k", "EVAL_TEST_CHROMIUM": "/usr/bin/chromium"}
        refuse_unknown(environ, DECLARED, frozenset())
        refuse_unknown({"EVAL_CANARY": "canary-1"}, DECLARED, load_task_file(SHIPPED_TASKS).variables)

    def test_the_canonical_canary_under_a_task_file_without_it_is_a_warning_not_an_unknown_setting(self) -> None:
        refuse_unknown({"EVAL_CANARY": "canary-1"}, DECLARED, frozenset({"EVAL_ASSET_ID"}))
        data = canonical_task_data()
        data["tasks"] = [task for task in data["tasks"] if task["id"] == "asset-get-details"]
        env = clean_env(EVAL_TASKS=self.write_json("tasks.json", data), EVAL_CANARY="canary-1")
        warning = "EVAL_CANARY is set, but the task file has no ${EVAL_CANARY}: no reply is checked for the canary"
        stdout, stderr, code = run_cli("--dry-run", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), (f"eval_agent: warning: {warning}\n", 0), stdout)
        stdout, stderr, code = run_cli("validate", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        self.assertIn(f"warning: {warning}", stdout.splitlines())
        stdout, stderr, code = run_cli("--dry-run", env={**env, "EVAL_TASKS": SHIPPED_TASKS}, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0), "the canonical tasks use it")

    def test_every_eval_variable_the_project_sets_is_declared_or_a_placeholder_of_the_shipped_tasks(self) -> None:
        placeholders = load_task_file(SHIPPED_TASKS).variables
        self.assertEqual(placeholders, {"EVAL_CANARY"})
        for path in PROJECT_FILES:
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                named = set(re.findall(r"\bEVAL_[A-Z0-9_]+", f.read()))
            with self.subTest(path):
                self.assertEqual(named - DECLARED - placeholders, set())

    def test_a_run_with_a_misspelt_setting_stops_before_anything_is_sent_also_a_dry_run(self) -> None:
        agent = self.serve(canned)
        message = "EVAL_AGENT_URI: not a setting, nor a placeholder in the task file; did you mean EVAL_AGENT_URL?"
        for args in ([], ["--dry-run"]):
            with self.subTest(args):
                env = clean_env(EVAL_AGENT_URI=agent.url())
                self.assertEqual(run_cli(*args, env=env, cwd=self.tmp), ("", f"eval_agent: error: {message}\n", 2))
        self.assertEqual(os.listdir(self.tmp), [])
        self.assertEqual(agent.received, [])

    def test_validate_stops_on_a_misspelt_setting_but_not_on_its_task_files_placeholder(self) -> None:
        env = clean_env(EVAL_TASK=SHIPPED_TASKS)
        self.assertEqual(
            run_cli("validate", env=env, cwd=self.tmp),
            (
                "",
                "eval_agent validate: error: EVAL_TASK: not a setting, nor a placeholder in the task file;"
                " did you mean EVAL_TASKS?\n",
                2,
            ),
        )
        stdout, stderr, code = run_cli("validate", env=clean_env(EVAL_TASKS=SHIPPED_TASKS, EVAL_CANARY="c-1"))
        self.assertEqual((stderr, code), ("", 0), stdout)


class Selection(unittest.TestCase):
    def setUp(self) -> None:
        self.tasks = load_task_file(CANONICAL_TASKS).tasks

    def test_a_glob_that_matches_nothing_is_a_configuration_error(self) -> None:
        for task_globs, category_globs, message in [
            (["asset-get-detials"], [], "--task 'asset-get-detials' matches no task id"),
            ([], ["Safety"], "--category 'Safety' matches no task category"),
            (["safety-*"], ["asset.*"], "--task and --category together select no task"),
        ]:
            with self.subTest(message):
                with self.assertRaises(ConfigError) as caught:
                    select_tasks(self.tasks, task_globs, category_globs)
                self.assertEqual(str(caught.exception), message)

    def test_a_shard_with_no_task_left_is_a_configuration_error(self) -> None:
        with self.assertRaises(ConfigError) as caught:
            shard_of(self.tasks, 11, 11)
        self.assertEqual(
            str(caught.exception), "--shard 11/11: 10 selected tasks leave this shard empty; use at most 10 shards"
        )


class Wiring(TempDirTestCase):
    """A subprocess per subcommand: a ConfigError is `eval_agent[ SUB]: error: ...`, exit 2, and nothing written."""

    def assert_exit_2(self, args: list[str], message: str, **env: str) -> None:
        self.assertEqual(run_cli(*args, env=clean_env(**env), cwd=self.tmp), ("", f"{message}\n", 2))
        self.assertEqual(os.listdir(self.tmp), [], "a configuration error runs nothing and writes nothing")

    def test_a_run(self) -> None:
        self.assert_exit_2(
            [], "eval_agent: error: EVAL_GATE: expected a percentage from 0 to 100, got 'abc'", EVAL_GATE="abc"
        )

    def test_a_run_with_an_invalid_task_file_names_the_file_and_json_path(self) -> None:
        path = os.path.join(DATA, "tasks", "invalid", "required-args-not-a-list.json")
        self.assert_exit_2(
            ["--tasks", path], f"eval_agent: error: {path}: tasks[0].expect.requiredArgs: expected a list of strings"
        )

    def test_merge(self) -> None:
        self.assert_exit_2(
            ["merge", "missing.json", "--out", "m.json"],
            "eval_agent merge: error: missing.json: cannot read: No such file or directory",
        )

    def test_compare(self) -> None:
        self.assert_exit_2(
            ["compare", "a.json", "b.json"], "eval_agent compare: error: a.json: cannot read: No such file or directory"
        )

    def test_validate(self) -> None:
        self.assert_exit_2(
            ["validate", "--tasks", "nope.json"],
            "eval_agent validate: error: nope.json: cannot read the task file: No such file or directory",
        )

    def test_tools(self) -> None:
        self.assert_exit_2(["tools"], "eval_agent tools: error: give --mcp-command or --mcp-url (see --help)")


class Help(unittest.TestCase):
    def test_help_lists_every_setting_with_its_variable_the_subcommands_and_the_exit_codes(self) -> None:
        stdout, stderr, code = run_cli("--help")
        self.assertEqual((stderr, code), ("", 0))
        for flag, var in [
            ("--backend", "EVAL_BACKEND"),
            ("--gate", "EVAL_GATE"),
            ("--agent-url", "EVAL_AGENT_URL"),
            ("--timeout", "EVAL_TIMEOUT"),
        ]:
            self.assertIn(flag, stdout)
            self.assertIn(var, stdout)
        for secret in ("EVAL_AGENT_TOKEN", "EVAL_AGENT_HEADERS", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            self.assertIn(f"\n  {secret} ", stdout)
        for subcommand in ("merge", "compare", "validate", "tools"):
            self.assertRegex(stdout, rf"\n  {subcommand} +\w")
        self.assertIn("4 internal error (a bug in the harness)", " ".join(stdout.split()))


if __name__ == "__main__":
    unittest.main()


class OutputFiles(TempDirTestCase):
    """What a run writes is checked before it sends anything, and it never replaces what is not a regular file."""

    def test_a_results_path_that_cannot_be_written_stops_the_run_before_any_request(self) -> None:
        agent = self.serve(canned)
        os.mkfifo(os.path.join(self.tmp, "fifo"))
        os.mkdir(os.path.join(self.tmp, "eval-results.json"))
        # Not /dev/null here: a harness that failed this test would replace it (the table above checks it in-process).
        for args, message in [
            (["--out", "fifo"], "--out: cannot write fifo: not a regular file"),
            ([], "EVAL_RESULTS: cannot write eval-results.json: it is a folder"),
        ]:
            with self.subTest(message):
                env = clean_env(EVAL_AGENT_URL=agent.url())
                self.assertEqual(run_cli(*args, env=env, cwd=self.tmp), ("", f"eval_agent: error: {message}\n", 2))
        self.assertEqual(agent.received, [])
        self.assertTrue(stat.S_ISFIFO(os.stat(os.path.join(self.tmp, "fifo")).st_mode))

    def test_through_a_symlink_the_file_it_points_to_is_replaced_and_the_link_kept(self) -> None:
        os.mkdir(os.path.join(self.tmp, "real"))
        os.symlink(os.path.join("real", "results.json"), os.path.join(self.tmp, "link.json"))
        _, _, code = run_cli("--out", "link.json", cwd=self.tmp)
        self.assertEqual(code, 0)
        self.assertTrue(os.path.islink(os.path.join(self.tmp, "link.json")))
        self.assertEqual(self.read_json("real/results.json")["total"], 10)
        self.assertEqual(sorted(os.listdir(os.path.join(self.tmp, "real"))), ["results.json"])

    def test_a_folder_gone_by_the_end_of_the_run_is_named_as_given_not_as_a_temporary_file(self) -> None:
        folder = os.path.join(self.tmp, "out")
        os.mkdir(folder)

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if os.path.isdir(folder):
                os.rmdir(folder)  # the results folder goes away while the run is on
            canned(received, handler)

        env = clean_env(EVAL_AGENT_URL=self.serve(respond).url())
        _, stderr, code = run_cli("--out", "out/r.json", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("eval_agent: error: cannot write out/r.json: No such file or directory\n", 2))
