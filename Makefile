# The two commands of the README: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
INTEROP := tests/interop
NPM_STAMP := $(INTEROP)/node_modules/.installed

.PHONY: demo test lint bench clean

demo: $(STAMP)
	$(BIN)/python -m acp_agent.demo

test: $(STAMP) $(NPM_STAMP)
	$(BIN)/ruff check acp_agent tests examples bench
	$(BIN)/mypy --strict acp_agent
	$(BIN)/python -m pytest

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,trio]'
	touch $(STAMP)

$(NPM_STAMP): $(INTEROP)/package.json $(INTEROP)/package-lock.json
	cd $(INTEROP) && npm ci --no-audit --no-fund --loglevel=error
	touch $(NPM_STAMP)

clean:
	rm -rf $(VENV) $(INTEROP)/node_modules
