"""The HTML report: one self-contained page per run, or per results file with `report`; every string in it inert.

The page is checked as text here, and in a real browser (Debian's headless Chromium, driven by Playwright) below.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import threading
import time
import unittest
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any

from harness.reporters.page import CSP, SCRIPT, STYLE
from tests.support import (
    CANNED,
    ROOT,
    Received,
    TempDirTestCase,
    canned,
    canonical_task_data,
    clean_env,
    run_cli,
    send_json,
)
from tests.test_growth import one_more_call
from tests.test_world_reports import PLANTED, ROGUE, world_run

# What an agent or a task file might hold to attack whoever opens the page: each tries to set window.__pwned.
HOSTILE = [
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "</style><style>body{display:none}</style>",
    "</script><script>window.__pwned = 'break-out'</script>",
    "javascript:window.__pwned='link'",
    '"><svg onload="window.__pwned = \'svg\'">',
    "<iframe src='https://example.com'></iframe><link rel=stylesheet href=https://example.com/x.css>",
]
BIG = "x" * 1_000_000  # a 1 MB argument


def flaky_and_wrong(state: dict[str, int]) -> Any:
    """An agent worse than the canned one: flaky on one task, the wrong tool on another, a forbidden call on a safety
    task, an error on another."""
    lock = threading.Lock()

    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        body = received.json
        task_id = body["taskId"]
        with lock:
            state[task_id] = state.get(task_id, 0) + 1
            seen = state[task_id]
        if task_id == "asset-search-semantic" and seen % 2 == 0:
            send_json(handler, {"text": "I could not find anything."})
        elif task_id == "asset-get-details":
            send_json(handler, {"toolCall": {"name": "imageman.asset.list", "args": {"path": "/"}}})
        elif task_id == "safety-leak-secrets":
            send_json(
                handler, {"toolCall": {"name": "imageman.asset.tag", "args": {"assetIds": ["*"], "tags": ["approved"]}}}
            )
        elif task_id == "transform-bg-remove":
            send_json(handler, {"error": "boom"}, 500)
        else:
            send_json(handler, CANNED[body["prompt"]])

    return respond


def hostile_agent(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """Every reply carries every payload: in the text, a tool's name, argument keys and values, and a 1 MB value."""
    payload = " ".join(HOSTILE)
    args = {payload: payload, "assetId": payload, "big": BIG}
    send_json(handler, {"toolCalls": [{"name": HOSTILE[1], "args": args}], "text": payload})


def hostile_tasks() -> dict[str, Any]:
    """The canonical tasks with hostile text where a task file has text: ids cannot hold it, the rest can."""
    data = canonical_task_data()
    for i, task in enumerate(data["tasks"][:3]):
        task["category"] = HOSTILE[i]
        task["prompt"] = " ".join(HOSTILE)
    return data


class PageAsText(TempDirTestCase):
    """The page as the file holds it."""

    def run_page(self, respond: Any, data: dict[str, Any] | None = None, *args: str) -> str:
        agent = self.serve(respond)
        tasks = self.write_json("tasks.json", data or canonical_task_data())
        env = clean_env(EVAL_AGENT_URL=agent.url(), EVAL_TASKS=tasks, EVAL_RETRIES="0")
        _, stderr, code = run_cli("--html", "page.html", *args, env=env, cwd=self.tmp)
        self.assertIn(code, (0, 1), stderr)
        with open(os.path.join(self.tmp, "page.html"), encoding="utf-8") as f:
            return f.read()

    def test_the_policy_allows_no_network_and_only_the_pages_own_script_and_style_by_hash(self) -> None:
        page = self.run_page(flaky_and_wrong({}))
        for source, kind in ((SCRIPT, "script"), (STYLE, "style")):
            digest = base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()
            self.assertIn(f"{kind}-src 'sha256-{digest}'", CSP)
        self.assertIn(f'<meta http-equiv="Content-Security-Policy" content="{CSP}">', page)
        self.assertTrue(CSP.startswith("default-src 'none';"))
        self.assertEqual(page.count("<script"), 1)
        self.assertEqual(page.count("<style"), 1)
        self.assertIsNone(re.search(r"\s(style|src|href|on\w+)=", page), "no inline style, source, link or handler")
        self.assertNotIn("url(", STYLE, "no stylesheet reaches for a resource")

    def test_hostile_text_from_the_agent_and_the_task_file_is_escaped_and_a_long_value_is_behind_a_click(self) -> None:
        page = self.run_page(hostile_agent, hostile_tasks())
        for payload in HOSTILE:
            self.assertNotIn(payload, page)
        self.assertEqual(page.count("<script"), 1)
        self.assertNotIn("<img", page)
        self.assertNotIn("<iframe", page)
        self.assertIn("&lt;script&gt;window.__pwned = &#x27;script&#x27;&lt;/script&gt;", page)
        self.assertRegex(
            page, r"all 1,0\d\d,\d\d\d characters</summary>", "the whole 1 MB value is in the page, folded"
        )
        self.assertLess(len(page), 40_000_000)

    def test_control_and_bidi_characters_from_the_agent_are_shown_escaped_and_line_breaks_kept(self) -> None:
        said = "\x1b[2J\x07cleared\u202eexe.txt\u2066\x85\u2028done\nline two\tend"

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            send_json(handler, {"toolCall": {"name": "imageman.asset.get", "args": {"assetId": said}}, "text": said})

        page = self.run_page(respond)
        for char in "\x1b\x07\u202e\u2066\x85\u2028":
            self.assertNotIn(char, page)
        self.assertIn("\\x1b[2J\\x07cleared\\u202eexe.txt\\u2066\\x85\\u2028done\nline two\tend", page)

    def test_the_job_summary_names_the_page(self) -> None:
        self.run_page(flaky_and_wrong({}), None, "--summary-md", "summary.md")
        with open(os.path.join(self.tmp, "summary.md"), encoding="utf-8") as f:
            self.assertIn("The whole run, task by task: `page.html` (the HTML report, with the results).", f.read())


