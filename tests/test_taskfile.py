"""Task-file loading: every invalid fixture gives its pinned message, every valid one loads."""

from __future__ import annotations

import glob
import hashlib
import os
import unittest
from typing import Any

from harness.records import ConfigError, ExpectRefusal, ExpectTool, ForbiddenText
from harness.taskfile import load_task_file
from tests.support import CANONICAL_TASKS, DATA, TempDirTestCase

INVALID = sorted(glob.glob(os.path.join(DATA, "tasks", "invalid", "*.json")))
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
                    load_task_file(path)
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


if __name__ == "__main__":
    unittest.main()


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
            "/dev/zero", "over the 1000 bytes a task file may have (EVAL_MAX_TASK_FILE_BYTES)", max_bytes=1000
        )
