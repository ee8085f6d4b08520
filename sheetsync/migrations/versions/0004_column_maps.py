"""A column map per link, and links paused when row 1 no longer matches it.

Revision ID: 0004_column_maps
Revises: 0003
Create Date: 2026-11-23

- ``sheet_column``: where each question of a link's form goes in its sheet, kept for
  good (docs/ARCHITECTURE.md, "Columns"). Existing links get theirs on their next write.
- ``spread_sheet.paused_reason`` / ``paused_at``: a link whose row 1 cannot be matched
  writes nothing until ``sheetsync links resume``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_column_maps"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(128)
BIGINT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("spread_sheet") as table:
        table.add_column(sa.Column("paused_reason", sa.Text(), nullable=True))
        table.add_column(sa.Column("paused_at", TIMESTAMP, nullable=True))
    op.create_table(
        "sheet_column",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("link_id", BIGINT_ID, nullable=False),
        sa.Column("question_id", ID, nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=True),
        sa.Column("written_title", sa.Text(), nullable=True),
        sa.Column("formatted", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["link_id"],
            ["spread_sheet.id"],
            name="fk_sheet_column_link_id_spread_sheet",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_sheet_column"),
        sa.UniqueConstraint("link_id", "question_id", name="uq_sheet_column_link_id_question_id"),
        sa.UniqueConstraint("link_id", "position", name="uq_sheet_column_link_id_position"),
    )


def downgrade() -> None:
    op.drop_table("sheet_column")
    with op.batch_alter_table("spread_sheet") as table:
        table.drop_column("paused_at")
        table.drop_column("paused_reason")
