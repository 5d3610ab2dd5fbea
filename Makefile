# Two commands do all the set-up: `make demo` and `make test`. Each creates .venv on first use
# and (re)installs when pyproject.toml or constraints.txt change.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is installed first and pinned so that no later install pulls a (multi-GB) CUDA build.
# On a machine without a local CPU wheel, point pip at the CPU index with TORCH_PIP_ARGS.
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
# The only safety-gymnasium release pins gymnasium 0.28.1 / mujoco 2.3.3 / pygame 2.1.0; its real
# runtime needs come from the `safety` extra and the package itself is installed without its pins.
SAFETY_GYMNASIUM_SPEC ?= safety-gymnasium==1.0.0
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
DEPS := pyproject.toml constraints.txt Makefile

.PHONY: demo test test-slow lint typecheck docs docs-check bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -U pip

$(VENV)/.demo-installed: $(BIN)/python $(DEPS)
	$(PIP) install -c constraints.txt $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(PIP) install -c constraints.txt -e ".[train,semantic]"
	touch $@

$(VENV)/.test-installed: $(BIN)/python $(DEPS)
	$(PIP) install -c constraints.txt $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(PIP) install -c constraints.txt -e ".[dev,sb3,torch,safety,semantic,ray,datapacks,train]"
	$(PIP) install --no-deps "$(SAFETY_GYMNASIUM_SPEC)"
	touch $@ $(VENV)/.demo-installed

# PPO-Lagrangian + learning-progress curriculum + caption shaping on HazardNav (~3 min on
# 2 cores); the run directory (plots, model, logs) goes to runs/. DEMO_ARGS="--steps 20000" etc.
DEMO_ARGS ?=
demo: $(VENV)/.demo-installed
	$(BIN)/gymcurric demo $(DEMO_ARGS)

lint: $(VENV)/.test-installed
	$(BIN)/ruff check gymcurric tests benchmarks examples

typecheck: $(VENV)/.test-installed
	$(BIN)/mypy

# The docs site (mkdocs + Material + mkdocstrings) into site/. --strict: a broken link or anchor,
# a page missing from the nav or an API reference that does not resolve fails the build.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
docs: $(VENV)/.test-installed
	$(MKDOCS) build --strict --site-dir site

# the same strict build for `make test`, into a temporary folder
docs-check: $(VENV)/.test-installed
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && $(MKDOCS) build --strict --site-dir "$$tmp"

test: lint typecheck docs-check
	$(BIN)/python -m pytest -q

test-slow: $(VENV)/.test-installed
	$(BIN)/python -m pytest -q -m slow

# The anchors the benchmarks compare against (not dependencies of gymcurric itself).
BENCH_ANCHORS ?= syllabus-rl==0.7 scipy matplotlib torchrl==0.14.1

$(VENV)/.bench-installed: $(VENV)/.test-installed
	$(PIP) install -c constraints.txt $(BENCH_ANCHORS)
	touch $@

# the quick benchmarks; `gymcurric bench --all` adds the long ones (safety_gym, efficacy)
bench: $(VENV)/.bench-installed
	$(BIN)/gymcurric bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build site *.egg-info .pytest_cache .mypy_cache .ruff_cache
