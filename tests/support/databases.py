"""Running a test on both databases."""

from __future__ import annotations

import pytest

#: Runs the test once on SQLite and once on PostgreSQL (skipped without
#: ``SHEETSYNC_TEST_POSTGRES_URL``). The test must use the ``db_url`` fixture (or one
#: built on it: ``engine``, ``session``, ``pipeline``...).
BOTH_DATABASES = pytest.mark.parametrize(
    "db_url",
    [
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ],
    indirect=True,
)


def on_both_databases(metafunc: pytest.Metafunc) -> None:
    """A module's ``pytest_generate_tests``: every test of it that uses the database
    (``db_url`` or a fixture built on it) runs on both, unless it chooses itself."""
    if "db_url" not in metafunc.fixturenames:
        return
    if any(
        marker.args and marker.args[0] == "db_url"
        for marker in metafunc.definition.iter_markers("parametrize")
    ):
        return
    metafunc.parametrize(
        "db_url",
        [
            pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
        ],
        indirect=True,
    )
