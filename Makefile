# sheetsync: the lean Makefile. `make demo` and `make test` are the quick start.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export SHEETSYNC_WORKERS_PRIORITY ?= 5
export SHEETSYNC_WORKERS_DEFAULT ?= 3
export SHEETSYNC_WORKERS_SCHEDULED ?= 2

.PHONY: install test test-fast lint demo bench flower worker beat emulator clean

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
