# The two commands of the README: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
INTEROP := tests/interop
NPM_STAMP := $(INTEROP)/node_modules/.installed
# acpx, a third-party v1 client, with the Node 22 it needs from the npm package node@22 (tests/interop/acpx).
ACPX_STAMP := $(INTEROP)/acpx/node_modules/.installed

.PHONY: demo test test-uvicorn-lowest docs lint bench clean fuzz inspector-screenshots

demo: $(STAMP)
	$(BIN)/python -m acp_agent.demo

test: $(STAMP) $(NPM_STAMP) $(ACPX_STAMP)
	$(BIN)/ruff check acp_agent tests examples bench tools docs_src
	$(BIN)/mypy --strict acp_agent
	$(BIN)/mypy --strict --platform win32 acp_agent
	$(BIN)/mypy --strict --platform darwin acp_agent
	$(BIN)/lint-imports --no-cache
	$(MAKE) docs
	$(BIN)/python -m pytest
	$(MAKE) test-uvicorn-lowest

# The HTTP server's tests again on the lowest uvicorn pyproject.toml allows (the suite above runs the newest).
UVICORN_LOWEST := $(VENV)/uvicorn-lowest
test-uvicorn-lowest: $(STAMP)
	test -f $(UVICORN_LOWEST)/.installed || { $(BIN)/python -m pip install --quiet --disable-pip-version-check \
		--no-deps --target $(UVICORN_LOWEST) "uvicorn==$$(sed -n 's/.*"uvicorn>=\([0-9.]*\),.*/\1/p' pyproject.toml)" \
		&& touch $(UVICORN_LOWEST)/.installed; }
	PYTHONPATH=$(UVICORN_LOWEST) $(BIN)/python -c 'import uvicorn; print("uvicorn", uvicorn.__version__)'
	PYTHONPATH=$(UVICORN_LOWEST) $(BIN)/python -m pytest -q -p no:cacheprovider tests/unit/test_http_guard.py \
		tests/unit/test_http_server.py tests/e2e/test_http_bounds.py tests/e2e/test_http_faults.py

# `make docs`: the site (mkdocs.yml, pages under docs/, the API reference from docstrings) built strictly into
# site/: a broken link, a missing cross-reference or a docstring warning fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# `make inspector-screenshots`: the inspector's images on the site (docs/images/inspector-*.png), made by driving
# the examples in headless Chromium (Debian's chromium and chromium-driver).
inspector-screenshots: $(STAMP)
	$(BIN)/python tools/inspector_screenshots.py

# `make fuzz`: the fuzz suite at full size against live agent processes (tests/fuzz/test_fuzz.py); it prints
# the counts of inputs sent, crashes, hangs and wrong answers. ACP_FUZZ_EXAMPLES sets the number of
# generated inputs, ACP_FUZZ_HEALTH_EVERY how often the full session probe runs (a ping otherwise).
ACP_FUZZ_EXAMPLES ?= 100000
ACP_FUZZ_HEALTH_EVERY ?= 5

fuzz: $(STAMP) $(NPM_STAMP)
	rm -rf $(VENV)/fuzz-stats && mkdir -p $(VENV)/fuzz-stats
	export ACP_FUZZ_EXAMPLES=$(ACP_FUZZ_EXAMPLES) ACP_FUZZ_HEALTH_EVERY=$(ACP_FUZZ_HEALTH_EVERY) ACP_FUZZ_RANDOM=1 \
		ACP_FUZZ_STATS_DIR=$(VENV)/fuzz-stats; \
	$(BIN)/python -m pytest tests/fuzz/test_fuzz.py -s -q -k "live_agent and echo" & echo_pid=$$!; \
	$(BIN)/python -m pytest tests/fuzz/test_fuzz.py -s -q -k "live_agent and background" & bg_pid=$$!; \
	$(BIN)/python -m pytest tests/fuzz/test_fuzz.py -s -q -k "not live_agent or forking"; rest=$$?; \
	wait $$echo_pid; echo_rc=$$?; wait $$bg_pid; bg_rc=$$?; \
	$(BIN)/python tests/helpers/fuzz_harness.py $(VENV)/fuzz-stats; total=$$?; \
	test $$rest -eq 0 -a $$echo_rc -eq 0 -a $$bg_rc -eq 0 -a $$total -eq 0

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,trio,docs]'
	touch $(STAMP)

$(NPM_STAMP): $(INTEROP)/package.json $(INTEROP)/package-lock.json
	cd $(INTEROP) && npm ci --no-audit --no-fund --loglevel=error
	touch $(NPM_STAMP)

# The lock also lists the optional per-platform builds of acpx's @openclaw/fs-safe that the registry did not
# resolve here (npm ci refuses a lock without them; npm skips them on other platforms).
$(ACPX_STAMP): $(INTEROP)/acpx/package.json $(INTEROP)/acpx/package-lock.json
	cd $(INTEROP)/acpx && npm ci --no-audit --no-fund --loglevel=error
	touch $(ACPX_STAMP)

# `make bench`: acp-agent side by side with the official SDKs (bench/README.md). The anchors get their own venv
# (the official Python SDK may pin what acp-agent does not) and bench/ its own node_modules.
ANCHORS := bench/.venv-anchors
ANCHORS_STAMP := $(ANCHORS)/.installed
BENCH_NPM_STAMP := bench/node_modules/.installed

bench: $(STAMP) $(ANCHORS_STAMP) $(BENCH_NPM_STAMP)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/telemetry.py  # an echo turn and start-up with telemetry off and on
	$(BIN)/python bench/scale.py  # replicas on one PostgreSQL: PostgreSQL vs SQLite, 1-3 replicas, failover, 0 lost

$(ANCHORS_STAMP): bench/anchors-requirements.txt | $(STAMP)
	test -x $(ANCHORS)/bin/python || $(BIN)/python -m venv $(ANCHORS)
	$(ANCHORS)/bin/python -m pip install --quiet --disable-pip-version-check -r bench/anchors-requirements.txt
	touch $(ANCHORS_STAMP)

$(BENCH_NPM_STAMP): bench/package.json bench/package-lock.json
	cd bench && npm ci --no-audit --no-fund --loglevel=error
	touch $(BENCH_NPM_STAMP)

clean:
	rm -rf $(VENV) $(INTEROP)/node_modules site
