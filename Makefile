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

# Benchmarks (benchmarks/, see its RESULTS.md). `make bench` tunes and measures nine pipelines,
# about an hour on 2 cores, and rewrites benchmarks/RESULTS.md: run it on a quiet machine.
# `make bench-smoke` checks the runner end to end on one pipeline in about 40 seconds.
# `make bench` then profiles the generated family with known truth (tests/generated.py).
# Its RESULTS.md includes `tfperf offload`'s predicted per-worker rate against a real local
# tf.data service of 1 and 2 workers (benchmarks/offload.py, also runnable on its own).
.PHONY: bench bench-smoke

bench: $(VENV)/.installed $(VENV)/.installed-torch
	$(BIN)/python -m benchmarks
	$(BIN)/python -m benchmarks.generated

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
