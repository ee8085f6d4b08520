# sheetsync: the lean Makefile. `make demo` and `make test` are the quick start.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export SHEETSYNC_WORKERS_PRIORITY ?= 5
export SHEETSYNC_WORKERS_DEFAULT ?= 3
export SHEETSYNC_WORKERS_SCHEDULED ?= 2

# The lock files come from pyproject.toml and emulator/pyproject.toml (the Sheets API
# emulator, a package of its own) through one uv command, so they pin the same versions:
# requirements.lock (the dev extra: every extra and the dev tools, the docs, and the
# emulator's runtime and tests; `make install`), requirements-runtime.lock (the core and
# [all]: workers, beat, Flower, the console, the exporter, PostgreSQL; the image) and
# emulator/requirements.lock (the emulator's runtime; its image), the last two constrained
# by the first. Every pin carries its hashes (--generate-hashes): `make install` and the
# images install with `pip install --require-hashes`, so a changed file on the index fails
# the install. Existing pins are kept; `make lock LOCK_FLAGS=--upgrade` (or
# `--upgrade-package NAME`) moves them.
LOCK_FLAGS ?=
UV_COMPILE = $(abspath $(BIN))/uv pip compile --quiet --python-version 3.11 \
	--custom-compile-command "make lock" --generate-hashes $(LOCK_FLAGS)
define compile_locks
	cd $(1) && $(UV_COMPILE) pyproject.toml emulator/pyproject.toml \
		--extra dev --extra docs --extra test -o requirements.lock
	cd $(1) && $(UV_COMPILE) pyproject.toml --extra all -c requirements.lock \
		-o requirements-runtime.lock
	cd $(1) && $(UV_COMPILE) emulator/pyproject.toml -c requirements.lock \
		-o emulator/requirements.lock
endef
LOCK_CHECK := $(VENV)/lock-check
IMAGE ?= sheetsync:local

LOCK_FILES := requirements.lock requirements-runtime.lock emulator/requirements.lock

.PHONY: install browser test test-fast test-unit lint docs lock lock-check install-test image demo demo-env demo-web bench chaos flower worker beat emulator clean

install: $(STAMP)

# The pins, each checked against its hashes; then the project and the emulator package
# (emulator/), local directories with no hash to check, in a step of their own
# (--no-deps: they bring in nothing else).
$(STAMP): requirements.lock pyproject.toml emulator/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e . -e ./emulator
	touch $(STAMP)

# The web tests drive Debian's chromium through chromium-driver: installed when missing,
# with a Korean font (fonts-nanum).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  echo "make browser: installing chromium and chromium-driver (apt-get)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q chromium chromium-driver >/dev/null; }; }
	@# The demo forms are Korean: a font for them, so the screenshots show text, not boxes.
	@fc-list :lang=ko 2>/dev/null | grep -q . || { \
	  echo "make browser: installing fonts-nanum (apt-get)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q fonts-nanum >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q fonts-nanum >/dev/null; }; }

# The suite in tiers. `make test` runs everything: the tests in parallel (pytest-xdist,
# TEST_WORKERS processes, each with its own redis-server and emulator), then the few that
# assert a real-time bound (marked `timing`) alone, so a busy neighbour cannot fail them.
# `make test-fast` is the loop to run while working, about a minute: the tests that start
# no other process (the tests' redis-server and the in-process emulator are shared), less
# the `timing` ones, with a tenth of each hypothesis property's examples
# (tests/support/examples.py). The worker, subprocess, whole-stack, chaos, browser and
# Docker tests are `make test`'s. PYTEST_ARGS adds options to each.
TEST_WORKERS ?= 3
# Test modules' bytecode (their rewritten asserts) is kept between runs, whatever the
# shell says: each pytest process otherwise rewrites every module again (4 s of each start).
export PYTHONDONTWRITEBYTECODE :=
PYTEST_ARGS ?=
PARALLEL := -n $(TEST_WORKERS) --dist worksteal
FAST := not slow and not chaos and not browser and not docker and not process and not worker

test: install browser
	$(BIN)/pytest $(PARALLEL) -m "not timing" $(PYTEST_ARGS)
	$(BIN)/pytest -m timing $(PYTEST_ARGS)

test-fast: install
	SHEETSYNC_TEST_TIER=fast $(BIN)/pytest $(PARALLEL) -m "$(FAST) and not timing" $(PYTEST_ARGS)

# `make test-unit`: the tests that start nothing, in seconds: no Redis, emulator, worker,
# subprocess, PostgreSQL, browser or Docker (marked `unit` by tests/support/tiers.py from
# the fixtures and helpers they use), less the `timing` ones (real-time waits, run alone by
# the other targets) and the `hypothesis` properties (thousands of examples: 14 of its 33 s
# here); test runs both. One process: collecting twice costs what a second
# one saves. A test of the tier that starts a process or asks for Redis fails, saying so.
test-unit: install
	$(BIN)/pytest -m "unit and not timing and not hypothesis" $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/hadolint Dockerfile emulator/Dockerfile
	$(BIN)/lint-imports
	$(MAKE) --no-print-directory docs

# The docs site (mkdocs.yml) into site/: strict, so a broken link or anchor, or a page left
# out of the nav, fails; the reference pages are written from the code
# (docs/gen_reference.py). The two variables mute the banners mkdocs-material and a
# plugin print about MkDocs' future (the pinned mkdocs 1.6 builds as it is). No --quiet:
# it hides the warnings from the count that --strict fails on.
docs: install
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict

# Regenerate both lock files, with hashes, from pyproject.toml (needs PyPI).
lock: install
	$(call compile_locks,.)

# Fails when a lock file is not what `make lock` would write now (needs PyPI).
lock-check: install
	rm -rf $(LOCK_CHECK) && mkdir -p $(LOCK_CHECK)/emulator
	cp pyproject.toml requirements.lock requirements-runtime.lock $(LOCK_CHECK)/
	cp emulator/pyproject.toml emulator/requirements.lock $(LOCK_CHECK)/emulator/
	$(call compile_locks,$(LOCK_CHECK))
	for lock in $(LOCK_FILES); do diff -u $$lock $(LOCK_CHECK)/$$lock || exit 1; done
	rm -rf $(LOCK_CHECK)

# Build the wheel and the sdist, check what they ship, install the wheel into fresh
# venvs outside the repository (each CPython >= 3.11 found) and run the minimal
# integration from there against a redis-server of its own (.ci/install_test.py).
# `make install-test INSTALL_TEST_ARGS="--python 3.12"` for one version.
INSTALL_TEST_ARGS ?=
install-test: install
	$(BIN)/python .ci/install_test.py $(INSTALL_TEST_ARGS)

# Needs a Docker daemon.
image:
	docker build -t $(IMAGE) .

# The demos run in an environment of their own, .demo-venv, not the development one
# (.venv: the tests, the linters, the docs, every extra; minutes to build): the pins of
# requirements-runtime.lock the demo needs (sheetsync's core and its [worker] extra) and
# emulator/requirements.lock (the emulator's runtime), picked with their hashes by
# sheetsync/dev/demo_requirements.py and installed with --require-hashes as `make
# install` does; then the project and the emulator (--no-deps). `make demo-web` adds the
# [web] extra's pins. `make test` and the rest still use .venv.
DEMO_VENV ?= .demo-venv
DEMO_BIN := $(DEMO_VENV)/bin
DEMO_STAMP := $(DEMO_VENV)/.installed
DEMO_PIP := $(DEMO_BIN)/pip install --quiet --disable-pip-version-check
DEMO_PICK := $(PYTHON) sheetsync/dev/demo_requirements.py
DEMO_INPUTS := requirements-runtime.lock emulator/requirements.lock pyproject.toml \
	emulator/pyproject.toml sheetsync/dev/demo_requirements.py

demo-env: $(DEMO_STAMP)

$(DEMO_STAMP): $(DEMO_INPUTS)
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_PICK) --extra worker > $(DEMO_VENV)/requirements.txt
	$(DEMO_PIP) --require-hashes -r $(DEMO_VENV)/requirements.txt
	$(DEMO_PIP) --no-deps -e . -e ./emulator
	touch $(DEMO_STAMP)

