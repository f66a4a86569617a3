"""Results files made to break a reader: load_results refuses them with the JSON path, or every report renders them.

A results file that loads is one that report, compare and merge can render: no malformed file is an internal error.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import tempfile
import unittest
from typing import Any
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

import eval_agent
from harness.records import ConfigError
from harness.results import load_results
from tests.support import SHIPPED_TASKS, TempDirTestCase, run_cli
from tests.test_properties import ENOUGH, mutated

PLACES = " of at most 10 decimals"
# Each: where the real file is changed, to what (DROP: the key removed), and what load_results says of it.
DROP = object()
MALFORMED: list[tuple[tuple[Any, ...], Any, str]] = [
    (("manifest", "taskFile"), None, "manifest.taskFile: expected an object, got null"),
    (("manifest", "selection", "shard"), "x", 'manifest.selection.shard: expected K/N, a shard, got the string "x"'),
    (
        ("manifest", "replay"),
        {"cassette": "c.jsonl", "sha256": "0" * 64, "recordMissing": "no"},
        'manifest.replay.recordMissing: expected true or false, got the string "no"',
    ),
    (("failed",), DROP, "the top level: no failed"),
    (("gatePassed",), DROP, "the top level: no gatePassed"),
    (("passRate",), 1e308, "passRate: expected a percentage from 0 to 100, got 1e+308"),
    (("gate",), 1e-300, "gate: expected a percentage from 0 to 100 of at most 10 decimals, got 1e-300"),
    (("internalError",), 1, "internalError: expected a string or null, got 1"),
    (("passAllK",), None, "passAllK: expected an object, got null"),
    (("passAllK", "1"), None, "passAllK.1: expected a percentage from 0 to 100, got null"),
    (("passAllK",), {"x": 50}, 'passAllK: "x": expected a number of runs, got the string "x"'),
    (("passAllK",), {"\u00b2": 50}, 'passAllK: "\\u00b2": expected a number of runs, got the string "\u00b2"'),
    (
        ("manifest", "selection", "shard"),
        "1/" + "9" * 5000,
        f'manifest.selection.shard: expected K/N, a shard, got the string "1/{"9" * 35}..."',
    ),
    (("flaky",), [1], "flaky[0]: expected a string, got 1"),
    (("violations",), 1, "violations: expected a list, got a number"),
    (("usage",), 1, "usage: expected an object, got a number"),
    (
        ("growth",),
        {"toolCalls": {"then": 6.0, "now": 6.0, "percent": 0.0, "limit": -5, "exceeded": True, "tasks": 8}},
        "growth.toolCalls.limit: expected a percentage from 0 to 1000000, got -5",
    ),
    (("byCategory", "asset.search"), 1, "byCategory.asset.search: expected an object, got a number"),
    *[
        (
            ("adaptive",),
            {"max": 10, "confidence": 95, "reliability": 90, "trials": 1, "fixedTrials": 10, "saved": 0, **setting},
            message,
        )  # what no run writes, and report and merge could not work the test out of (confidence 100: no error)
        for setting, message in [
            (
                {"confidence": 100},
                f"adaptive.confidence: expected a percentage above 50 and below 100{PLACES}, got 100",
            ),
            ({"confidence": 50}, f"adaptive.confidence: expected a percentage above 50 and below 100{PLACES}, got 50"),
            (
                {"reliability": 100},
                f"adaptive.reliability: expected a percentage above 0 and below 100{PLACES}, got 100",
            ),
            ({"reliability": 0}, f"adaptive.reliability: expected a percentage above 0 and below 100{PLACES}, got 0"),
            (
                {"reliability": 1e-322},
                f"adaptive.reliability: expected a percentage above 0 and below 100{PLACES}, got 1e-322",
            ),
            ({"max": 101}, "adaptive.max: expected a whole number from 1 to 100, got 101"),
        ]
    ],
    (
        ("manifest", "adaptive"),
        {"max": 10, "confidence": "95", "reliability": 90},
        f'manifest.adaptive.confidence: expected a percentage above 50 and below 100{PLACES}, got the string "95"',
    ),
    (
        ("byCategory", "asset.search", "passed"),
        1.5,
        "byCategory.asset.search.passed: expected a whole number up to 2^53, got 1.5",
    ),
    (("results", 0, "expected"), None, "results[0].expected: expected a string, got null"),
    (("results", 0, "passes"), 3, "results[0].passes: 3, more than its 2 trials"),
    (
        ("results", 0, "trialResults", 0, "attempts"),
        10**20,
        "results[0].trialResults[0].attempts: expected a whole number up to 2^53, got 100000000000000000000",
    ),
    (
        ("results", 0, "trialResults", 0, "durationMs"),
        float("inf"),
        "results[0].trialResults[0].durationMs: expected a number from -2^53 to 2^53, got Infinity",
    ),
    (
        ("results", 5, "trialResults", 0, "turns"),
        DROP,
        "results[5].trialResults[0]: a conversation, but no turns",
    ),
    (
        ("results", 5, "trialResults", 0, "conversation", 0, "steps"),
        [],
        "results[5].trialResults[0].conversation[0].steps: expected a list of at least one, got an empty list",
    ),
    (
        ("results", 5, "trialResults", 0, "conversation", 0, "steps", 0, "results", 0, "scripted"),
        "yes",
        "results[5].trialResults[0].conversation[0].steps[0].results[0].scripted: expected true or false, got the"
        ' string "yes"',
    ),
    (
        ("results", 5, "trialResults", 0, "conversation", 0, "steps", 0, "results", 0, "source"),
        "guessed",
        "results[5].trialResults[0].conversation[0].steps[0].results[0].source: expected script, sequence, case,"
        ' default, environment, unscripted or injected, got the string "guessed"',
    ),
    (
        ("results", 5, "trialResults", 0, "conversation", 0, "steps", 0, "results", 0, "case"),
        -1,
        "results[5].trialResults[0].conversation[0].steps[0].results[0].case: expected a whole number up to 2^53,"
        " got -1",
    ),
]


def changed(document: dict[str, Any], where: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A copy of the document with the value at `where` replaced (or dropped)."""
    document = copy.deepcopy(document)
    parent = document
    for key in where[:-1]:
        parent = parent[key]
    if value is DROP:
        del parent[where[-1]]
    else:
        parent[where[-1]] = value
    return document


