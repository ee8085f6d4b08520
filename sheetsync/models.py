"""The domain as SQLAlchemy 2.x models: forms, answers, sheet links, credentials, outbox.

Table and column names are part of the interface (the web app and the tests use them).
Table names are the snake_case class names, except ``users``: ``user`` is a reserved
word in PostgreSQL, and raw SQL against it silently reads ``current_user``.

Portability choices, so one schema runs on SQLite and PostgreSQL:

- Enums are stored as their names in ``VARCHAR(32)`` (``native_enum=False``): no
  ``CREATE TYPE`` to migrate when a value is added, and rows stay readable in psql.
- Timestamps are :class:`UtcDateTime`: aware in, aware (UTC) out, on both databases.
- An answer's items are ``json`` (text, stored verbatim) on PostgreSQL: a flush
  reads thousands at a time, and ``jsonb`` would have the server re-serialize each one
  to text on every read. Other JSON is ``jsonb`` on PostgreSQL; SQLite has only text.

``SheetTransaction`` and ``DeadLetter`` carry no foreign keys on purpose: they are an
operational log that must be able to record an answer that was deleted meanwhile.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Enum,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

#: Longest id the pipeline accepts (``[A-Za-z0-9_-]{1,128}``, see :mod:`sheetsync.redis_keys`).
ID_LENGTH = 128
#: Room for every enum's names, with space to add values without a migration.
ENUM_LENGTH = 32

#: Deterministic constraint names, identical on every backend, so migrations can name them.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """Now, aware, in UTC."""
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """An aware datetime stored as UTC; read back aware in UTC on every backend.

    SQLite has no time zones: values are stored as naive UTC text. A naive datetime
    is refused rather than guessed at.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("naive datetime: sheetsync stores aware datetimes only")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


#: JSON text on every backend (``json``, not ``jsonb``, on PostgreSQL): for data read
#: in bulk and never queried into. The server hands it out as stored, where ``jsonb``
#: must be converted back to text for every row read (about a fifth of hydrating a
#: batch). No equality operator, no GIN index: compare or search it in Python.
JsonTextType = JSON()
#: 64-bit surrogate keys, but ``INTEGER`` on SQLite, where only that aliases the rowid.
BigIntId = BigInteger().with_variant(Integer(), "sqlite")


def _enum(enum_class: type[enum.Enum]) -> Enum:
    return Enum(
        enum_class,
        native_enum=False,
        create_constraint=False,
        length=ENUM_LENGTH,
        validate_strings=True,
    )


class Plan(enum.StrEnum):
    FREE = "FREE"
    PRO = "PRO"
    PRO_PLUS = "PRO_PLUS"
    ENTERPRISE = "ENTERPRISE"


class QuestionType(enum.StrEnum):
    SHORT_TEXT = "SHORT_TEXT"
    LONG_TEXT = "LONG_TEXT"
    SINGLE_CHOICE = "SINGLE_CHOICE"
    MULTI_CHOICE = "MULTI_CHOICE"
    DATE = "DATE"
    NUMBER = "NUMBER"
    FILE = "FILE"
    #: Stored encrypted (:mod:`sheetsync.crypto`); decrypted only when building a row.
    PERSONAL_INFO = "PERSONAL_INFO"
    #: Display-only: never a column, and its answers are ignored.
    JUMBOTRON = "JUMBOTRON"


class CredentialStatus(enum.StrEnum):
    VALID = "VALID"
    INVALID = "INVALID"
    EXPIRED = "EXPIRED"


class TransactionType(enum.StrEnum):
    INIT = "INIT"
    VALIDATION_FAILED = "VALIDATION_FAILED"
    ENQUEUED = "ENQUEUED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    DEAD_LETTERED = "DEAD_LETTERED"
    #: The answer was deleted: its row is gone from the sheet, or was never written.
    DELETED = "DELETED"


