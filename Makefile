# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv if missing and installs the pinned dependency set
# (requirements/constraints.txt; torch 2.13.0 CPU): the core package plus its `train`
# extra (torch, transformers, peft, dvc, ...), `sign` (model-signing), `eval`
# (lm-evaluation-harness) and `dev` (pytest, ruff, mypy, pre-commit).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP := $(BIN)/python -m pip
CONSTRAINTS := requirements/constraints.txt
export DVC_NO_ANALYTICS := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: demo test lint typecheck bench venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS) Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# editable_mode=compat: a plain .pth path entry instead of an import-hook finder, which
	# costs every python start (the git hooks) ~20-30 ms
	$(PIP) install --quiet --disable-pip-version-check -c $(CONSTRAINTS) \
		--config-settings editable_mode=compat -e '.[train,dev,sign,eval]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check dlm_git tests benchmarks scripts
	$(BIN)/ruff format --check dlm_git tests benchmarks scripts

typecheck: $(STAMP)
	$(BIN)/mypy dlm_git

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
