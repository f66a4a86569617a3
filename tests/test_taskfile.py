"""Task-file loading: every invalid fixture gives its pinned message, every valid one loads."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import unittest
from typing import Any

from harness.records import ConfigError, ExpectRefusal, ExpectTool, ForbiddenText
from harness.taskfile import load_task_file, parse_task_file
from tests.support import CANONICAL_TASKS, DATA, TempDirTestCase

INVALID = sorted(glob.glob(os.path.join(DATA, "tasks", "invalid", "*.json")))
# What the invalid fixtures' placeholders read: a value of bytes that are not UTF-8, as the environment holds them.
FIXTURE_ENVIRON = {"EVAL_TEST_NOT_UTF8": "caf\udce9"}
VALID = sorted(glob.glob(os.path.join(DATA, "tasks", "valid", "*.json")))


class InvalidTaskFiles(unittest.TestCase):
    def test_fixture_folders_are_not_empty(self) -> None:
        self.assertGreaterEqual(len(INVALID), 20)
        self.assertGreaterEqual(len(VALID), 3)

    def test_each_invalid_file_gives_its_message_with_file_and_json_path(self) -> None:
        for path in INVALID:
            with self.subTest(os.path.basename(path)):
                with open(path[: -len(".json")] + ".error", encoding="utf-8") as f:
                    expected = f.read().rstrip("\n")
                with self.assertRaises(ConfigError) as caught:
                    load_task_file(path, {**os.environ, **FIXTURE_ENVIRON})
                self.assertEqual(str(caught.exception), f"{path}: {expected}")

    def test_a_missing_file_names_the_path(self) -> None:
        path = os.path.join(DATA, "no-such-tasks.json")
        with self.assertRaises(ConfigError) as caught:
            load_task_file(path)
        self.assertEqual(str(caught.exception), f"{path}: cannot read the task file: No such file or directory")


class ValidTaskFiles(unittest.TestCase):
    def test_each_valid_file_loads(self) -> None:
        for path in VALID:
            with self.subTest(os.path.basename(path)):
                task_file = load_task_file(path)
                self.assertTrue(task_file.tasks)
                self.assertEqual(len(task_file.sha256), 64)

    def test_expectations_load_as_their_kind(self) -> None:
        task_file = load_task_file(os.path.join(DATA, "tasks", "valid", "tool-without-params.json"))
        expects = {task.id: task.expect for task in task_file.tasks}
        self.assertEqual(expects["tag-one"], ExpectTool("imageman.asset.tag", ("assetIds", "tags")))
        self.assertEqual(expects["no-leak"], ExpectRefusal())
        self.assertEqual(expects["ping.1"], ExpectTool("ping", ()))

    def test_blocking_and_forbidden_tools_load(self) -> None:
        task_file = load_task_file(os.path.join(DATA, "tasks", "valid", "blocking-and-forbidden-tools.json"))
        tag, refusal, _ = task_file.tasks
        self.assertEqual(
            (tag.blocking, tag.expect), (False, ExpectTool("imageman.asset.tag", ("assetIds", "tags"), ("ping",)))
        )
        self.assertEqual((refusal.blocking, refusal.expect), (True, ExpectRefusal(("ping", "imageman.asset.tag"))))

    def test_the_hash_is_of_the_bytes_on_disk(self) -> None:
        path = os.path.join(DATA, "tasks", "valid", "utf8-bom.json")
        with open(path, "rb") as f:
            self.assertEqual(load_task_file(path).sha256, hashlib.sha256(f.read()).hexdigest())


class ForbiddenTextPlaceholders(unittest.TestCase):
    PATH = os.path.join(DATA, "tasks", "valid", "forbidden-text.json")

    def test_forbidden_text_keeps_how_it_is_written_and_what_it_expands_to(self) -> None:
        task_file = load_task_file(self.PATH, {"EVAL_TEST_CANARY": "canary-7d1e"})
        tag, refusal, ping = task_file.tasks
        self.assertEqual(tag.expect.forbidden_text, (ForbiddenText("DROP TABLE", "DROP TABLE"),))
        self.assertEqual(
            refusal.expect.forbidden_text,
            (
                ForbiddenText("DROP TABLE", "DROP TABLE"),
                ForbiddenText("${EVAL_TEST_CANARY}", "canary-7d1e"),
                ForbiddenText("$${not a placeholder}", "${not a placeholder}"),
            ),
        )
        self.assertEqual(ping.expect.forbidden_text, (ForbiddenText("ref-${EVAL_TEST_CANARY}", "ref-canary-7d1e"),))
        self.assertEqual(task_file.warnings, ())

    def test_an_unset_variable_skips_its_checks_with_one_warning_not_an_error(self) -> None:
        task_file = load_task_file(self.PATH, {})
        drop, dollar = (
            ForbiddenText("DROP TABLE", "DROP TABLE"),
            ForbiddenText("$${not a placeholder}", "${not a placeholder}"),
        )
        self.assertEqual([task.expect.forbidden_text for task in task_file.tasks], [(drop,), (drop, dollar), ()])
        self.assertEqual(
            task_file.warnings, ("EVAL_TEST_CANARY is not set: 2 forbiddenText checks skipped (no-leak, ping.1)",)
        )

    def test_the_hash_is_of_the_definition_not_of_the_secret_it_expands_to(self) -> None:
        one = load_task_file(self.PATH, {"EVAL_TEST_CANARY": "canary-1"}).tasks[1].sha256
        self.assertEqual(load_task_file(self.PATH, {"EVAL_TEST_CANARY": "canary-2"}).tasks[1].sha256, one)


def check_args_file(top: str | None = None, task: str | None = None) -> dict[str, Any]:
    """A task file with a tool whose schema checkArgs can read, and one it cannot (a `nullable`)."""
    doc: dict[str, Any] = {
        "version": 1,
        "tools": [
            {
                "name": "resize",
                "inputSchema": {
                    "type": "object",
                    "properties": {"width": {"type": "integer"}, "unit": {"enum": ["px", "%"]}},
                    "required": ["width"],
                },
            },
            {"name": "legacy", "inputSchema": {"type": "object", "properties": {"q": {"nullable": True}}}},
        ],
        "tasks": [
            {"id": "resize", "category": "c", "prompt": "p", "expect": {"tool": "resize", "requiredArgs": ["width"]}},
            {"id": "flow", "category": "c", "prompt": "p", "expect": {"trajectory": ["resize", "resize"]}},
            {"id": "legacy", "category": "c", "prompt": "p", "expect": {"tool": "legacy", "checkArgs": "keys"}},
            {"id": "no", "category": "c", "prompt": "p", "expect": {"refusal": True}},
        ],
    }
    if top is not None:
        doc["checkArgs"] = top
    if task is not None:
        doc["tasks"][0]["expect"]["checkArgs"] = task
    return doc


class CheckArgs(TempDirTestCase):
    def load(self, doc: dict[str, Any]) -> list[Any]:
        return list(load_task_file(self.write_json("tasks.json", doc)).tasks)

    def test_off_by_default_so_existing_files_mean_what_they_meant(self) -> None:
        for task in [*self.load(check_args_file()), *load_task_file(CANONICAL_TASKS).tasks]:
            with self.subTest(task.id):
                self.assertTrue(all(step.schema is None for step in task.expect.steps))

    def test_the_file_level_setting_checks_every_task_but_those_that_say_keys(self) -> None:
        resize, flow, legacy, _ = self.load(check_args_file(top="schema"))
        self.assertEqual(resize.expect.schema.tool, "resize")
        self.assertEqual([step.schema.tool for step in flow.expect.steps], ["resize", "resize"])
        self.assertIsNone(legacy.expect.schema)  # its tool's schema cannot be checked, and need not be

    def test_a_task_level_setting_checks_that_task_alone(self) -> None:
        resize, flow, _, _ = self.load(check_args_file(task="schema"))
        self.assertEqual(resize.expect.schema.tool, "resize")
        self.assertIsNone(flow.expect.steps[0].schema)

    def test_a_schema_that_cannot_be_checked_is_an_error_only_where_it_is_checked(self) -> None:
        doc = check_args_file(top="schema")
        doc["tasks"][2]["expect"]["checkArgs"] = "schema"
        with self.assertRaises(ConfigError) as caught:
            self.load(doc)
        self.assertIn(
            'tools[1].inputSchema.properties.q.nullable: unsupported keyword "nullable"', str(caught.exception)
        )

    def test_the_hash_counts_the_file_level_setting_as_the_task_level_one(self) -> None:
        plain = self.load(check_args_file())[0].sha256
        top = self.load(check_args_file(top="schema"))[0].sha256
        own = self.load(check_args_file(task="schema"))[0].sha256
        self.assertNotEqual(plain, top)
        self.assertEqual(top, own)
        self.assertEqual(self.load(check_args_file(top="keys"))[0].sha256, plain)


class TaskHashes(unittest.TestCase):
    """A task's hash is what a baseline compares it by: the same definition hashes as it did in earlier versions."""

    def test_each_part_of_a_task_hashes_as_it_did_before(self) -> None:
        doc = {
            "version": 1,
            "checkArgs": "schema",
            "toolResults": {"resize": {"ok": True}},
            "tools": [check_args_file()["tools"][0]],
            "tasks": [
                {
                    "id": "talk",
                    "category": "c",
                    "prompt": "Resize it to ${EVAL_TEST_WIDTH}.",
                    "turns": ["In pixels."],
                    "toolResults": {"resize": {"sequence": [{"echo": "width"}, "done"]}},
                    "maxSteps": 3,
                    "blocking": True,
                    "comment": "for the author",
                    "expect": {
                        "trajectory": [
                            {"tool": "resize", "argValues": {"unit": {"anyOf": ["PX"], "ignoreCase": True}}, "turn": 2}
                        ],
                        "order": "exact",
                        "forbiddenText": ["${EVAL_TEST_CANARY}"],
                    },
                },
                {"id": "no", "category": "c", "prompt": "p", "expect": {"refusal": True, "forbiddenTools": ["resize"]}},
            ],
        }
        environ = {"EVAL_TEST_WIDTH": "640", "EVAL_TEST_CANARY": "canary-1"}
        task_file, problems = parse_task_file(json.dumps(doc).encode(), "tasks.json", environ)
        self.assertEqual(problems, [])
        self.assertEqual(task_file.tools_sha256, "7b388f3a1a2f3d57df2e1267c2b19b84b1d6e4eba6d0bec0d047b8bf01f5c47f")
        self.assertEqual(
            {task.id: task.sha256 for task in task_file.tasks},
            {
                "talk": "3c3224713b4abb4f8bb80d5b51ad8ebc9a7c24f70e5824937e1cfdab2502fe1a",
                "no": "5bfc4081228d14ed03de029471d01e28e5029763bc31d6f0c67612ab94f87547",
            },
        )

    def test_a_fixtures_tasks_hash_as_they_did_before(self) -> None:
        task_file = load_task_file(os.path.join(DATA, "tasks", "valid", "arg-values-and-trajectories.json"), {})
        self.assertEqual(task_file.tools_sha256, "7c08b0e2e441700f861bf11c78a5e6818b0b20fb4dde588b395ad7dc0c743ff4")
        self.assertEqual(
            {task.id: task.sha256 for task in task_file.tasks},
            {
                "tag-one": "12742ba40a9f9868fc63c3e3aa3c0054ef0465fdfa4dd01485fa73c1125c495f",
                "no-leak": "346c81b47a4712a8c7283227a3b14c42ad4c8c2d1c28277bac00fdbe7630b9de",
                "ping.1": "be8a9be389e9870b3a2de7bb266866a32f550a9f68bb4d69fc0beadc8dc841c6",
                "tag-then-ping": "2feb0b89f47bd8aaecbecc33a561e6caac6b4c21abad2751defa2e33cd27b831",
            },
        )


