# toolcascade: `make demo` runs the main example, `make test` the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	cd examples/quickstart && ../../$(BIN)/python main.py
	@echo
	@echo "--- examples/agent: a markdown agent on the offline scripted model"
	cd examples/agent && ../../$(BIN)/python main.py

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/invoke.py

clean:
	rm -rf $(VENV) build dist *.egg-info