class AnswerChange(enum.StrEnum):
    """A change to an answer the sheet has yet to follow (``SheetTransaction.change``)."""

    #: Its items changed: its row is rewritten at its latest version.
    UPDATE = "UPDATE"
    #: It was deleted (or erased): its row is removed.
    DELETE = "DELETE"


class DeadLetterReason(enum.StrEnum):
    #: The owner's Google credential fails: retried in 7 days, or when they reconnect.
    CREDENTIAL = "CREDENTIAL"
    #: Google or the database kept failing: retried in an hour.
    TRANSIENT_EXHAUSTED = "TRANSIENT_EXHAUSTED"
    #: A setting or a PII key is missing: retried in an hour, or by hand once fixed.
    CONFIGURATION = "CONFIGURATION"
    #: Something unforeseen (a bug) kept failing: retried in an hour.
    UNEXPECTED = "UNEXPECTED"
    #: The sheet is gone or forbidden: FAILED, replayed only by hand.
    PERMANENT = "PERMANENT"
    #: The spreadsheet reached Google's cell limit and no new tab fits: retried in an
    #: hour (once the owner frees cells), never FAILED.
    SHEET_FULL = "SHEET_FULL"
    #: Row 1 no longer matches the link's columns: waits for ``sheetsync links resume``.
    PAUSED = "PAUSED"


class DeadLetterStatus(enum.StrEnum):
    PENDING = "PENDING"
    REPLAYING = "REPLAYING"
    DONE = "DONE"
    FAILED = "FAILED"
    PURGED = "PURGED"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UtcDateTime()}


class User(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    email: Mapped[str] = mapped_column(String(320))
    plan: Mapped[Plan] = mapped_column(_enum(Plan), default=Plan.FREE)

    credential: Mapped[GoogleCredential | None] = relationship(
        back_populates="user", passive_deletes=True
    )


class Submission(Base):
    """A form."""

    __tablename__ = "submission"

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    title: Mapped[str] = mapped_column(Text)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)

    owner: Mapped[User] = relationship()
    steps: Mapped[list[Step]] = relationship(
        back_populates="submission",
        order_by="[Step.position, Step.id]",
        cascade="all, delete-orphan",
        passive_deletes=True,
    )
    spread_sheets: Mapped[list[SpreadSheet]] = relationship(
        back_populates="submission", cascade="all, delete-orphan", passive_deletes=True
    )


class Step(Base):
    __tablename__ = "step"
    __table_args__ = (Index(None, "submission_id", "position"),)

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submission.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(Text, default="")

    submission: Mapped[Submission] = relationship(back_populates="steps")
    questions: Mapped[list[Question]] = relationship(
        back_populates="step",
        order_by="[Question.position, Question.id]",
        cascade="all, delete-orphan",
        passive_deletes=True,
    )


