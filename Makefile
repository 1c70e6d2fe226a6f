# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv if missing and installs the hash-locked dependency set
# (requirements/lock.txt; torch 2.13.0 CPU): the core package plus its `train`
# extra (torch, transformers, peft, dvc, ...), `sign` (model-signing), `eval`
# (lm-evaluation-harness) and `dev` (pytest, ruff, mypy, pre-commit, build).
# `make release [SIGNING_KEY=key.pem]`: the wheel and sdist of HEAD, reproducibly, into
# dist/ with their sha256 (and signed). See docs/supply-chain.md.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP := $(BIN)/python -m pip
LOCK := requirements/lock.txt
PIPQ := $(PIP) --disable-pip-version-check install --quiet
export DVC_NO_ANALYTICS := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: demo test lint typecheck bench venv lock release clean bytecode

venv: $(STAMP)

$(STAMP): pyproject.toml $(LOCK) Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# every distribution of the lock, each file checked against its sha256; --no-deps: the
	# lock is the whole closure (pip check below proves it)
	$(PIPQ) --require-hashes --no-deps -r $(LOCK)
	# dlm-git itself, from this checkout with the locked setuptools (pip cannot hash an
	# editable install); editable_mode=compat: a plain .pth path entry instead of an
	# import-hook finder, which costs every python start (the git hooks) ~20-30 ms
	$(PIPQ) --no-deps --no-build-isolation --config-settings editable_mode=compat -e .
	$(PIP) check --disable-pip-version-check
	touch $(STAMP)

# Every Python process here runs with PYTHONDONTWRITEBYTECODE (above): nothing writes
# __pycache__ beside code a test or a user's repository holds (an lm-eval task's utils.py).
# So dlm-git's own bytecode is compiled here, once, into its (git-ignored) __pycache__:
# without it each of the suite's ~1,200 processes compiled every dlm_git module it
# imports again (`dlm-git verify HEAD` 260 -> 175 ms on a fresh clone). A stale file is
# recompiled here on the next run, and Python never runs bytecode whose source changed
# (it checks the source's mtime and size); selfid's digest leaves __pycache__/ out.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q dlm_git tests > /dev/null

demo: $(STAMP) bytecode
	$(BIN)/python scripts/demo.py

# The whole suite on TEST_WORKERS pytest-xdist workers (2: CI's cores; 0 runs it in one
# process). Each test file runs on one worker (`--dist loadfile`: a module's fixtures are
# built once), and a trained repository many files share is built once per run
# (tests/support/shared.py). The last line is the suite's wall time, for CI's log. One
# test alone needs no make: `.venv/bin/python -m pytest tests/...` runs in one process.
TEST_WORKERS ?= 2

test: $(STAMP) bytecode
	@start=$$(date +%s); \
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile; status=$$?; \
	echo "make test: wall time $$(( $$(date +%s) - start )) s (exit $$status)"; \
	exit $$status

lint: $(STAMP)
	$(BIN)/ruff check dlm_git tests benchmarks scripts build_backend
	$(BIN)/ruff format --check dlm_git tests benchmarks scripts build_backend

typecheck: $(STAMP)
	$(BIN)/mypy dlm_git

# Regenerate the lock with pip-tools (network: the package index) from a throwaway venv,
# keeping every pin it holds (LOCK_ARGS='-P NAME' upgrades one), then the versions-only
# constraints from it (the local +cpu label dropped: plain torch==2.13.0 for users elsewhere)
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet pip==26.3 pip-tools==7.6.2
	.lock-venv/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
		--extra train --extra dev --extra sign --extra eval --no-emit-find-links \
		--no-emit-index-url $(LOCK_ARGS) --output-file=$(LOCK) pyproject.toml
	{ echo '# versions only, for pip install -c; generated from $(LOCK) by make lock'; \
	  sed -nE 's/^([A-Za-z0-9][A-Za-z0-9._-]*==[^ +]*)(\+[^ ]*)? .*/\1/p' $(LOCK); \
	} > requirements/constraints.txt
	rm -rf .lock-venv

# SIGNING_KEY=path/to/key.pem: sign each artifact (dist/NAME.sig); dlm-git self-verify checks
release: $(STAMP)
	$(BIN)/python scripts/release.py --out dist $(if $(SIGNING_KEY),--key '$(SIGNING_KEY)')

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
