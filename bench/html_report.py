"""The HTML report at scale: a 10,000-task run's page, its size, how long it takes to render, load and filter.

Run: python3 bench/html_report.py        (about half a minute; the browser figures need Debian's chromium and the
                                          playwright package, as `make test` installs it into .venv)

Runs the stub on 10,000 tasks (the ten canonical ones over and over, one in 50 with a prompt the stub does not know,
so that some fail), then prints:
  1. the page's size (target < 15 MB)
  2. `eval_agent.py report` rendering it, a whole process timed from outside, median of 3
  3. in headless Chromium: the page loaded from disk (navigation to the load event), unchecking "pass" (every row
     filtered), and a search for a task id, each timed in the page, median of 3
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "eval_agent.py")
TASKS = 10_000


def write_tasks(folder: str) -> str:
    with open(os.path.join(ROOT, "tests", "data", "tasks", "imageman-ten.json"), encoding="utf-8") as f:
        data = json.load(f)
    ten = data["tasks"]
    data["tasks"] = [dict(ten[i % 10], id=f"t{i}") for i in range(TASKS)]
    for i in range(0, TASKS, 50):
        data["tasks"][i]["prompt"] = f"A prompt the stub has never seen ({i})."
    path = os.path.join(folder, "tasks.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return path


def in_browser(page_path: str) -> list[str]:
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return ["browser     skipped: the playwright package is not installed (make test installs it into .venv)"]
    if not chromium:
        return ["browser     skipped: no chromium (apt-get install chromium chromium-driver)"]
    loads, filters, searches = [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for _ in range(3):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto("file://" + page_path)
            loads.append(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd"))
            filters.append(
                page.evaluate(
                    "() => { const t = performance.now();"
                    " document.querySelector('input[name=s][value=pass]').click(); return performance.now() - t; }"
                )
            )
            searches.append(
                page.evaluate(
                    "() => { const box = document.querySelector('input[type=search]'); box.value = 't4242';"
                    " const t = performance.now(); box.dispatchEvent(new Event('input', {bubbles: true}));"
                    " return performance.now() - t; }"
                )
            )
            page.close()
        browser.close()
    return [
        f"load        {statistics.median(loads):.0f} ms median of 3, from navigation to the load event",
        f"filter      {statistics.median(filters):.0f} ms to uncheck pass over {TASKS} rows, median of 3",
        f"search      {statistics.median(searches):.0f} ms for a task id over {TASKS} rows, median of 3",
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        env = {key: value for key, value in os.environ.items() if not key.startswith("EVAL_")}
        results = os.path.join(folder, "results.json")
        subprocess.run(
            [sys.executable, SCRIPT, "--tasks", write_tasks(folder), "--out", results],
            env=env,
            stdout=subprocess.DEVNULL,
            check=False,
        )
        page = os.path.join(folder, "page.html")
        renders = []
        for _ in range(3):
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, SCRIPT, "report", results, "-o", page], env=env, check=True, stdout=subprocess.DEVNULL
            )
            renders.append(time.perf_counter() - started)
        size = os.path.getsize(page)
        results_size = os.path.getsize(results) / 1e6
        print(f"size        {size / 1e6:.1f} MB for {TASKS} tasks (target < 15 MB; results file {results_size:.1f} MB)")
        print(f"render      {statistics.median(renders):.2f} s median of 3 (eval_agent.py report, a whole process)")
        for line in in_browser(page):
            print(line)


if __name__ == "__main__":
    main()
