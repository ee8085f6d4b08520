"""Row 1 of a link's sheet, kept in step with its column map (docs/ARCHITECTURE.md,
"Columns").

:func:`columns_for_batch` runs before every batch is built. In the steady state (the
map settled, and the sheet cache says row 1 was checked) it costs one SELECT and no
Sheets request. Otherwise, holding the link's row lock (so concurrent flushes of one
link change its map one at a time), it reads row 1 (with the tab's title and time zone,
in one request: :meth:`sheetsync.flush.sheet.ActiveTab.look_up`), matches the map
against it (:func:`sheetsync.flush.columns.plan_header`), writes the titles that are
missing and the number formats of new date columns in one ``batchUpdate``, and only then
records the map: a crash between the write and the record repeats an idempotent write,
and the next check adopts titles it finds already written. A row 1 that cannot be
matched pauses the link, with an alert, and nothing is written.

:func:`write_header` writes a link's whole header, with its formats, to a given tab (a
new tab after a roll-over), in one ``batchUpdate`` too.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sheetsync import notify
from sheetsync.alerts import send_alert_once
from sheetsync.flush import columns
from sheetsync.flush.columns import HeaderPlan, LinkPaused
from sheetsync.flush.layout import FormLayout
from sheetsync.flush.sheet import ActiveTab, SheetAccess
from sheetsync.models import SheetColumn

log = logging.getLogger(__name__)


def columns_for_batch(active: ActiveTab, form: FormLayout) -> FormLayout:
    """The layout the next batch's rows are built with: the link's map, with row 1 of
    the active tab checked (when the cached check is gone) and every column's title in it."""
    services, key = active.access.services, active.access.key
    with services.sessions.begin() as session:
        link = columns.link_of(session, key)
        link_id, escape_formulas, blank = link.id, link.escape_formulas, link.blank_on_delete
        row1_has_work = columns.sync_with_form(session, link_id, form, services.settings)
    if row1_has_work or not services.store.sheet_cache(key).header_ok:
        _check_header(active, link_id)
    with services.sessions() as session:
        return columns.layout_of(
            session, link_id, form, escape_formulas=escape_formulas, blank_on_delete=blank
        )


def _check_header(active: ActiveTab, link_id: int) -> None:
    services, key = active.access.services, active.access.key
    # The owner's token, before the lock: its refresh may wait on Google, and a refused
    # credential must be parked against the credential this run read, not after a
    # reconnect that waited for the lock (on SQLite, for the whole database).
    active.access.client.authorize()
    with services.sessions.begin() as session:
        columns.lock(session, link_id)
        found = columns.column_map(session, link_id)
        first_row, column_count = _first_row(active)
        plan = columns.plan_header(first_row, found)
        if plan.problem is None:
            formatted = _write(active, plan, found, first_row, column_count)
            columns.save(session, link_id, plan, formatted)
        else:
            columns.pause(session, link_id, plan.problem)
    services.store.forget_sheet(key, "row1", "row1_columns", "row1_ms")
    if plan.problem is not None:
        services.store.forget_sheet(key, "header_ok")
        message = (
            f"link {link_id} (form {key.submission_id} to spreadsheet {key.spread_sheet_id}, "
            f"gid {key.sheet_id}) is paused: {plan.problem}. Nothing is written to it; fix "
            f"row 1, then run `sheetsync links resume {link_id}`"
        )
        send_alert_once(services.redis, f"paused:{link_id}", message, settings=services.settings)
        notify.notify(
            services.redis,
            notify.LINK_PAUSED,
            key.user_id,
            form_id=key.submission_id,
            link_id=link_id,
            spreadsheet_id=key.spread_sheet_id,
            settings=services.settings,
        )
        raise LinkPaused(message)
    services.store.remember_sheet(key, header_ok=1)


def _first_row(active: ActiveTab) -> tuple[list[str], int]:
    """Row 1 and the tab's width: as read by this buffer's previous check if the rate
    limit cut that one short within a lease (so each try makes progress), else read now,
    with the tab's title and time zone (one request: a first write's only read)."""
    access = active.access
    store, key = access.services.store, access.key
    remembered = store.first_row(key, max_age_ms=int(access.services.settings.lease_s * 3000))
    if remembered is not None:
        return remembered
    facts = active.look_up()
    store.remember_first_row(key, facts.first_row, facts.column_count)
    return facts.first_row, facts.column_count


def _write(
    active: ActiveTab,
    plan: HeaderPlan,
    found: Sequence[SheetColumn],
    first_row: Sequence[str],
    column_count: int,
) -> set[str]:
    """Write the plan's titles and the missing number formats into the active tab, in
    one request; returns the ids of the columns whose format is now set."""
    access, key = active.access, active.access.key
    formats = {
        plan.positions[c.question_id]: fmt
        for c in found
        if not c.formatted and (fmt := columns.number_format(c.question_id, c.type))
    }
    if plan.writes or formats:
        access.send(
            "spreadsheets.batchUpdate",
            lambda client: client.write_header(
                key.spread_sheet_id, active.gid, plan.writes, formats, column_count=column_count
            ),
        )
    if plan.writes:
        written = list(first_row) + [""] * (max(plan.writes) + 1 - len(first_row))
        for index, text in plan.writes.items():
            written[index] = text
        access.services.store.remember_first_row(key, written, max(column_count, len(written)))
        log.info("flush of %s wrote %d header cells", key.base, len(plan.writes))
    return {
        c.question_id
        for c in found
        if not c.formatted and columns.number_format(c.question_id, c.type)
    }


def write_header(access: SheetAccess, link_id: int, gid: int, column_count: int) -> None:
    """Write link ``link_id``'s whole header, with its number formats, into row 1 of tab
    ``gid`` (``column_count`` wide): for a new tab that continues the link (a roll-over).
    One ``batchUpdate`` (through the run's one request path, after the map is read),
    none when the map has no column placed yet."""
    with access.services.sessions() as session:
        found = [c for c in columns.column_map(session, link_id) if c.position is not None]
        cells = {c.position: c.written_title or c.title for c in found if c.position is not None}
        formats = {
            c.position: fmt
            for c in found
            if c.position is not None and (fmt := columns.number_format(c.question_id, c.type))
        }
    if not cells:
        return  # nothing to write: no request, none counted
    spreadsheet_id = access.key.spread_sheet_id
    access.send(
        "spreadsheets.batchUpdate",
        lambda client: client.write_header(
            spreadsheet_id, gid, cells, formats, column_count=column_count
        ),
    )