class ResultsFiles(TempDirTestCase):
    document: dict[str, Any]

    @classmethod
    def setUpClass(cls) -> None:
        """A real results file of two runs of the shipped tasks (conversations too), one task failing, with usage."""
        with tempfile.TemporaryDirectory() as tmp:
            run_cli("--tasks", SHIPPED_TASKS, "--runs", "2", "--shard", "1/1", "--out", "r.json", cwd=tmp)
            with open(os.path.join(tmp, "r.json"), encoding="utf-8") as f:
                cls.document = json.load(f)
        first = cls.document["results"][0]
        first.update(status="fail", passes=1, flaky=True, code="tool:wrong-name", reason="expected another tool")
        first["trialResults"][1].update(status="fail", code="tool:wrong-name", reason="expected another tool")
        first["trialResults"][0]["usage"] = {"inputTokens": 30, "outputTokens": 4}
        cls.document["usage"] = {"inputTokens": 30, "outputTokens": 4, "latencyMs": 12.5}
        conversation = cls.document["results"][5]["trialResults"][0]["conversation"]
        assert conversation[0]["steps"][0]["results"], "the shipped tasks changed: results[5] is no conversation"
        conversation[0]["steps"][-1]["error"] = "reply:timeout: no reply in 30 s"

    def write(self, name: str, document: Any) -> str:
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(document, f)
        return path

    def main(self, *argv: str) -> tuple[int, str]:
        """(exit code, stderr) of the CLI run here, with no job summary of the real environment's to append to."""
        err = io.StringIO()
        with (
            mock.patch.dict(os.environ, {"GITHUB_STEP_SUMMARY": ""}),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(err),
        ):
            code = eval_agent.main(list(argv))
        return code, err.getvalue()

    def readers(self, path: str) -> list[list[str]]:
        """report (of it, and against it), compare (either way round) and merge with every report, on the file."""
        base = self.write("base.json", self.document)
        out = os.path.join(self.tmp, "out")
        return [
            ["report", path, "-o", f"{out}.html"],
            ["report", base, "--baseline", path, "-o", f"{out}.changes.html"],
            ["compare", base, path, "--allow-partial", "--out", f"{out}.compare.json"],
            ["compare", path, base, "--allow-partial"],
            [
                "merge",
                path,
                "--allow-partial",
                "--out",
                f"{out}.json",
                "--junit",
                f"{out}.xml",
                "--summary-md",
                f"{out}.md",
            ],
            ["merge", path, "--allow-partial", "--out", f"{out}.json", "--html", f"{out}.merged.html"],
        ]

    def test_the_real_file_is_read_by_every_reader(self) -> None:
        path = self.write("r.json", self.document)
        for argv in self.readers(path):
            with self.subTest(argv[0]):
                self.assertEqual(self.main(*argv), (0, ""))

    def test_lone_surrogates_an_agent_sent_render_in_every_reader(self) -> None:
        # A run writes an agent's lone surrogate as the JSON escape that reads back as it (results.stage).
        document = changed(self.document, ("runId",), "run-\ud800")
        document["byCategory"]["\udfff"] = {"passed": 0, "total": 0}
        document["results"][0]["trialResults"][0]["toolCalls"][0]["args"]["\ud800"] = "\udfff"
        document["results"][0]["trialResults"][1]["text"] = "\ud800"
        path = self.write("surrogates.json", document)
        for argv in self.readers(path):
            with self.subTest(argv[0]):
                self.assertEqual(self.main(*argv), (0, ""))

    def test_a_file_that_would_break_a_report_is_refused_with_its_json_path(self) -> None:
        for where, value, message in MALFORMED:
            with self.subTest(where=where, value=value):
                path = self.write("bad.json", changed(self.document, where, value))
                with self.assertRaises(ConfigError) as caught:
                    load_results(path)
                self.assertEqual(str(caught.exception), f"{path}: {message}")

    def test_a_file_from_before_results_said_their_source_still_loads(self) -> None:
        document = copy.deepcopy(self.document)
        played = [
            result
            for entry in document["results"]
            for trial in entry["trialResults"]
            for turn in trial.get("conversation", [])
            for step in turn["steps"]
            for result in step.get("results", [])
        ]
        self.assertTrue(played and all(result.pop("source") for result in played))
        self.assertEqual(load_results(self.write("older.json", document))["results"], document["results"])

    def test_an_integer_longer_than_python_reads(self) -> None:
        path = os.path.join(self.tmp, "long.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(self.document).replace('"runs": 2', '"runs": ' + "1" * 5000, 1))
        with self.assertRaises(ConfigError) as caught:
            load_results(path)
        self.assertEqual(
            str(caught.exception), f"{path}: not JSON this harness reads: an integer too long to read as a number"
        )

    def test_report_compare_and_merge_say_it_in_one_line_and_exit_2(self) -> None:
        path = self.write("bad.json", changed(self.document, ("byCategory", "asset.search"), 1))
        line = "error: bad.json: byCategory.asset.search: expected an object, got a number\n"
        for argv, prog in [
            (["report", "bad.json"], "eval_agent report"),
            (["compare", "bad.json", "bad.json"], "eval_agent compare"),
            (["merge", "bad.json", "--out", "merged.json"], "eval_agent merge"),
            (["--baseline", "bad.json", "--out", "run.json"], "eval_agent"),
        ]:
            with self.subTest(argv[0]):
                self.assertEqual(run_cli(*argv, cwd=self.tmp), ("", f"{prog}: {line}", 2))
        self.assertEqual(os.listdir(self.tmp), [os.path.basename(path)])

    @ENOUGH
    @given(st.data())
    def test_any_malformed_file_is_refused_or_rendered_never_an_internal_error(self, data: st.DataObject) -> None:
        document = mutated(copy.deepcopy(self.document), data)
        path = self.write("mutated.json", document)
        for argv in self.readers(path):
            code, stderr = self.main(*argv)
            # A shard that recorded an internal error of its own makes its merge exit 4, as its run did.
            recorded = isinstance(document, dict) and document.get("internalError") and argv[0] == "merge"
            self.assertNotIn("internal error", stderr, argv)
            self.assertTrue(code != 4 or recorded, (argv, stderr))


if __name__ == "__main__":
    unittest.main()
