"""The sheet follows the answer: edits and deletions.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28

- ``sheet_transaction.change``: UPDATE or DELETE, a change to the answer that its row in
  the sheet has yet to follow; NULL once followed.
- ``sheet_transaction.change_seq``: how many changes were emitted for the (answer, sheet),
  so a flush that read the answer before a newer change clears nothing.
- ``sheet_transaction.type`` may now be ``DELETED`` (stored as text: no constraint changes).
- ``spread_sheet.blank_on_delete``: a deleted answer's personal-info cells are blanked and its
  row kept, instead of the row being deleted.
- Indexes on ``sheet_transaction.change`` (pending changes, counted by ``status``) and on
  ``dead_letter_answer.answer_id`` (an erasure takes ids out of every dead letter).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sheet_transaction") as table:
        table.add_column(sa.Column("change", sa.String(32), nullable=True))
        table.add_column(
            sa.Column("change_seq", sa.Integer, nullable=False, server_default=sa.text("0"))
        )
    op.create_index("ix_sheet_transaction_change", "sheet_transaction", ["change"])
    op.create_index("ix_dead_letter_answer_answer_id", "dead_letter_answer", ["answer_id"])
    with op.batch_alter_table("spread_sheet") as table:
        table.add_column(
            sa.Column("blank_on_delete", sa.Boolean, nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("spread_sheet") as table:
        table.drop_column("blank_on_delete")
    op.drop_index("ix_dead_letter_answer_answer_id", "dead_letter_answer")
    op.drop_index("ix_sheet_transaction_change", "sheet_transaction")
    with op.batch_alter_table("sheet_transaction") as table:
        table.drop_column("change_seq")
        table.drop_column("change")
