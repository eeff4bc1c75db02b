# The two quick-start commands (see README): `make demo` and `make test`.
# Both create .venv on first use and reinstall only when pyproject.toml changes.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck unit install install-dev system-deps

demo: $(VENV)/.installed
	$(BIN)/tfperf profile examples/quickstart/pipeline.py

# `make test` first installs Chromium and PostgreSQL when missing (.ci/system-deps, apt-get).
test: system-deps $(VENV)/.installed-dev lint typecheck unit

system-deps:
	.ci/system-deps

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

unit: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# Benchmarks (benchmarks/, see its RESULTS.md). `make bench` tunes and measures seven pipelines,
# about an hour on 2 cores, and rewrites benchmarks/RESULTS.md: run it on a quiet machine.
# `make bench-smoke` checks the runner end to end on one pipeline in about 40 seconds.
.PHONY: bench bench-smoke

bench: $(VENV)/.installed
	$(BIN)/python -m benchmarks

bench-smoke: $(VENV)/.installed
	$(BIN)/python -m benchmarks --smoke

# uv installs the same requirements as pip, in a third of the time on a fresh machine (16 s
# against 46 s measured here): CI installs from scratch on every run. The venv keeps its pip.
$(BIN)/uv:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv

$(VENV)/.installed: pyproject.toml | $(BIN)/uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e ".[dev]"
	touch $@ $(VENV)/.installed
