"""A link may escape formula-like text.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27

- ``spread_sheet.escape_formulas``: when true, a text cell that begins with ``=``, ``+``,
  ``-``, ``@``, a tab or a carriage return is written with a leading apostrophe, so a CSV
  export of the sheet opened in another spreadsheet program does not run it as a formula.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("spread_sheet") as table:
        table.add_column(
            sa.Column("escape_formulas", sa.Boolean, nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("spread_sheet") as table:
        table.drop_column("escape_formulas")
