"""Load a batch of answers by id: the flush's hot path (up to 5000 ids per batch).

One SELECT, no ORM entities: building 5000 tracked objects costs more than the query.
The id list travels as a single parameter (a binary array on PostgreSQL, a JSON text
on SQLite) rather than one placeholder per id, which keeps the statement constant and
far from SQLite's parameter limit.

On PostgreSQL and SQLite the statement goes to the driver as written, through
SQLAlchemy's connection (so its events and logging still see it) but without its
per-row type processing, and the two typed columns are read as text and converted
here, where it is cheaper:

- ``answer`` (``json``, stored as sent) is decoded by orjson, about three times as
  fast as :func:`json.loads` on these small documents. orjson refuses a few things
  :func:`json.loads` reads (``NaN``, lone surrogates): those documents fall back to
  :func:`json.loads`, so the result is the same. One difference remains, by design: an
  integer beyond 64 bits (20 digits and more) comes back as a float. Answer values are
  strings by contract (:class:`~sheetsync.models.SubmissionAnswer`); only a stray,
  out-of-contract number that long would show rounded in the sheet.
- ``submitted_at`` comes as ISO 8601 text, which :meth:`datetime.fromisoformat` parses
  about three times faster than psycopg's loader (and SQLAlchemy's conversion to UTC
  after it). On PostgreSQL, text it does not take (another ``DateStyle``, years beyond
  9999, ``infinity``) goes to psycopg's loader; on SQLite, text other than
  SQLAlchemy's own naive format is read the way SQLAlchemy reads it.

One row's data never fails the batch. A document that is not JSON (SQLite stores text
and checks nothing) or a ``submitted_at`` that cannot be read (``infinity``, a year
Python cannot hold, text that is not a time) comes back as a :class:`MalformedAnswer`
in place of the items, which :class:`~sheetsync.flush.rows.RowBuilder` turns into that
answer's :class:`~sheetsync.errors.AnswerError`. SQL ``NULL`` reads as JSON ``null``, and
a bare number SQLite keeps as a number (its JSON column has numeric affinity) as that
number: documents that are not lists, which the row builder refuses in turn.

Decoding allocates tens of thousands of small containers per batch, none of them
cyclic. Left alone, the cyclic garbage collector runs over a hundred times meanwhile,
and may start a full collection over the whole heap (large in a worker).
:func:`gc_paused` holds it off for the batch.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import repeat
from operator import attrgetter, itemgetter, methodcaller
from typing import Any, NamedTuple

import orjson
from sqlalchemy import Connection, Text, cast, select
from sqlalchemy.orm import Session

from sheetsync.models import SubmissionAnswer

_answers = SubmissionAnswer.__table__.c
_fromisoformat = datetime.fromisoformat
_tzinfo_of = attrgetter("tzinfo")
_first = itemgetter(0)
_to_utc = methodcaller("astimezone", UTC)
_orjson_loads = orjson.loads

# ``%(ids)b`` sends the id list as a binary text[]: about four times cheaper to dump
# and for the server to parse than the text form. ``::text`` on ``json`` is a copy.
_POSTGRES_SQL = (
    "SELECT id, submission_id, user_name, submitted_at::text, answer::text "
    "FROM submission_answer WHERE id = ANY(%(ids)b)"
)
_SQLITE_SQL = (
    "SELECT id, submission_id, user_name, submitted_at, answer "
    "FROM submission_answer WHERE id IN (SELECT value FROM json_each(?))"
)


@dataclass(frozen=True, slots=True)
class MalformedAnswer:
    """Stands for the items of an answer whose row could not be read: ``column`` (``answer``
    or ``submitted_at``) failed with an exception of class ``error_class``."""

    column: str
    error_class: str


class AnswerRecord(NamedTuple):
    """One answer as the flush needs it.

    ``answer`` is the decoded document: by contract a list of ``{"questionId", "value"}``
    items (PII encrypted), but whatever JSON the row holds, or a :class:`MalformedAnswer`
    (then ``submitted_at`` may be a placeholder).
    """

    id: str
    submission_id: str
    user_name: str | None
    submitted_at: datetime
    answer: Any


#: Builds an AnswerRecord from one tuple, skipping NamedTuple's Python-level __new__.
_new_record: Callable[[type[AnswerRecord], tuple[Any, ...]], AnswerRecord] = tuple.__new__
#: ``submitted_at`` of a record whose time could not be read (its answer is malformed).
_NO_TIME = datetime(1970, 1, 1, tzinfo=UTC)
#: Times by position in a batch, and the positions whose time could not be read.
_Times = tuple[list[datetime], dict[int, MalformedAnswer]]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector for a burst of acyclic allocations.

    Wrap building a batch's rows in it too. Reference counting still frees everything
    as usual. If the collector was already off, it stays off; otherwise it is back on
    when the block ends, even on error.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def decode_json(text: str | bytes) -> Any:
    """:func:`json.loads`, by orjson whenever orjson reads the document."""
    try:
        return _orjson_loads(text)
    except orjson.JSONDecodeError:  # NaN, a lone surrogate, ...: let json decide
        return json.loads(text)


def _decode_answer(text: Any) -> Any:
    """:func:`decode_json` for one row's ``answer``, a :class:`MalformedAnswer` if it fails."""
    try:
        return _orjson_loads(text)
    except orjson.JSONDecodeError:
        pass
    if text is None or type(text) is int or type(text) is float:
        return text
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return MalformedAnswer("answer", type(exc).__name__)


