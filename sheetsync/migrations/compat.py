"""Which releases a schema accepts: a rolling upgrade's contract with the database.

A rolling upgrade runs the new release's ``sheetsync db upgrade`` first, then replaces
workers one by one, so the previous release's workers meet a schema revision they do not
know. The database says whether they may: ``schema_compat.accepts`` is the oldest head
revision whose release works with the schema as it is. A migration that only expands
(a table, a nullable or defaulted column, an index) sets it to the revision it found, or
keeps an older value; one that contracts (drops or renames what an older release reads
or writes, or adds a constraint it would break) sets it to a revision whose release no
longer uses what went. No table (every schema up to 0007) accepts its own head only.
The ORM never touches the table: it is not in ``sheetsync.models``.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import Connection

TABLE = "schema_compat"

_metadata = sa.MetaData()
schema_compat = sa.Table(
    TABLE,
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("accepts", sa.String(64), nullable=False),
)


def include_name(name: str | None, kind: str, _parent: object) -> bool:
    """For autogenerate (``include_name``): every name but this table, which is not the
    ORM's."""
    return not (kind == "table" and name == TABLE)


def accepts(connection: Connection) -> str | None:
    """The oldest head revision whose release works with this schema, if a migration
    said (None: only this schema's own head)."""
    if not sa.inspect(connection).has_table(TABLE):
        return None
    return connection.execute(sa.select(schema_compat.c.accepts)).scalar()


def set_accepts(connection: Connection, revision: str) -> None:
    """Say, from a migration's ``upgrade()`` (``op.get_bind()``), the oldest head revision
    whose release works with the schema it leaves."""
    _metadata.create_all(connection, checkfirst=True)
    connection.execute(sa.delete(schema_compat))
    connection.execute(sa.insert(schema_compat).values(id=1, accepts=revision))
