# toolcascade: `make demo` runs the main example, `make test` the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The demo needs the package alone: no test servers, no Ray (seconds, not the test extra's minutes).
DEMO_STAMP := $(VENV)/.installed-core

.PHONY: demo test bench bench-instructions clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

# The quick start end to end (from code, then the command line), what `show` explains, then the offline agent.
# Quiet recipes: each step echoes the command a reader would type in examples/quickstart.
demo: $(DEMO_STAMP)
	@echo "--- examples/quickstart: python main.py"
	@cd examples/quickstart && $(abspath $(BIN))/python main.py
	@echo
	@echo "--- examples/quickstart: toolcascade run greet '{\"name\": \"Ada\"}'"
	@cd examples/quickstart && $(abspath $(BIN))/toolcascade run greet '{"name": "Ada"}'
	@echo
	@echo "--- examples/quickstart: toolcascade show greet"
	@cd examples/quickstart && $(abspath $(BIN))/toolcascade show greet
	@echo
	@echo "--- examples/agent: python main.py (a markdown agent on the offline scripted model)"
	@cd examples/agent && $(abspath $(BIN))/python main.py
	@echo
	@echo "--- toolcascade is installed in $(VENV): run it as $(VENV)/bin/toolcascade, or as plain toolcascade"
	@echo "    in this shell after: . $(VENV)/bin/activate"

# One worker per core plus one (pytest-xdist): many tests wait on servers, subprocesses and timeouts, and the
# extra worker fills those waits (on 2 cores the suite took 8 min 54 s with 2 workers, 7 min 41 s with 3).
# Each test file runs whole on one worker, so a file's servers start once. Evaluated only when `test` runs.
TEST_WORKERS = $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)')
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# W1-W6 beside MAF and LangChain (pip install -e '.[bench]'; a missing one prints "not installed").
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.run

# W1 and W2 in instructions (valgrind's callgrind): slow, repeatable on a noisy machine.
bench-instructions: $(STAMP)
	$(BIN)/python -m bench.instructions

clean:
	rm -rf $(VENV) build dist *.egg-info
