"""Answers go only where the form's owner sent them.

A link row names a form, a sheet and whose Google credential writes to it. A link that
another user made on someone's form must not send that form's answers (decrypted personal
info included) into their sheet; the web app may allow collaborators on purpose.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select
from support.waiting import wait_until

from sheetsync import emit_answer_submitted, links
from sheetsync.buffers.push import push
from sheetsync.dev.seed import link_sheet, seed_user
from sheetsync.models import SheetTransaction, SpreadSheet, TransactionType
from sheetsync.redis_keys import BufferKey


def allow_collaborators(_session, link, form) -> bool:
    """A policy a web app might register: its ``collab_`` users may link any form."""
    return link.create_user_id.startswith("collab_") or link.create_user_id == form.owner_id


@pytest.fixture(autouse=True)
def _default_policy() -> Iterator[None]:
    links.set_authorizer(None)
    yield
    links.set_authorizer(None)


def states_for(world, sheet) -> dict[str, tuple[TransactionType, str | None]]:
    with world.pipeline.sessions() as session:
        rows = session.scalars(
            select(SheetTransaction).where(SheetTransaction.spread_sheet_id == sheet.spreadsheet_id)
        )
        return {row.submission_answer_id: (row.type, row.error_message) for row in rows}


def others_link(world, form, user: str, title: str):
    """``user`` (with a Google account of their own) links ``form`` to their own sheet."""
    from support.world import Sheet

    world.admin.add_account(f"google-{user}", f"refresh-{user}")
    with world.pipeline.sessions.begin() as session:
        seed_user(
            session, user, refresh_token=f"refresh-{user}", google_account_id=f"google-{user}"
        )
    spreadsheet_id, gids = world.admin.create_spreadsheet(f"google-{user}", title, [title])
    with world.pipeline.sessions.begin() as session:
        link = link_sheet(session, form, spreadsheet_id, gids[title], create_user_id=user)
        return Sheet(spreadsheet_id, gids[title]), link.id


def test_a_link_by_another_user_sends_nothing_and_the_owners_link_keeps_landing(
    world, worker, alerts
):
    form = world.form("owner")
    owners = world.sheet(form, "Owner")
    intruders, link_id = others_link(world, form, "intruder", "Loot")
    ids = world.answers(form, 6)

    results = [emit_answer_submitted(answer_id) for answer_id in ids]
    wait_until(lambda: world.ids_in(owners) == ids and not world.leftover_keys(), timeout=30)

    assert world.rows(intruders) == []
    assert all(len(r.invalid) == 1 and f"link {link_id} refused" in r.invalid[0] for r in results)
    refused = states_for(world, intruders)
    assert {state for state, _ in refused.values()} == {TransactionType.VALIDATION_FAILED}
    assert set(refused) == set(ids)
    wait_until(lambda: any(f"link {link_id} refused" in text for text in alerts.texts))
    [alert] = [text for text in alerts.texts if f"link {link_id}" in text]  # once, not per answer
    assert "intruder" in alert and not any(answer_id in alert for answer_id in ids)


def test_a_refused_link_already_buffered_writes_nothing_and_fails_its_ids(world, worker):
    """Ids that reach a refused link's buffer anyway (pushed before the rule, or by a
    repair) end FAILED at the flush, and nothing reaches that sheet."""
    form = world.form("owner")
    intruders, _ = others_link(world, form, "intruder", "Loot")
    ids = world.answers(form, 4)
    key = BufferKey("intruder", form.submission_id, intruders.spreadsheet_id, intruders.gid)
    push(world.pipeline.store, [(key, "sheetsync_priority")], ids)

    wait_until(lambda: not world.leftover_keys(), timeout=30)

    assert world.rows(intruders) == []
    refused = states_for(world, intruders)
    assert {state for state, _ in refused.values()} == {TransactionType.FAILED}
    assert all(reason == links.LINK_REFUSED for _, reason in refused.values())


@pytest.mark.parametrize("how", ["registered", "setting"])
def test_the_web_app_can_allow_collaborators(world, worker, pipeline_env, how):
    if how == "registered":
        links.set_authorizer(allow_collaborators)
    else:
        pipeline_env(link_authorizer=f"{__name__}:allow_collaborators")
    form = world.form("owner")
    owners = world.sheet(form, "Owner")
    shared, _ = others_link(world, form, "collab_kim", "Shared")
    refused, _ = others_link(world, form, "intruder", "Loot")
    ids = world.answers(form, 3)

    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: world.ids_in(shared) == ids and world.ids_in(owners) == ids, timeout=30)

    assert world.rows(refused) == []


def test_links_are_unique_per_form_and_sheet_so_no_ledger_is_shared(world):
    from sqlalchemy.exc import IntegrityError

    form = world.form("owner")
    owners = world.sheet(form, "Owner")
    with pytest.raises(IntegrityError), world.pipeline.sessions.begin() as session:
        session.add(
            SpreadSheet(
                submission_id=form.submission_id,
                spread_sheet_id=owners.spreadsheet_id,
                sheet_id=owners.gid,
                create_user_id="intruder",
            )
        )
