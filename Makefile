PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python

.PHONY: eval test clean

## eval: run the harness (settings come from EVAL_* variables, e.g. EVAL_GATE=90 make eval)
eval:
	@$(PYTHON) eval_agent.py

## test: install the test-only tools into .venv if missing, then run every test
test: $(VENV)/.installed
	$(VENV)/bin/vermin -q --no-tips --violations --target=3.10- --exclude-regex '(^|/)\.venv/' .
	$(VPY) -m unittest discover -s tests -t . $(if $(VERBOSE),-v,)

$(VENV)/.installed: requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	touch $@

clean:
	rm -rf $(VENV) eval-results.json