def fetch_answers(session: Session, answer_ids: Sequence[str]) -> dict[str, AnswerRecord]:
    """The answers among ``answer_ids`` that exist, by id, in one SELECT.

    Missing ids are simply absent from the result; duplicates are read once. The dict
    follows ``answer_ids`` (first occurrences), and so does the memory its records
    sit in: decoded in the order the caller walks them next rather than the database's,
    they are read back with far fewer cache misses (building 5000 rows from them took
    about a third less time, before decryption).

    A row whose ``answer`` or ``submitted_at`` cannot be read has a
    :class:`MalformedAnswer` as its ``answer``. On PostgreSQL, timestamps in a
    ``DateStyle`` other than ISO still fail the whole call (``NotImplementedError``, from
    psycopg): the session's configuration, not one row, is at fault.
    """
    unique_ids = list(dict.fromkeys(answer_ids))
    if not unique_ids:
        return {}
    connection = session.connection()
    dialect = connection.dialect.name
    with gc_paused():
        if dialect == "postgresql":
            result = connection.exec_driver_sql(_POSTGRES_SQL, {"ids": unique_ids})
            return _records(result.all(), _postgres_times(connection), unique_ids)
        if dialect == "sqlite":
            result = connection.exec_driver_sql(_SQLITE_SQL, (_json_text(unique_ids),))
            return _records(result.all(), _sqlite_times, unique_ids)
        return _generic(connection, unique_ids)


def _records(
    rows: Sequence[Any],
    parse_times: Callable[[tuple[Any, ...]], _Times],
    order: Sequence[str],
) -> dict[str, AnswerRecord]:
    """Records from ``(id, submission id, user name, time text, answer JSON)`` rows,
    in the order of the ids in ``order`` (which must hold every row's id).

    Column by column, with map and zip rather than a Python loop over the rows.
    """
    if not rows:
        return {}
    by_id = dict(zip(map(_first, rows), rows, strict=True))
    rows = list(filter(None, map(by_id.get, order)))
    ids, submission_ids, user_names, time_texts, answer_texts = zip(*rows, strict=True)
    try:
        items = list(map(_orjson_loads, answer_texts))
    except orjson.JSONDecodeError:  # some document needs json.loads, or is not JSON
        items = list(map(_decode_answer, answer_texts))
    times, bad_times = parse_times(time_texts)
    for position, malformed in bad_times.items():
        items[position] = malformed
    fields = zip(ids, submission_ids, user_names, times, items, strict=True)
    return dict(zip(ids, map(_new_record, repeat(AnswerRecord), fields), strict=True))


