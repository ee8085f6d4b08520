"""Exactly once: one link per sheet, dead-letter ids as rows, durable write-ahead intents.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

- ``spread_sheet``: one link per (form, spreadsheet, gid). Existing duplicates (which
  appended every row twice) are merged first: the form owner's link is kept if there is
  one, else the oldest. The buffers of removed links are re-routed by the flush to the
  link that stays.
- ``dead_letter_answer``: a dead letter's answer ids, one row each (was a JSON list that
  every merge rewrote whole).
- ``sheet_intent``: the write-ahead intent of an append, committed before it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(128)
BIGINT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)

# Every link but the one to keep of its (form, spreadsheet, gid): the form owner's, else
# the oldest. Written once for both databases.
_DUPLICATE_LINKS = """
DELETE FROM spread_sheet WHERE id IN (
  SELECT link.id FROM spread_sheet AS link
  JOIN submission ON submission.id = link.submission_id
  WHERE EXISTS (
    SELECT 1 FROM spread_sheet AS other
    JOIN submission AS form ON form.id = other.submission_id
    WHERE other.submission_id = link.submission_id
      AND other.spread_sheet_id = link.spread_sheet_id
      AND other.sheet_id = link.sheet_id
      AND other.id <> link.id
      AND (
        (other.create_user_id = form.owner_id) > (link.create_user_id = submission.owner_id)
        OR ((other.create_user_id = form.owner_id) = (link.create_user_id = submission.owner_id)
            AND other.id < link.id)
      )
  )
)
"""

# The ids are copied aside first: on SQLite, dropping the JSON column rebuilds
# dead_letter (DROP TABLE), which would cascade to a child table already there.
_SAVE_DEAD_LETTER_IDS = {
    "postgresql": (
        "CREATE TEMPORARY TABLE dead_letter_ids AS "
        "SELECT DISTINCT id AS dead_letter_id, jsonb_array_elements_text(answer_ids::jsonb) "
        "AS answer_id FROM dead_letter"
    ),
    "sqlite": (
        "CREATE TEMPORARY TABLE dead_letter_ids AS "
        "SELECT DISTINCT dead_letter.id AS dead_letter_id, value AS answer_id "
        "FROM dead_letter, json_each(dead_letter.answer_ids)"
    ),
}


def upgrade() -> None:
    op.execute(_DUPLICATE_LINKS)
    with op.batch_alter_table("spread_sheet") as table:
        table.create_unique_constraint(
            "uq_spread_sheet_submission_id_spread_sheet_id_sheet_id",
            ["submission_id", "spread_sheet_id", "sheet_id"],
        )

    op.execute(_SAVE_DEAD_LETTER_IDS[op.get_bind().dialect.name])
    with op.batch_alter_table("dead_letter") as table:
        table.drop_column("answer_ids")
    op.create_table(
        "dead_letter_answer",
        sa.Column("dead_letter_id", BIGINT_ID, nullable=False),
        sa.Column("answer_id", ID, nullable=False),
        sa.ForeignKeyConstraint(
            ["dead_letter_id"],
            ["dead_letter.id"],
            name="fk_dead_letter_answer_dead_letter_id_dead_letter",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("dead_letter_id", "answer_id", name="pk_dead_letter_answer"),
    )
    op.execute(
        "INSERT INTO dead_letter_answer (dead_letter_id, answer_id) "
        "SELECT dead_letter_id, answer_id FROM dead_letter_ids"
    )
    op.execute("DROP TABLE dead_letter_ids")

    op.create_table(
        "sheet_intent",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("submission_id", ID, nullable=False),
        sa.Column("spread_sheet_id", ID, nullable=False),
        sa.Column("sheet_id", sa.BigInteger(), nullable=False),
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("answer_ids", sa.JSON(), nullable=False),
        sa.Column("after_row", sa.BigInteger(), nullable=True),
        sa.Column("deadline_ms", sa.BigInteger(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_sheet_intent"),
    )
    op.create_index(
        "ix_sheet_intent_spread_sheet_id_sheet_id_submission_id",
        "sheet_intent",
        ["spread_sheet_id", "sheet_id", "submission_id"],
    )


def downgrade() -> None:
    op.drop_table("sheet_intent")
    json = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql")
    with op.batch_alter_table("dead_letter") as table:
        table.add_column(sa.Column("answer_ids", json, nullable=False, server_default="[]"))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "UPDATE dead_letter SET answer_ids = coalesce((SELECT jsonb_agg(answer_id) "
            "FROM dead_letter_answer WHERE dead_letter_id = dead_letter.id), '[]'::jsonb)"
        )
    else:
        op.execute(
            "UPDATE dead_letter SET answer_ids = coalesce((SELECT json_group_array(answer_id) "
            "FROM dead_letter_answer WHERE dead_letter_id = dead_letter.id), '[]')"
        )
    op.drop_table("dead_letter_answer")
    with op.batch_alter_table("spread_sheet") as table:
        table.drop_constraint("uq_spread_sheet_submission_id_spread_sheet_id_sheet_id")
