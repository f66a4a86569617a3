PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python

.PHONY: eval test dist clean

## eval: run the harness (settings come from EVAL_* variables, e.g. EVAL_GATE=90 make eval)
eval:
	@$(PYTHON) eval_agent.py

## test: install the test-only tools into .venv if missing, lint, type-check, then run every test
test: $(VENV)/.installed
	$(VENV)/bin/ruff check --quiet .
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/vermin -q --no-tips --violations --target=3.10- --exclude-regex '(^|/)\.venv/' .
	$(VENV)/bin/mypy
	@# The tests start the CLI in many subprocesses: compile it once here, not in each (PYTHONDONTWRITEBYTECODE may be set).
	$(VPY) -m compileall -q harness backends tests
	$(VPY) -m tests.parallel $(if $(VERBOSE),-v,)

## dist: build dist/eval_agent.pyz, the harness as one file (reproducible: the same commit gives the same bytes)
dist:
	$(PYTHON) tools/build_pyz.py dist/eval_agent.pyz

$(VENV)/.installed: requirements-test.txt requirements-nodeps.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	$(VPY) -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-nodeps.txt
	touch $@

clean:
	rm -rf $(VENV) dist eval-results.json .mypy_cache
