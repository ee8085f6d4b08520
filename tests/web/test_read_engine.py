"""The console's read-only engine never creates a database it was not given."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from sheetsync.errors import ConfigError
from sheetsync.web.data import read_engine


def test_a_missing_sqlite_file_is_refused_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "gone.db"
    engine = read_engine(f"sqlite:///{path}")
    with pytest.raises(ConfigError, match="no database at"), engine.connect() as connection:
        connection.execute(text("SELECT 1"))
    engine.dispose()
    assert sorted(tmp_path.iterdir()) == []
