"""Full sheets roll over to new tabs.

Revision ID: 0005
Revises: 0004_column_maps
Create Date: 2026-11-23

- ``spread_sheet.tab_number``, ``tab_sheet_id``, ``tab_cells``: the tab a link's answers
  go to now (1: the linked tab; 2: "<title> (2)", ...), its gid, and the cells sheetsync
  wrote there; ``cells_alerted_at``: when the operator was told it is nearly full.
- ``sheet_intent.tab_sheet_id``: the tab an append went to, so a retry reads that tab.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004_column_maps"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("spread_sheet") as table:
        table.add_column(sa.Column("tab_number", sa.Integer, nullable=False, server_default="1"))
        table.add_column(sa.Column("tab_sheet_id", sa.BigInteger, nullable=True))
        table.add_column(sa.Column("tab_cells", sa.BigInteger, nullable=False, server_default="0"))
        table.add_column(sa.Column("cells_alerted_at", TIMESTAMP, nullable=True))
    with op.batch_alter_table("sheet_intent") as table:
        table.add_column(sa.Column("tab_sheet_id", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sheet_intent") as table:
        table.drop_column("tab_sheet_id")
    with op.batch_alter_table("spread_sheet") as table:
        table.drop_column("cells_alerted_at")
        table.drop_column("tab_cells")
        table.drop_column("tab_sheet_id")
        table.drop_column("tab_number")
