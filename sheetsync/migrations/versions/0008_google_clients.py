"""Several OAuth clients: the one each credential was issued by.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28

- ``google_credential.google_client``: the OAuth client the owner consented to, by its
  name in ``SHEETSYNC_GOOGLE_CLIENTS_FILE``; NULL (every row before) is the client of
  ``SHEETSYNC_GOOGLE_CLIENT_ID``.

An expand: releases at 0007 ignore the column and keep working (``schema_compat``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from sheetsync.migrations import compat

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("google_credential") as table:
        table.add_column(sa.Column("google_client", sa.String(64), nullable=True))
    compat.set_accepts(op.get_bind(), "0007")


def downgrade() -> None:
    op.drop_table(compat.TABLE)
    with op.batch_alter_table("google_credential") as table:
        table.drop_column("google_client")
