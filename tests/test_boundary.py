"""The answer key stays on the harness side: the agent sees a task's id and prompt, nothing more."""

from __future__ import annotations

import dataclasses
import unittest

from backends import agent_request
from backends.stub import StubBackend
from harness.running import run_jobs
from harness.records import AgentRequest, ExpectTool
from harness.taskfile import load_task_file
from tests.support import CANONICAL_TASKS


class AnswerKeyBoundary(unittest.TestCase):
    def test_a_request_carries_only_the_task_id_and_prompt(self) -> None:
        self.assertEqual([field.name for field in dataclasses.fields(AgentRequest)], ["task_id", "prompt"])
        task = load_task_file(CANONICAL_TASKS).tasks[0]
        self.assertEqual(agent_request(task), AgentRequest(task_id=task.id, prompt=task.prompt))

    def test_the_stub_receives_no_expected_tool_or_argument_key(self) -> None:
        tasks = load_task_file(CANONICAL_TASKS).tasks
        stub = StubBackend()
        run_jobs(stub, tasks, concurrency=4, on_result=lambda result: None)
        self.assertEqual([request.task_id for request in stub.requests], [task.id for task in tasks])
        for task, request in zip(tasks, stub.requests):
            with self.subTest(task.id):
                self.assertEqual(request.prompt, task.prompt)
                if isinstance(task.expect, ExpectTool):
                    self.assertNotIn(task.expect.tool, repr(request))
                    self.assertNotIn("requiredArgs", repr(request))


if __name__ == "__main__":
    unittest.main()
