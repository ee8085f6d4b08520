"""Replays that finish only once their ids were requeued.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

- ``dead_letter.requeued_at``: when a replay handed the entry's ids back to their
  buffer. An entry is DONE only after that, once none of its ids is ENQUEUED: an entry
  claimed but not yet replayed holds only DEAD_LETTERED ids, which must not read as
  "all settled".
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("dead_letter") as table:
        table.add_column(sa.Column("requeued_at", TIMESTAMP, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dead_letter") as table:
        table.drop_column("requeued_at")