$(DEMO_STAMP)-web: $(DEMO_STAMP)
	$(DEMO_PICK) --extra worker --extra web > $(DEMO_VENV)/requirements-web.txt
	$(DEMO_PIP) --require-hashes -r $(DEMO_VENV)/requirements-web.txt
	touch $(DEMO_STAMP)-web

demo: demo-env
	$(DEMO_BIN)/sheetsync demo

# The demo forms in a web app to click (examples/webapp) on the same stack, until Ctrl-C.
# `make demo-web DEMO_WEB_PORT=8001` if 8000 is taken.
DEMO_WEB_PORT ?= 8000
demo-web: $(DEMO_STAMP)-web
	$(DEMO_BIN)/python -m sheetsync.dev.demo_web --port $(DEMO_WEB_PORT)

# `make bench` runs them all (about 20 minutes); `make bench ONLY="emit flow"` a few.
ONLY ?=
bench: install
	$(BIN)/python bench/run.py $(ONLY)

# The chaos suite (tests/chaos): PostgreSQL, its own redis-server, worker processes (one
# under faketime), beat and the emulator under seeded faults, then an account of every
# (answer, sheet) and a PII audit; exits 1 on anything lost, duplicated, stranded or leaked.
# `make chaos SEED="1 2 3" ANSWERS=5000`; CHAOS_ARGS adds options (`--skip row_delete`...).
# Needs redis-server and faketime (apt-get install redis-server faketime).
SEED ?= 1
ANSWERS ?= 5000
SHEETS ?= 6
FAULTS ?= 20
CHAOS_POSTGRES_URL ?= $(or $(SHEETSYNC_TEST_POSTGRES_URL),postgresql://postgres@127.0.0.1:5432/postgres)
CHAOS_ARGS ?=

chaos: install
	PYTHONPATH=tests $(BIN)/python -m chaos --seed $(SEED) --answers $(ANSWERS) \
		--sheets $(SHEETS) --faults-per-kind $(FAULTS) --postgres $(CHAOS_POSTGRES_URL) $(CHAOS_ARGS)

worker: install
	$(BIN)/celery -A sheetsync.celery worker -Q sheetsync_priority -c $(SHEETSYNC_WORKERS_PRIORITY) -n priority@%h &
	$(BIN)/celery -A sheetsync.celery worker -Q sheetsync_default -c $(SHEETSYNC_WORKERS_DEFAULT) -n default@%h &
	$(BIN)/celery -A sheetsync.celery worker -Q sheetsync_scheduled -c $(SHEETSYNC_WORKERS_SCHEDULED) -n scheduled@%h &
	wait

beat: install
	$(BIN)/celery -A sheetsync.celery beat --schedule /tmp/sheetsync-beat

# Flower behind basic auth (FLOWER_BASIC_AUTH=user:password, a password of 32 characters
# or more), on loopback.
flower: install
	$(BIN)/python -m sheetsync.celery.flower --address=127.0.0.1 --port=5555

emulator: install
	$(BIN)/sheetsync emulator --host 127.0.0.1 --port 8085

clean:
	rm -rf $(VENV) $(DEMO_VENV) .pytest_cache .mypy_cache .ruff_cache .demo site