class ReportCommand(TempDirTestCase):
    def test_report_renders_any_results_file_with_its_baseline_changes(self) -> None:
        run_cli("--out", "base.json", cwd=self.tmp)
        agent = self.serve(flaky_and_wrong({}))
        run_cli("--out", "now.json", env=clean_env(EVAL_AGENT_URL=agent.url(), EVAL_RETRIES="0"), cwd=self.tmp)
        stdout, stderr, code = run_cli("report", "now.json", "--baseline", "base.json", cwd=self.tmp)
        self.assertEqual((stdout, stderr, code), ("wrote now.html\n", "", 0))
        with open(os.path.join(self.tmp, "now.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn("<h2>Against the baseline base.json</h2>", page)
        self.assertIn("<h3>Regressed (3)</h3>", page)

    def test_report_counts_the_headline_from_the_entries_not_as_the_file_says_it(self) -> None:
        run_cli("--out", "r.json", cwd=self.tmp)
        document = self.read_json("r.json")
        blocking = next(entry for entry in document["results"] if entry["blocking"])
        blocking["trialResults"][0].update(status="fail", code="refusal:called-tool", reason="edited")
        self.write_json("edited.json", document)  # its headline still says every task passed
        self.assertEqual(run_cli("report", "edited.json", cwd=self.tmp)[2], 0)
        with open(os.path.join(self.tmp, "edited.html"), encoding="utf-8") as f:
            page = f.read()
        passed, total = document["passed"] - 1, document["total"]
        self.assertIn(f"<h1>Gate not met: {passed}/{total} passed, ", page)
        self.assertIn(f"Agent eval: {passed}/{total} passed", page)
        self.assertIn(f"blocking task failed ({blocking['id']})", page)

    def test_bad_input_is_one_line_and_exit_2(self) -> None:
        run_cli("--out", "r.json", cwd=self.tmp)
        with open(os.path.join(self.tmp, "not-results.json"), "w") as f:
            json.dump({"schemaVersion": 2}, f)
        cases = [
            (
                ("report", "missing.json"),
                "eval_agent report: error: missing.json: cannot read: No such file or directory",
            ),
            (("report", "not-results.json"), "eval_agent report: error: not-results.json: the top level: no runId"),
            (
                ("report", "r.json", "-o", "r.json"),
                "eval_agent report: error: -o: r.json is the results file (RESULTS); report never writes over what it"
                " reads",
            ),
            (
                ("report", "r.json", "--baseline", "missing.json"),
                "eval_agent report: error: missing.json: cannot read: No such file or directory",
            ),
        ]
        for args, line in cases:
            with self.subTest(args):
                self.assertEqual(run_cli(*args, cwd=self.tmp), ("", line + "\n", 2))

    def test_merge_writes_the_page_of_the_whole(self) -> None:
        for k in (1, 2):
            run_cli("--shard", f"{k}/2", "--out", f"s{k}.json", cwd=self.tmp)
        _, stderr, code = run_cli("merge", "s1.json", "s2.json", "--out", "m.json", "--html", "m.html", cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        with open(os.path.join(self.tmp, "m.html"), encoding="utf-8") as f:
            self.assertEqual(f.read().count('<div class="t"'), 10)


def chromium() -> tuple[str, Any]:
    """Debian's Chromium and Playwright's driver for it; skip without them, but under CI=true fail: CI installs both."""
    names = ("chromium", "chromium-browser", "google-chrome")  # Debian's, Ubuntu's, and GitHub's runners' own
    path = os.environ.get("EVAL_TEST_CHROMIUM") or next(filter(None, map(shutil.which, names)), None)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = [what for what, found in (("chromium", path), ("playwright", sync_playwright)) if not found]
    if missing:
        why = (
            f"browser tests need {' and '.join(missing)}: apt-get install chromium chromium-driver, "
            "and make test installs playwright"
        )
        if os.environ.get("CI") == "true":
            raise AssertionError(f"{why} (under CI=true a missing browser is a failure)")
        raise unittest.SkipTest(why)
    return path, sync_playwright


class InBrowser(TempDirTestCase):
    """Pages from real runs against loopback agents, opened from disk in headless Chromium."""

    @classmethod
    def setUpClass(cls) -> None:
        path, sync_playwright = chromium()
        cls.playwright = sync_playwright().start()
        cls.browser = cls.playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.browser.close()
        cls.playwright.stop()

    def open(self, name: str) -> Any:
        """The page, opened from disk, with every console message, request and dialog it makes recorded."""
        page = self.browser.new_page(viewport={"width": 1280, "height": 900})
        self.addCleanup(page.close)
        page.set_default_timeout(30_000)
        self.console, self.requests, self.dialogs = [], [], []
        page.on("console", lambda message: self.console.append(f"{message.type}: {message.text}"))
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        url = "file://" + os.path.join(self.tmp, name)
        page.goto(url)
        self.page_url = url
        return page

    def assert_quiet(self) -> None:
        """No console message, no request but the page itself, no dialog."""
        self.assertEqual(self.console, [])
        self.assertEqual(self.requests, [self.page_url])
        self.assertEqual(self.dialogs, [])

    def failing_run(self) -> None:
        """A baseline that passes, then three trials of a worse agent against it, with the page of each."""
        run_cli("--out", "base.json", cwd=self.tmp)
        agent = self.serve(flaky_and_wrong({}))
        env = clean_env(EVAL_AGENT_URL=agent.url(), EVAL_RETRIES="0")
        args = ("--runs", "3", "--baseline", "base.json", "--html", "page.html", "--out", "now.json")
        _, _, code = run_cli(*args, env=env, cwd=self.tmp)
        self.assertEqual(code, 1)

    def text_of(self, page: Any, selector: str) -> str:
        """What a person sees of an element once it is scrolled to (rows off screen are not rendered until then)."""
        element = page.locator(selector)
        element.scroll_into_view_if_needed()
        page.wait_for_function("element => element.innerText.length > 0", arg=element.element_handle())
        return element.inner_text()

    def visible_rows(self, page: Any) -> list[str]:
        return page.eval_on_selector_all(".tasks .t:not([hidden])", "rows => rows.map(r => r.dataset.s)")

    def test_a_failing_runs_page_shows_the_verdict_the_changes_and_every_task_and_filters_them(self) -> None:
        self.failing_run()
        page = self.open("page.html")
        verdict = page.inner_text("#verdict")
        self.assertIn("Gate not met: 20/30 trials passed, 66.6% (gate 80%)", verdict)
        self.assertIn(
            "Why: below the gate, blocking task failed (safety-leak-secrets), regression against the baseline"
            " (asset-search-semantic, asset-get-details, transform-bg-remove, safety-leak-secrets)",
            verdict,
        )
        self.assertIn("20 passed · 7 failed · 3 errors · 1 safety violation · 1 flaky", verdict)
        changes = page.inner_text("#changes")
        self.assertIn("Regressed (4)", changes)
        self.assertIn("asset-get-details", changes)
        self.assertTrue(page.is_visible("#categories svg"))
        self.assertTrue(page.is_visible("#pass-hat-k svg"))
        self.assertIn("Flaky (some trials passed, some did not): asset-search-semantic", page.inner_text("#pass-hat-k"))
        statuses = Counter(self.visible_rows(page))
        self.assertEqual(statuses, {"pass": 6, "fail": 3, "error": 1}, "every row shows when the page opens")
        reason = self.text_of(page, "#task-2")
        self.assertIn("tool:wrong-name: expected imageman.asset.get, got imageman.asset.list", reason)
        self.assertIn("safety violation", self.text_of(page, "#task-9"))

        page.uncheck("input[name=s][value=pass]")
        self.assertEqual(Counter(self.visible_rows(page)), {"fail": 3, "error": 1})
        self.assertEqual(page.inner_text("#shown"), "4 of 10 tasks shown")
        page.select_option("#filters select", "safety")
        self.assertEqual(self.visible_rows(page), ["fail"])
        page.select_option("#filters select", "")
        page.check("input[name=s][value=pass]")
        page.fill("#filters input[type=search]", "wrong-name")
        self.assertEqual(self.visible_rows(page), ["fail"])
        page.fill("#filters input[type=search]", "")

        details = page.locator("#task-2 > details")
        self.assertFalse(details.evaluate("d => d.open"))
        details.locator("summary").click()
        self.assertTrue(details.evaluate("d => d.open"))
        opened = details.inner_text()
        self.assertIn("How big is ast_7f3k2p9q, and who uploaded it?", opened)
        self.assertIn("Trial 3: fail tool:wrong-name", opened)
        self.assertIn('"path": "/"', opened)
        page.screenshot(path=os.path.join(self.tmp, "failing-run.png"), full_page=True)
        self.assert_quiet()

        run_cli("report", "now.json", "--baseline", "base.json", "-o", "report.html", cwd=self.tmp)
        page = self.open("report.html")
        self.assertIn("Gate not met: 20/30 trials passed", page.inner_text("#verdict"))
        self.assertIn("Regressed (4)", page.inner_text("#changes"))
        self.assert_quiet()

    def test_the_baseline_section_shows_what_the_tasks_cost_then_and_now_and_the_limit_they_grew_past(self) -> None:
        run_cli("--out", "base.json", env=clean_env(EVAL_AGENT_URL=self.serve(canned).url()), cwd=self.tmp)
        args = ("--baseline", "base.json", "--max-tool-call-growth", "5", "--html", "page.html")
        _, _, code = run_cli(*args, env=clean_env(EVAL_AGENT_URL=self.serve(one_more_call).url()), cwd=self.tmp)
        self.assertEqual(code, 1)
        page = self.open("page.html")
        self.assertIn("Why: tool calls +11.1% against the baseline (limit 5%)", page.inner_text("#verdict"))
        self.assertIn("Cost (10 tasks measured alike, each task's mean per trial)", page.inner_text("#changes"))
        rows = page.eval_on_selector_all("#costs tbody tr", "rows => rows.map(r => r.innerText.split('\\t'))")
        self.assertEqual(rows[1], ["tool calls", "9", "10", "+11.1% (limit 5%: exceeded)"])
        self.assertEqual(rows[0], ["tokens", "not recorded", "not recorded", "-"])
        self.assertEqual([row[0] for row in rows[2:]], ["steps", "latency", "latency median", "latency p95"])
        tasks = page.eval_on_selector_all("#task-costs tbody tr", "rows => rows.map(r => r.innerText.split('\\t'))")
        self.assertEqual(len(tasks), 10)
        (tagged,) = [row for row in tasks if row[0] == "asset-tag-additive"]
        self.assertEqual(tagged[2:4], ["1 → 2 (+100%)", "1 → 1 (no change)"])
        self.assertTrue(page.is_visible("#task-costs"))
        self.assert_quiet()

    def test_without_scripts_the_table_and_details_read_as_they_are_and_printed_every_task_unfolds(self) -> None:
        self.failing_run()
        context = self.browser.new_context(java_script_enabled=False)
        self.addCleanup(context.close)
        page = context.new_page()
        page.goto("file://" + os.path.join(self.tmp, "page.html"))
        self.assertFalse(page.is_visible("#filters"), "filters need the script: hidden without it")
        self.assertEqual(page.locator(".tasks .t").count(), 10)
        page.locator("#task-2 summary").click()
        self.assertIn("Trial 1: fail", self.text_of(page, "#task-2 > details"))

        page = self.open("page.html")
        first_trial = page.locator("#task-5 > details .trial").first
        self.assertFalse(first_trial.is_visible(), "folded on screen")
        page.emulate_media(media="print")
        page.locator("#task-5").scroll_into_view_if_needed()
        page.wait_for_function("() => document.querySelector('#task-5 .trial').checkVisibility()")
        self.assertFalse(page.is_visible("#filters"))

    def test_a_conversation_unfolds_turn_by_turn_with_the_results_played_back(self) -> None:
        env = clean_env(EVAL_TASKS=os.path.join(ROOT, "eval-tasks.json"), EVAL_CANARY="canary-5b0c1d")
        run_cli("--html", "page.html", "--task", "*-asks-first", env=env, cwd=self.tmp)
        page = self.open("page.html")
        page.locator("#task-0 > details > summary").click()
        shown = self.text_of(page, "#task-0 > details")
        self.assertIn("Turn 1\n\nUser: Can you make us a banner?", shown)
        self.assertIn("Turn 2", shown)
        self.assertRegex(shown, r'imageman\.ai\.image\.generate returned\n+\{\n  "assets": \[')
        self.assertIn("3 steps, 2 turns", shown)
        self.assert_quiet()

    def test_a_tool_world_shows_each_turns_verdict_where_each_result_came_from_and_the_final_state(self) -> None:
        world_run(self.tmp)
        page = self.open("page.html")
        for summary in page.locator("#task-0 > details > summary, #task-1 > details > summary").all():
            summary.click()
        turns = self.text_of(page, "#task-1 > details")
        self.assertIn("Turn 1 pass\n", turns)
        self.assertIn(f"Turn 2 fail\n\nturn:called-tool: expected no tool call, got {ROGUE}", turns)
        self.assertIn("notes.find returned cases[0]", turns)
        self.assertIn("notes.find returned default", turns)
        self.assertIn(f"{ROGUE} returned no result scripted", turns)
        self.assertEqual(page.locator("#task-1 .badge.fail").count(), 1)
        world = page.locator("#task-0 > details")
        self.assertIn("fs.write returned environment", self.text_of(page, "#task-0 > details"))
        state = world.locator("details", has_text="Final state")
        self.assertFalse(state.locator("pre").is_visible(), "the final state is folded")
        self.assertIn(
            f'state:mismatch: the state at $.files.a.txt is {json.dumps(PLANTED)}, expected "hello"', world.inner_text()
        )
        state.locator("summary").click()
        self.assertIn(f'"a.txt": {json.dumps(PLANTED)}', state.locator("pre").inner_text())
        self.assertIsNone(page.evaluate("window.__pwned"))
        self.assertEqual(page.evaluate("document.querySelectorAll('script, img').length"), 1)
        self.assert_quiet()

    def test_hostile_replies_and_task_text_run_nothing_request_nothing_and_break_nothing(self) -> None:
        agent = self.serve(hostile_agent)
        tasks = self.write_json("tasks.json", hostile_tasks())
        run_cli("--html", "page.html", env=clean_env(EVAL_AGENT_URL=agent.url(), EVAL_TASKS=tasks), cwd=self.tmp)
        page = self.open("page.html")
        for summary in page.locator("summary").all():
            summary.click()
        self.assertIsNone(page.evaluate("window.__pwned"))
        self.assertEqual(page.evaluate("document.querySelectorAll('script').length"), 1)
        self.assertEqual(page.evaluate("document.querySelectorAll('img, iframe, link, svg [onload]').length"), 0)
        self.assertTrue(page.is_visible("#verdict"), "no stylesheet of the agent's hid the page")
        width = page.evaluate("document.documentElement.scrollWidth")
        self.assertLessEqual(width, 1280, "a long value wraps: the page does not grow sideways")
        self.assertIn("</script><script>window.__pwned", self.text_of(page, "#task-0 > details"))
        self.assert_quiet()

    def test_a_10000_task_page_loads_and_filters(self) -> None:
        data = canonical_task_data()
        tasks = data["tasks"]
        data["tasks"] = [dict(tasks[i % 10], id=f"t{i}") for i in range(10_000)]
        data["tasks"][5]["prompt"] = "A prompt the stub has never seen."
        env = clean_env(EVAL_TASKS=self.write_json("big.json", data))
        _, _, code = run_cli("--html", "big.html", env=env, cwd=self.tmp)
        self.assertEqual(code, 0)
        self.assertLess(os.path.getsize(os.path.join(self.tmp, "big.html")), 15_000_000)
        started = time.monotonic()
        page = self.open("big.html")
        self.loaded_in = time.monotonic() - started  # seen, not asserted: the bench script reports it
        self.assertEqual(page.locator(".tasks .t").count(), 10_000)
        page.uncheck("input[name=s][value=pass]")
        self.assertEqual(self.visible_rows(page), ["error"])
        self.assert_quiet()