def _postgres_times(connection: Connection) -> Callable[[tuple[str, ...]], _Times]:
    """Parses ``timestamptz`` text as this connection's server prints it, to UTC."""

    def parse_all(texts: tuple[str, ...]) -> _Times:
        try:
            values = list(map(_fromisoformat, texts))
            zones = set(map(_tzinfo_of, values))
            if zones == {UTC}:  # the server's TimeZone is UTC
                return values, {}
            if None not in zones:
                return list(map(_to_utc, values)), {}
        except (ValueError, TypeError, OverflowError):
            pass
        from psycopg import DataError

        loader: Callable[[str], datetime] | None = None
        values = []
        failed: dict[int, MalformedAnswer] = {}
        for position, text in enumerate(texts):
            try:
                try:
                    value: datetime | None = _fromisoformat(text)
                except ValueError:
                    value = None
                if value is None or value.tzinfo is None:  # not ISO text: psycopg decides
                    loader = loader or _driver_time_loader(connection)
                    value = loader(text)
                values.append(value.astimezone(UTC))
            # infinity, a year past 9999 or BC: this row's. Another DateStyle (psycopg's
            # NotImplementedError) is the session's, and fails them all.
            except (DataError, ValueError, TypeError, OverflowError) as exc:
                values.append(_NO_TIME)
                failed[position] = MalformedAnswer("submitted_at", type(exc).__name__)
        return values, failed

    return parse_all


def _driver_time_loader(connection: Connection) -> Callable[[str], datetime]:
    """psycopg's own text loader for ``timestamptz`` (and its errors)."""
    from psycopg import postgres, pq

    driver = connection.connection.driver_connection
    oid = postgres.types["timestamptz"].oid
    loader = driver.adapters.get_loader(oid, pq.Format.TEXT)(oid, driver)  # type: ignore[union-attr]

    def load(text: str) -> datetime:
        value: datetime = loader.load(text.encode())
        return value

    return load


def _sqlite_times(texts: tuple[str, ...]) -> _Times:
    """SQLite stores naive UTC text (``2024-05-01 00:00:07.000000``): make it aware."""
    try:
        values = list(map(_fromisoformat, map(str.__add__, texts, repeat("+00:00"))))
    except (ValueError, TypeError):
        pass
    else:
        if set(map(_tzinfo_of, values)) == {UTC}:
            return values, {}
    values = []
    failed: dict[int, MalformedAnswer] = {}
    for position, text in enumerate(texts):
        try:
            values.append(_sqlite_time(text))
        except (ValueError, TypeError, OverflowError) as exc:  # SQLite stores anything
            values.append(_NO_TIME)
            failed[position] = MalformedAnswer("submitted_at", type(exc).__name__)
    return values, failed


def _sqlite_time(text: str) -> datetime:
    try:
        value = _fromisoformat(text + "+00:00")
        if value.tzinfo is UTC:
            return value
    except (ValueError, TypeError):
        pass
    # What SQLAlchemy does with anything else: ISO text, naive meaning UTC.
    value = _fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _json_text(values: list[str]) -> str:
    try:
        return orjson.dumps(values).decode()
    except orjson.JSONEncodeError:  # a lone surrogate in an id
        return json.dumps(values)


def _generic(connection: Connection, unique_ids: list[str]) -> dict[str, AnswerRecord]:
    """Any other database: plain SQLAlchemy, the answer read as JSON text."""
    statement = select(
        _answers.id,
        _answers.submission_id,
        _answers.user_name,
        _answers.submitted_at,
        cast(_answers.answer, Text),
    ).where(_answers.id.in_(unique_ids))
    records = {
        row[0]: AnswerRecord(row[0], row[1], row[2], row[3], _decode_answer(row[4]))
        for row in connection.execute(statement)
    }
    return {i: records[i] for i in unique_ids if i in records}
