"""Results that follow the call: a tool's scripted `cases`, each answering the calls whose arguments match, and a
`default` for the others; and where every played-back result came from (`source`), in the results file."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from harness.conversation import ToolPlayer
from harness.records import Outcome, Result, Task, ToolCall
from harness.results import task_entry
from harness.running import run_task
from harness.taskfile import load_task_file, parse_task_file
from harness.text import JSON_DEPTH
from tests.providers import Event, conversation_fake
from tests.support import (
    CANONICAL_TASKS,
    SHIPPED_TASKS,
    TempDirTestCase,
    backend_for,
    canonical_task_data,
)

GET, SEARCH, URL = "imageman.asset.get", "imageman.asset.search", "imageman.transform.url"
PROVIDERS = {"openai": ("OPENAI_BASE_URL", "/v1"), "anthropic": ("ANTHROPIC_BASE_URL", "")}


def scripted(tool_results: dict[str, Any], **top: Any) -> Task:
    """The one task of a task file with the canonical tools and these tool results."""
    data = canonical_task_data()
    data["tasks"] = [{"id": "t", "category": "c", "prompt": "p", "toolResults": tool_results, "expect": {"tool": GET}}]
    data.update(top)
    task_file, problems = parse_task_file(json.dumps(data).encode(), "tasks.json", {})
    assert task_file is not None, problems
    return task_file.tasks[0]


def played(entry: Any, *calls: ToolCall | dict[str, Any], tool: str = GET) -> list[tuple[Any, str, int | None]]:
    """What a trial plays back for these calls of one tool (each a call, or its arguments): content, source, case."""
    player = ToolPlayer(scripted({tool: entry}).tool_results)
    made = [call if isinstance(call, ToolCall) else ToolCall(tool, call) for call in calls]
    return [(result.content, result.source, result.case) for result in player.play(tuple(made))]


def one(asset: str) -> dict[str, Any]:
    return {"assetId": asset}


class ChoosingTheResult(TempDirTestCase):
    def test_the_first_case_whose_args_all_match_wins(self) -> None:
        entry = {
            "cases": [
                {"args": {"assetId": "ast_1", "include": ["tags"]}, "result": "ast_1 with tags"},
                {"args": {"assetId": "ast_1"}, "result": "ast_1"},
                {"args": {"assetId": "ast_1"}, "result": "never: the case before answers first"},
                {"args": {}, "result": "any other"},
            ]
        }
        self.assertEqual(
            played(entry, one("ast_1"), {"assetId": "ast_1", "include": ["tags"]}, one("ast_2")),
            [("ast_1", "case", 1), ("ast_1 with tags", "case", 0), ("any other", "case", 3)],
        )

    def test_each_arg_is_compared_by_json_equality(self) -> None:
        entry = {"cases": [{"args": {"assetId": "a", "width": 640}, "result": "640"}], "default": "other"}
        calls = [
            {"assetId": "a", "width": 640.0},
            {"assetId": "a", "width": "640"},
            {"assetId": "a", "width": True},
            {"assetId": "A", "width": 640},
            {"width": 640},
        ]
        self.assertEqual(
            [content for content, _, _ in played(entry, *calls, tool=URL)], ["640", "other", "other", "other", "other"]
        )

    def test_the_arg_values_long_form_takes_its_options(self) -> None:
        entry = {
            "cases": [
                {"args": {"query": {"anyOf": ["launch", "q3 launch"], "ignoreCase": True}}, "result": "case"},
                {"args": {"query": {"anyOf": ["new york, ny"], "ignorePunctuation": True}}, "result": "punctuation"},
                {"args": {"tags": {"anyOf": [["q3"]], "optional": True}, "mediaType": "image"}, "result": "optional"},
            ],
            "default": "none",
        }
        calls = [
            {"query": "LAUNCH"},
            {"query": "Q3 Launch"},
            {"query": "launch photos"},
            {"query": "New York NY"},
            {"mediaType": "image"},
            {"mediaType": "image", "tags": ["q3"]},
            {"mediaType": "image", "tags": ["q4"]},
        ]
        self.assertEqual(
            [content for content, _, _ in played(entry, *calls, tool=SEARCH)],
            ["case", "case", "none", "punctuation", "optional", "optional", "none"],
        )

    def test_a_call_no_case_matches_gets_the_default_value_or_sequence_counted_on_its_own(self) -> None:
        entry = {"cases": [{"args": {"assetId": "ast_1"}, "result": "A"}], "default": {"sequence": ["d1", "d2"]}}
        self.assertEqual(
            played(entry, one("ast_2"), one("ast_1"), one("ast_3"), one("ast_4")),
            [("d1", "default", None), ("A", "case", 0), ("d2", "default", None), ("d2", "default", None)],
        )

    def test_a_sequence_in_a_case_is_played_by_that_cases_own_calls(self) -> None:
        entry = {
            "cases": [
                {"args": {"assetId": "ast_1"}, "result": {"sequence": ["x1", "x2"]}},
                {"args": {"assetId": "ast_2"}, "result": {"sequence": ["y1", "y2"]}},
            ]
        }
        calls = [one("ast_1"), one("ast_2"), one("ast_1"), one("ast_1"), one("ast_2")]
        self.assertEqual([content for content, _, _ in played(entry, *calls)], ["x1", "y1", "x2", "x2", "y2"])

    def test_the_count_goes_on_from_step_to_step_of_a_trial(self) -> None:
        task = scripted({GET: {"cases": [{"args": {"assetId": "ast_1"}, "result": {"sequence": ["x1", "x2"]}}]}})
        player = ToolPlayer(task.tool_results)
        first, second = (player.play((ToolCall(GET, one("ast_1")),))[0].content for _ in range(2))
        self.assertEqual((first, second), ("x1", "x2"))

    def test_echo_inside_a_case_returns_the_calls_argument(self) -> None:
        entry = {
            "cases": [
                {"args": {"assetId": {"anyOf": ["ast_1"], "ignoreCase": True}}, "result": {"id": {"echo": "assetId"}}},
                {"args": {}, "result": {"sequence": [{"missing": {"echo": "assetId"}}]}},
            ]
        }
        self.assertEqual(
            played(entry, one("AST_1"), {"include": ["x"]}),
            [({"id": "AST_1"}, "case", 0), ({"missing": None}, "case", 1)],
        )

    def test_a_call_no_case_matches_and_no_default_is_unscripted(self) -> None:
        entry = {"cases": [{"args": {"assetId": "ast_1"}, "result": "A"}]}
        player = ToolPlayer(scripted({GET: entry}).tool_results)
        (result,) = player.play((ToolCall(GET, one("ast_2")),))
        self.assertEqual(
            (result.content, result.source, result.case, result.scripted),
            (f"no result scripted for {GET}", "unscripted", None, False),
        )

    def test_a_call_whose_arguments_could_not_be_read_matches_no_case(self) -> None:
        entry = {"cases": [{"args": {}, "result": "any"}], "default": "default"}
        unreadable = ToolCall(GET, {}, args_error="sent arguments that are not JSON")
        self.assertEqual(played(entry, unreadable), [("default", "default", None)])

    def test_results_without_cases_say_script_or_sequence_and_a_default_alone_is_a_plain_result(self) -> None:
        self.assertEqual(played("same", one("a"), one("b")), [("same", "script", None)] * 2)
        self.assertEqual(
            played({"sequence": ["s1", "s2"]}, one("a"), one("b")), [("s1", "sequence", None), ("s2", "sequence", None)]
        )
        self.assertEqual(played({"default": "d"}, one("a")), [("d", "script", None)])
        self.assertEqual(scripted({GET: {"default": "d"}}).tool_results, scripted({GET: "d"}).tool_results)
        (unscripted,) = ToolPlayer({}).play((ToolCall(GET, one("a")),))
        self.assertEqual((unscripted.source, unscripted.answered), ("unscripted", False))

    def test_a_literal_object_of_cases_is_written_as_a_sequence_of_one(self) -> None:
        literal = {"cases": [{"args": {}, "result": 1}], "default": 2}
        self.assertEqual(played({"sequence": [literal]}, one("a")), [(literal, "script", None)])
        # An object with other keys beside a `cases` that is no list of cases is a result as it always was.
        plain = {"cases": 3, "deaths": 0}
        self.assertEqual(played(plain, one("a")), [(plain, "script", None)])

    def test_the_files_default_cases_are_every_tasks_and_a_tasks_own_entry_replaces_them(self) -> None:
        cases = {"cases": [{"args": {"assetId": "ast_1"}, "result": "file's"}]}
        task = scripted({}, toolResults={GET: cases})
        self.assertEqual(ToolPlayer(task.tool_results).play((ToolCall(GET, one("ast_1")),))[0].content, "file's")
        own = scripted({GET: "task's"}, toolResults={GET: cases})
        self.assertEqual(ToolPlayer(own.tool_results).play((ToolCall(GET, one("ast_1")),))[0].content, "task's")


class TooDeep(TempDirTestCase):
    def test_a_result_nested_more_levels_than_a_trial_plays_back_is_a_load_error_at_its_path(self) -> None:
        """The harness echoes, masks and writes a result by recursion: 600 levels crashed the run (exit 4)."""
        deep: Any = "x"
        for _ in range(JSON_DEPTH + 1):
            deep = [deep]
        for entry, where in (
            (deep, ""),
            ({"sequence": ["ok", deep]}, ".sequence[1]"),
            ({"cases": [{"args": {}, "result": deep}]}, ".cases[0].result"),
            ({"cases": [{"args": {}, "result": "ok"}], "default": deep}, ".default"),
        ):
            with self.subTest(where):
                data = canonical_task_data()
                data["tasks"] = [
                    {"id": "t", "category": "c", "prompt": "p", "toolResults": {GET: entry}, "expect": {"tool": GET}}
                ]
                task_file, problems = parse_task_file(json.dumps(data).encode(), "tasks.json", {})
                self.assertEqual(
                    (task_file, problems),
                    (None, [f"tasks[0].toolResults.{GET}{where}: nested more than {JSON_DEPTH} levels deep"]),
                )
        scripted({GET: deep[0]})  # as deep as may be


class Hashes(TempDirTestCase):
    def test_the_canonical_tasks_hash_as_they_did_before(self) -> None:
        for path, digest in [
            (CANONICAL_TASKS, "fc3178b87ffc4d68040f9cc71bc6b1e81a044d8f8bb757aeebfdc4f98cc0c095"),
            (SHIPPED_TASKS, "534af406c755697320c96916f64b6d62d4422092a5cbd53e25236d8a790a39ea"),
        ]:
            with self.subTest(path):
                hashes = "".join(task.sha256 for task in load_task_file(path, {}).tasks)
                self.assertEqual(hashlib.sha256(hashes.encode()).hexdigest(), digest)

    def test_a_case_changed_changes_the_hash_in_a_task_and_among_the_files_defaults(self) -> None:
        def entry(asset: str, result: Any, ignore_case: bool = False) -> dict[str, Any]:
            return {"cases": [{"args": {"assetId": {"anyOf": [asset], "ignoreCase": ignore_case}}, "result": result}]}

        first = entry("ast_1", "A")
        for changed in (entry("ast_2", "A"), entry("ast_1", "B"), entry("ast_1", "A", ignore_case=True)):
            with self.subTest(changed):
                self.assertNotEqual(scripted({GET: first}).sha256, scripted({GET: changed}).sha256)
                self.assertNotEqual(
                    scripted({}, toolResults={GET: first}).sha256, scripted({}, toolResults={GET: changed}).sha256
                )
        self.assertEqual(scripted({}, toolResults={GET: first}).sha256, scripted({}, toolResults={GET: first}).sha256)


def wrong_first(events: list[Event]) -> tuple[list[Any], str | None]:
    """Get an asset that is not there, then ast_2, then ast_1 (the other order than a sequence would script), one at a
    time; then compare the two from their results."""
    done = [event for event in events if event[0] == "result"]
    order = ["ast_9", "AST_2", "ast_1"]
    if len(done) < len(order):
        return [("imageman_asset_get", {"assetId": order[len(done)]})], None
    widths = {found["id"]: found["width"] for found in (json.loads(event[2]) for event in done) if "id" in found}
    return [], f"ast_1 is {widths['ast_1']} px wide, ast_2 {widths['ast_2']} px."


COMPARE = {
    "id": "compare-two",
    "category": "asset.get",
    "prompt": "Which is wider, ast_1 or ast_2?",
    "toolResults": {
        GET: {
            "cases": [
                {"args": {"assetId": "ast_1"}, "result": {"id": {"echo": "assetId"}, "width": 4000}},
                {
                    "args": {"assetId": {"anyOf": ["ast_2"], "ignoreCase": True}},
                    "result": {"id": "ast_2", "width": 800},
                },
            ],
            "default": {"error": "no such asset"},
        }
    },
    "expect": {
        "trajectory": [
            {"tool": GET, "argValues": {"assetId": ["ast_1"]}},
            {"tool": GET, "argValues": {"assetId": {"anyOf": ["ast_2"], "ignoreCase": True}}},
        ],
        "order": "any-order",
    },
}


class ProviderConversations(TempDirTestCase):
    def test_an_agent_that_takes_another_path_gets_the_results_of_what_it_called(self) -> None:
        data = canonical_task_data()
        data["tasks"] = [COMPARE]
        (task,) = load_task_file(self.write_json("tasks.json", data), {}).tasks
        for provider, (variable, path) in PROVIDERS.items():
            with self.subTest(provider):
                invalid: list[str] = []
                fake = self.serve(conversation_fake(provider, wrong_first, invalid))
                backend = backend_for({"EVAL_BACKEND": provider, variable: fake.url(path), "EVAL_MODEL": "m"})
                self.addCleanup(backend.transport.close)
                result: Result = run_task(backend, task)
                self.assertEqual((result.outcome, invalid), (Outcome("pass"), []))
                self.assertEqual(result.reply.text, "ast_1 is 4000 px wide, ast_2 800 px.")
                steps = task_entry(task, [result])["trialResults"][0]["conversation"][0]["steps"]
                self.assertEqual(
                    [step["results"] for step in steps[:3]],
                    [
                        [{"name": GET, "result": {"error": "no such asset"}, "scripted": True, "source": "default"}],
                        [
                            {
                                "name": GET,
                                "result": {"id": "ast_2", "width": 800},
                                "scripted": True,
                                "source": "case",
                                "case": 1,
                            }
                        ],
                        [
                            {
                                "name": GET,
                                "result": {"id": "ast_1", "width": 4000},
                                "scripted": True,
                                "source": "case",
                                "case": 0,
                            }
                        ],
                    ],
                )
