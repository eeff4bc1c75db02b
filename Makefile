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

# Benchmarks (benchmarks/, see its RESULTS.md). `make bench` rewrites benchmarks/RESULTS.md
# and RESULTS.json, with the date and the commit, from one run: it tunes and measures nine
# pipelines (tf.data and DataLoader), the zero-change file and PyTorch script, the profiler's
# overhead, the emulated accelerator step, `tfperf offload` against a real local tf.data
# service of 1 and 2 workers, the known-truth family (tests/generated.py), and the time to an
# answer (a default profile of the quickstart against an 8-trial tune of it). About two hours
# on 2 cores: run it on a quiet machine. `make bench-smoke` checks the runner end to end on
# one pipeline in about a minute, skipping the sections that take minutes each.
.PHONY: bench bench-smoke

bench: $(VENV)/.installed $(VENV)/.installed-torch
	$(BIN)/python -m benchmarks

bench-smoke: $(VENV)/.installed
	$(BIN)/python -m benchmarks --smoke

# uv installs the same requirements as pip, in half the time on a fresh machine (22 s against
# 46 s measured here): CI installs from scratch on every run. The venv keeps its pip.
# --compile-bytecode, as pip does: where PYTHONDONTWRITEBYTECODE is set (as on this machine),
# nothing would ever write the .pyc files, and every process would compile TensorFlow's
# sources on import (7.5 s against 3.2 s measured; a whole suite run took 26 min, not 15).
$(BIN)/uv:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv

$(VENV)/.installed: pyproject.toml | $(BIN)/uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e .
	touch $@

# torch (the `torch` extra, for the PyTorch tests) through pip, not uv: pip takes the CPU
# wheel already on this machine's disk in seconds, where uv would download a multi-GB CUDA
# build. `make demo` (.installed) installs no torch.
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ".[dev]"
	$(BIN)/pip install --quiet torch==2.13.0
	touch $@ $(VENV)/.installed $(VENV)/.installed-torch

# The benchmarks' PyTorch pipelines need torch; `make demo` does not.
$(VENV)/.installed-torch: | $(VENV)/.installed
	$(BIN)/pip install --quiet torch==2.13.0
	touch $@
