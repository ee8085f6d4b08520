"""The initial schema: forms, answers, sheet links, credentials, transactions, dead letters.

Revision ID: 0001
Revises:
Create Date: 2024-11-22

Written by hand to match :mod:`sheetsync.models`; a test compares the two with
Alembic's autogenerate on SQLite and PostgreSQL. Enums are plain ``VARCHAR(32)``
(the models use ``native_enum=False``), so adding a value needs no migration.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(128)
ENUM = sa.String(32)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
# Answers stay plain ``json`` on PostgreSQL: read in bulk, never queried into.
JSON_TEXT = sa.JSON()
BIGINT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", ID, nullable=False),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("plan", ENUM, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
    )
    op.create_table(
        "submission",
        sa.Column("id", ID, nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("owner_id", ID, nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name="fk_submission_owner_id_users"),
        sa.PrimaryKeyConstraint("id", name="pk_submission"),
    )
    op.create_index("ix_submission_owner_id", "submission", ["owner_id"])
    op.create_table(
        "step",
        sa.Column("id", ID, nullable=False),
        sa.Column("submission_id", ID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submission.id"],
            name="fk_step_submission_id_submission",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_step"),
    )
    op.create_index("ix_step_submission_id_position", "step", ["submission_id", "position"])
    op.create_table(
        "question",
        sa.Column("id", ID, nullable=False),
        sa.Column("step_id", ID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("type", ENUM, nullable=False),
        sa.ForeignKeyConstraint(
            ["step_id"], ["step.id"], name="fk_question_step_id_step", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_question"),
    )
    op.create_index("ix_question_step_id_position", "question", ["step_id", "position"])
    op.create_table(
        "submission_answer",
        sa.Column("id", ID, nullable=False),
        sa.Column("submission_id", ID, nullable=False),
        sa.Column("user_name", sa.Text(), nullable=True),
        sa.Column("submitted_at", TIMESTAMP, nullable=False),
        sa.Column("answer", JSON_TEXT, nullable=False),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submission.id"],
            name="fk_submission_answer_submission_id_submission",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_submission_answer"),
    )
    op.create_index("ix_submission_answer_submission_id", "submission_answer", ["submission_id"])
    op.create_table(
        "spread_sheet",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("submission_id", ID, nullable=False),
        sa.Column("spread_sheet_id", ID, nullable=False),
        sa.Column("sheet_id", sa.BigInteger(), nullable=False),
        sa.Column("create_user_id", ID, nullable=False),
        sa.ForeignKeyConstraint(
            ["create_user_id"], ["users.id"], name="fk_spread_sheet_create_user_id_users"
        ),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submission.id"],
            name="fk_spread_sheet_submission_id_submission",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_spread_sheet"),
    )
    op.create_index("ix_spread_sheet_submission_id", "spread_sheet", ["submission_id"])
    op.create_index("ix_spread_sheet_create_user_id", "spread_sheet", ["create_user_id"])
    op.create_table(
        "google_credential",
        sa.Column("user_id", ID, nullable=False),
        sa.Column("google_account_id", sa.String(255), nullable=False),
        sa.Column("refresh_token", sa.Text(), nullable=False),
        sa.Column("scopes", sa.Text(), nullable=False),
        sa.Column("status", ENUM, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_google_credential_user_id_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("user_id", name="pk_google_credential"),
    )
    op.create_table(
        "sheet_transaction",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("submission_answer_id", ID, nullable=False),
        sa.Column("spread_sheet_id", ID, nullable=False),
        sa.Column("sheet_id", sa.BigInteger(), nullable=False),
        sa.Column("type", ENUM, nullable=False),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_sheet_transaction"),
        sa.UniqueConstraint(
            "submission_answer_id",
            "spread_sheet_id",
            "sheet_id",
            name="uq_sheet_transaction_answer_sheet",
        ),
    )
    op.create_index(
        "ix_sheet_transaction_type_updated_at", "sheet_transaction", ["type", "updated_at"]
    )
    op.create_table(
        "dead_letter",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("submission_id", ID, nullable=False),
        sa.Column("spread_sheet_id", ID, nullable=False),
        sa.Column("sheet_id", sa.BigInteger(), nullable=False),
        sa.Column("answer_ids", JSON, nullable=False),
        sa.Column("reason", ENUM, nullable=False),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("status", ENUM, nullable=False),
        sa.Column("next_attempt_at", TIMESTAMP, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_dead_letter"),
    )
    op.create_index(
        "ix_dead_letter_status_next_attempt_at", "dead_letter", ["status", "next_attempt_at"]
    )
    op.create_index("ix_dead_letter_user_id_status", "dead_letter", ["user_id", "status"])


def downgrade() -> None:
    for table in (
        "dead_letter",
        "sheet_transaction",
        "google_credential",
        "spread_sheet",
        "submission_answer",
        "question",
        "step",
        "submission",
        "users",
    ):
        op.drop_table(table)
