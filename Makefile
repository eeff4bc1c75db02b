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

# Benchmarks (benchmarks/, see its RESULTS.md). `make bench` tunes and measures six pipelines,
# 35-45 minutes on 2 cores, and rewrites benchmarks/RESULTS.md: run it on a quiet machine.
# `make bench-smoke` checks the runner end to end on one pipeline in about 40 seconds.
.PHONY: bench bench-smoke

bench: $(VENV)/.installed
	$(BIN)/python -m benchmarks

bench-smoke: $(VENV)/.installed
	$(BIN)/python -m benchmarks --smoke

$(VENV)/bin/pip:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.installed
