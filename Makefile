# bourse — the two promises: `make demo` and `make test` work on a fresh machine.
# Both create .venv when it is missing (or when pyproject.toml changed) and do the rest.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# The suite needs every extra: the client (no extra), the coordinator, the agent, training.
TEST_EXTRAS := dev,train,server,agent,data
# The demo runs a local exchange (coordinator and agents) and trains the digits app.
DEMO_EXTRAS := train,server,agent
STAMP      := $(VENV)/.installed-stamp
DEMO_STAMP := $(VENV)/.demo-stamp

.PHONY: venv demo test test-fast lint bench clean

venv: $(STAMP)

# $(1): the extras
define install
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "bourse needs Python >= 3.11")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# The CPU build of torch first (a wheel on this machine's disk), so nothing pulls a CUDA build.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[$(1)]"
endef

$(STAMP): pyproject.toml
	$(call install,$(TEST_EXTRAS))
	@touch $(STAMP) $(DEMO_STAMP)  # everything the demo needs is in

$(DEMO_STAMP): pyproject.toml
	$(call install,$(DEMO_EXTRAS))
	@touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/bourse demo

test: $(STAMP)
	$(PY) -m pytest -n 3 --maxschedchunk 1 -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) benchmarks/match.py
	$(PY) benchmarks/envs.py
	$(PY) benchmarks/recovery.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info
