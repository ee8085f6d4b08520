# sheetsync: the lean Makefile. `make demo` and `make test` are the quick start.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export SHEETSYNC_WORKERS_PRIORITY ?= 5
export SHEETSYNC_WORKERS_DEFAULT ?= 3
export SHEETSYNC_WORKERS_SCHEDULED ?= 2

# Both lock files come from pyproject.toml through one uv command, so they pin the same
# versions: requirements.lock (runtime + flower + dev; `make install`) and
# requirements-runtime.lock (runtime + flower; the image), the second constrained by the
# first. Existing pins are kept; `make lock LOCK_FLAGS=--upgrade` (or
# `--upgrade-package NAME`) moves them, `LOCK_FLAGS=--generate-hashes` adds hashes.
LOCK_FLAGS ?=
UV_COMPILE = $(abspath $(BIN))/uv pip compile pyproject.toml --quiet --python-version 3.11 \
	--custom-compile-command "make lock" $(LOCK_FLAGS)
define compile_locks
	cd $(1) && $(UV_COMPILE) --extra dev --extra flower -o requirements.lock
	cd $(1) && $(UV_COMPILE) --extra flower -c requirements.lock -o requirements-runtime.lock
endef
LOCK_CHECK := $(VENV)/lock-check
IMAGE ?= sheetsync:local

.PHONY: install test test-fast lint lock lock-check image demo bench flower worker beat emulator clean

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

test: install
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/hadolint Dockerfile
	$(BIN)/lint-imports

# Regenerate both lock files from pyproject.toml (needs PyPI).
lock: install
	$(call compile_locks,.)

# Fails when a lock file is not what `make lock` would write now (needs PyPI).
lock-check: install
	rm -rf $(LOCK_CHECK) && mkdir -p $(LOCK_CHECK)
	cp pyproject.toml requirements.lock requirements-runtime.lock $(LOCK_CHECK)/
	$(call compile_locks,$(LOCK_CHECK))
	diff -u requirements.lock $(LOCK_CHECK)/requirements.lock
	diff -u requirements-runtime.lock $(LOCK_CHECK)/requirements-runtime.lock
	rm -rf $(LOCK_CHECK)

# Needs a Docker daemon.
image:
	docker build -t $(IMAGE) .

demo: install
	$(BIN)/sheetsync demo

bench: install
	$(BIN)/python bench/run.py

worker: install
	$(BIN)/celery -A sheetsync.celery worker -Q sheetsync_priority -c $(SHEETSYNC_WORKERS_PRIORITY) -n priority@%h &
	$(BIN)/celery -A sheetsync.celery worker -Q sheetsync_default -c $(SHEETSYNC_WORKERS_DEFAULT) -n default@%h &
	$(BIN)/celery -A sheetsync.celery worker -Q sheetsync_scheduled -c $(SHEETSYNC_WORKERS_SCHEDULED) -n scheduled@%h &
	wait

beat: install
	$(BIN)/celery -A sheetsync.celery beat --schedule /tmp/sheetsync-beat

flower: install
	$(BIN)/celery -A sheetsync.celery flower --port=5555

emulator: install
	$(BIN)/sheetsync emulator --host 127.0.0.1 --port 8085

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .demo
