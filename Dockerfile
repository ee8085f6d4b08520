# sheetsync: workers, beat, Flower, the console, the exporter and `sheetsync db upgrade`,
# one image (the Sheets API emulator has an image of its own: emulator/Dockerfile).
# Runtime dependencies only: requirements-runtime.lock, the core and the [all] extra
# pinned by `make lock` (no emulator, no dev tools), each checked against its hashes,
# then the package itself with --no-deps (a local directory has no hash to check).
# .dockerignore keeps .git, .venv, local databases, .env files, caches and the tests out
# of the context.
FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /app

COPY requirements-runtime.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements-runtime.lock

# Only what the package and the `celery -A tasks` shim need; the files stay root-owned.
# Compose starts Flower as `python -m sheetsync.celery.flower` (its /metrics behind auth).
COPY pyproject.toml README.md LICENSE ./
COPY sheetsync ./sheetsync
COPY tasks ./tasks
COPY celeryconfig.py ./
RUN pip install --no-cache-dir --no-deps . \
    && useradd --create-home --uid 10001 --user-group sheetsync

# Numeric, so that a runtime (e.g. Kubernetes' runAsNonRoot) can tell it is not root.
USER 10001:10001

# Compose runs `celery -A sheetsync.celery ...` (works from any directory); this default
# still works from WORKDIR, which holds tasks/.
CMD ["celery", "-A", "tasks", "worker", "--loglevel=INFO"]