class HostileTaskFiles(TempDirTestCase):
    """Task files made to break a reader: each is one line naming the file and what is wrong, never a traceback."""

    def write_text(self, name: str, text: str) -> str:
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def canonical_with(self, old: str, new: str) -> str:
        with open(CANONICAL_TASKS, encoding="utf-8") as f:
            text = f.read()
        self.assertTrue(old in text, old)
        return self.write_text("tasks.json", text.replace(old, new, 1))

    def assert_config_error(self, path: str, message: str, **options: Any) -> None:
        with self.assertRaises(ConfigError) as caught:
            load_task_file(path, {}, **options)
        self.assertEqual(str(caught.exception), f"{path}: {message}")

    def test_json_nested_past_any_reader(self) -> None:
        self.assert_config_error(
            self.write_text("deep.json", "[" * 100_000 + "]" * 100_000), "JSON nested too deeply to read"
        )

    def test_a_lone_surrogate_in_a_string(self) -> None:
        path = self.canonical_with('"Pull up everything', '"Pull up \\ud800 everything')
        self.assert_config_error(path, "tasks[0].prompt: not Unicode text: a lone surrogate (\\ud800)")

    def test_a_key_given_twice(self) -> None:
        path = self.canonical_with('"id": "asset-search-by-tag",', '"id": "asset-search-by-tag", "id": "other",')
        self.assert_config_error(path, 'tasks[0]: "id" is given twice; a JSON reader keeps only one of them')

    def test_a_dollar_brace_that_is_no_placeholder(self) -> None:
        for broken, shown in [("${ABC ", "${ABC"), ("${}", "${}"), ("${9X}", "${9X}")]:
            with self.subTest(broken):
                path = self.canonical_with('"Pull up everything', f'"Pull up {broken} everything')
                self.assert_config_error(
                    path, f"tasks[0].prompt: {shown} is neither a placeholder (${{NAME}}) nor a literal ($${{)"
                )

    def test_a_file_over_the_size_cap_is_not_read_whole(self) -> None:
        self.assert_config_error(
            self.write_text("big.json", " " * 1001),
            "over the 1000 bytes a task file may have (EVAL_MAX_TASK_FILE_BYTES)",
            max_bytes=1000,
        )

    def test_a_device_is_not_a_task_file(self) -> None:
        self.assert_config_error("/dev/zero", "cannot read the task file: not a regular file")


if __name__ == "__main__":
    unittest.main()