class Question(Base):
    __tablename__ = "question"
    __table_args__ = (Index(None, "step_id", "position"),)

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    step_id: Mapped[str] = mapped_column(ForeignKey("step.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(Text)
    type: Mapped[QuestionType] = mapped_column(_enum(QuestionType))

    step: Mapped[Step] = relationship(back_populates="questions")


class SubmissionAnswer(Base):
    """One response to a form.

    ``answer`` is a list of ``{"questionId": str, "value": str | list[str] | None}``;
    a PERSONAL_INFO value is a :mod:`sheetsync.crypto` token.
    """

    __tablename__ = "submission_answer"

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    submission_id: Mapped[str] = mapped_column(
        ForeignKey("submission.id", ondelete="CASCADE"), index=True
    )
    user_name: Mapped[str | None] = mapped_column(Text)
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    answer: Mapped[list[dict[str, Any]]] = mapped_column(JsonTextType, default=list)

    # No reverse collection: a form can have millions of answers.
    submission: Mapped[Submission] = relationship()


class SpreadSheet(Base):
    """A link from a form to one sheet (tab) of a Google spreadsheet.

    One link per (form, spreadsheet, gid): a second one would append every row twice.
    """

    __tablename__ = "spread_sheet"
    __table_args__ = (UniqueConstraint("submission_id", "spread_sheet_id", "sheet_id"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    submission_id: Mapped[str] = mapped_column(
        ForeignKey("submission.id", ondelete="CASCADE"), index=True
    )
    #: Google's spreadsheet id (the long token in the sheet's URL).
    spread_sheet_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    #: The tab's gid.
    sheet_id: Mapped[int] = mapped_column(BigInteger)
    create_user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    #: The tab answers go to now: 1 is the linked tab itself, 2 its first roll-over
    #: "<title> (2)", ... (docs/ARCHITECTURE.md, "Full sheets roll over").
    tab_number: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    #: The gid of that tab (None: the linked tab, ``sheet_id``).
    tab_sheet_id: Mapped[int | None] = mapped_column(BigInteger)
    #: The cells sheetsync has written to that tab (rows x the header's width).
    tab_cells: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    #: When the operator was told the link's tab passed the alert share of its limit.
    cells_alerted_at: Mapped[datetime | None] = mapped_column()
    #: Why the link is paused (row 1 no longer matches its column map), or None. A
    #: paused link writes nothing until ``sheetsync links resume`` (docs/ARCHITECTURE.md,
    #: "Columns").
    paused_reason: Mapped[str | None] = mapped_column(Text)
    paused_at: Mapped[datetime | None] = mapped_column()
    #: Write text that begins like a formula (``=``, ``+``, ``-``, ``@``, tab, CR) with a
    #: leading apostrophe: the sheet's CSV export then runs nothing in other programs.
    escape_formulas: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    #: A deleted (or erased) answer's personal-info cells and submitter are blanked, its
    #: row kept, instead of its row being deleted: for owners who keep row counts.
    blank_on_delete: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    submission: Mapped[Submission] = relationship(back_populates="spread_sheets")
    create_user: Mapped[User] = relationship()


class GoogleCredential(Base):
    __tablename__ = "google_credential"

    user_id: Mapped[str] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    google_account_id: Mapped[str] = mapped_column(String(255))
    #: A :mod:`sheetsync.crypto` token, never the plain refresh token.
    refresh_token: Mapped[str] = mapped_column(Text)
    #: Space-separated OAuth scopes, as Google returns them.
    scopes: Mapped[str] = mapped_column(Text, default="")
    #: The OAuth client the owner consented to, by its name in ``GOOGLE_CLIENTS_FILE``
    #: (its Cloud project's quota paces the owner); NULL: ``GOOGLE_CLIENT_ID``'s.
    google_client: Mapped[str | None] = mapped_column(String(64), nullable=True)
    status: Mapped[CredentialStatus] = mapped_column(
        _enum(CredentialStatus), default=CredentialStatus.VALID
    )
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    user: Mapped[User] = relationship(back_populates="credential")


class SheetTransaction(Base):
    """Where one answer stands for one sheet: the outbox row and the exactly-once ledger."""

    __tablename__ = "sheet_transaction"
    __table_args__ = (
        # Named by hand: the convention's name is longer than PostgreSQL's 63 characters.
        UniqueConstraint(
            "submission_answer_id",
            "spread_sheet_id",
            "sheet_id",
            name="uq_sheet_transaction_answer_sheet",
        ),
        Index(None, "type", "updated_at"),
        Index(None, "change"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    submission_answer_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    #: Google's spreadsheet id (not :attr:`SpreadSheet.id`).
    spread_sheet_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    sheet_id: Mapped[int] = mapped_column(BigInteger)
    type: Mapped[TransactionType] = mapped_column(_enum(TransactionType))
    error_message: Mapped[str | None] = mapped_column(Text)
    #: A change the sheet has yet to follow (None: the row, if any, is up to date).
    change: Mapped[AnswerChange | None] = mapped_column(_enum(AnswerChange))
    #: Counts the changes emitted: a flush clears ``change`` only if no newer one came
    #: since it read the answer (a compare-and-set on this).
    change_seq: Mapped[int] = mapped_column(Integer, server_default="0")
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class DeadLetter(Base):
    """Answer ids parked for a buffer that could not be flushed. Ids only, never rows:
    they are :class:`DeadLetterAnswer` rows, so parking one more id is one insert."""

    __tablename__ = "dead_letter"
    __table_args__ = (
        Index(None, "status", "next_attempt_at"),
        Index(None, "user_id", "status"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    submission_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    spread_sheet_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    sheet_id: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[DeadLetterReason] = mapped_column(_enum(DeadLetterReason))
    error_message: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[DeadLetterStatus] = mapped_column(
        _enum(DeadLetterStatus), default=DeadLetterStatus.PENDING
    )
    next_attempt_at: Mapped[datetime] = mapped_column(default=utcnow)
    #: When a replay handed the ids back to their buffer (None until then, and again
    #: after each claim): only a requeued entry can be DONE.
    requeued_at: Mapped[datetime | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class DeadLetterAnswer(Base):
    """One answer id held by a dead letter."""

    __tablename__ = "dead_letter_answer"
    __table_args__ = (Index(None, "answer_id"),)

    dead_letter_id: Mapped[int] = mapped_column(
        BigIntId, ForeignKey("dead_letter.id", ondelete="CASCADE"), primary_key=True
    )
    answer_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)


class SheetIntent(Base):
    """The write-ahead intent of one append: these ids may be in the sheet.

    Committed before ``values.append``; deleted in the transaction that records the
    batch COMPLETED. A run that finds one reads the sheet before appending anything, and
    the reconciler never pushes an id an open intent covers (docs/ARCHITECTURE.md,
    "Crash safety").
    """

    __tablename__ = "sheet_intent"
    __table_args__ = (Index(None, "spread_sheet_id", "sheet_id", "submission_id"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    submission_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    spread_sheet_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    sheet_id: Mapped[int] = mapped_column(BigInteger)
    #: The run that wrote it: its task token and run epoch.
    token: Mapped[str] = mapped_column(Text)
    epoch: Mapped[int] = mapped_column(Integer)
    answer_ids: Mapped[list[str]] = mapped_column(JsonTextType)
    #: The sheet's last known row before the append (None: unknown).
    after_row: Mapped[int | None] = mapped_column(BigInteger)
    #: The gid of the tab the append went to (None: the link's own tab, ``sheet_id``).
    tab_sheet_id: Mapped[int | None] = mapped_column(BigInteger)
    #: Redis time (ms) after which this append can no longer land; 0 once Google
    #: answered it (nothing in flight, though it may have applied).
    deadline_ms: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SheetColumn(Base):
    """One column of a link's sheet, for good: where a question's answers go.

    Made from the form on the first write; a new question gets the next free column, a
    deleted one keeps its column, reordering moves nothing (docs/ARCHITECTURE.md,
    "Columns"). The three fixed columns are rows too, with ids starting with ``#``
    (never a question id). ``position`` is None until row 1 holds the column's title;
    ``written_title`` is the title we last wrote there, which the header check looks for.
    """

    __tablename__ = "sheet_column"
    __table_args__ = (
        UniqueConstraint("link_id", "question_id"),
        UniqueConstraint("link_id", "position"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    link_id: Mapped[int] = mapped_column(
        BigIntId, ForeignKey("spread_sheet.id", ondelete="CASCADE")
    )
    question_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    #: The question's type as stored (a type this version does not know is text).
    type: Mapped[str] = mapped_column(String(ENUM_LENGTH))
    #: The question's title as last seen in the form.
    title: Mapped[str] = mapped_column(Text)
    #: 0-based column index (0 is A); None until the title is in row 1.
    position: Mapped[int | None] = mapped_column(Integer)
    written_title: Mapped[str | None] = mapped_column(Text)
    #: Whether the column's number format (dates) was set.
    formatted: Mapped[bool] = mapped_column(Boolean, default=False)
