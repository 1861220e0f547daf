# bourse — the two promises: `make demo` and `make test` work on a fresh machine.
# Both create .venv when it is missing (or when pyproject.toml changed) and do the rest.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: venv demo test test-fast lint bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "bourse needs Python >= 3.11")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# The CPU build of torch first (a wheel on this machine's disk), so nothing pulls a CUDA build.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[dev,train]"
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/bourse demo

test: $(STAMP)
	$(PY) -m pytest -n 3 -q

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
