"""Seeds owners, forms, linked sheets (in the emulator) and answers for pipeline tests."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select

from sheets_emulator import EmulatorAdmin
from sheetsync.deadletters import replay_end, store
from sheetsync.dev.seed import SeededForm, link_sheet, seed_answers, seed_form
from sheetsync.models import DeadLetter, Plan, SheetTransaction, TransactionType
from sheetsync.redis_keys import BUFFER_INDEX, PREFIX
from sheetsync.services import Services

#: Emulator quotas for tests that are not about quotas: out of the way.
GENEROUS_QUOTA = 1_000_000


@dataclass(frozen=True)
class Sheet:
    spreadsheet_id: str
    gid: int


class World:
    def __init__(self, pipeline: Services, admin: EmulatorAdmin) -> None:
        self.pipeline = pipeline
        self.admin = admin
        self._counter = 0
        admin.set_quotas(
            read_per_account=GENEROUS_QUOTA,
            write_per_account=GENEROUS_QUOTA,
            read_per_project=GENEROUS_QUOTA,
            write_per_project=GENEROUS_QUOTA,
        )

    def form(
        self, owner: str = "owner1", *, plan: Plan = Plan.PRO, **options: object
    ) -> SeededForm:
        """A form owned by ``owner``, whose Google account exists in the emulator."""
        self.admin.add_account(f"google-{owner}", f"refresh-{owner}")
        with self.pipeline.sessions.begin() as session:
            return seed_form(session, owner_id=owner, plan=plan, **options)  # type: ignore[arg-type]

    def sheet(self, form: SeededForm, title: str = "Responses") -> Sheet:
        """A new spreadsheet (owned by the form's owner) linked to the form."""
        self._counter += 1
        spreadsheet_id, gids = self.admin.create_spreadsheet(
            f"google-{form.owner_id}", f"{title} {self._counter}", [title]
        )
        with self.pipeline.sessions.begin() as session:
            link_sheet(session, form, spreadsheet_id, gids[title])
        return Sheet(spreadsheet_id, gids[title])

    def answers(
        self, form: SeededForm, n: int, *, prefix: str = "ans", start: int = 1
    ) -> list[str]:
        with self.pipeline.sessions.begin() as session:
            return seed_answers(session, form, n, prefix=prefix, start=start)

    def rows(self, sheet: Sheet) -> list[list[str]]:
        return self.admin.sheet_values(sheet.spreadsheet_id, sheet.gid)

    def ids_in(self, sheet: Sheet) -> list[str]:
        """Answer ids in column A, below the header."""
        rows = self.rows(sheet)
        return [row[0] for row in rows[1:] if row]

    def ledger_counts(self) -> dict[str, int]:
        with self.pipeline.sessions() as session:
            rows = session.execute(
                select(SheetTransaction.type, func.count()).group_by(SheetTransaction.type)
            )
            return {TransactionType(t).value: n for t, n in rows}

    def dead_letters(self) -> list[DeadLetter]:
        with self.pipeline.sessions() as session:
            return list(session.scalars(select(DeadLetter).order_by(DeadLetter.id)))

    def complete_replays(self) -> bool:
        """What beat's next dead-letter pass does first: replays whose ids are all
        settled become DONE. Always True (for use in a wait_until condition)."""
        replay_end.complete_replays(self.pipeline.sessions)
        return True

    def ids_of(self, entry: DeadLetter) -> list[str]:
        """The answer ids a dead letter holds, sorted."""
        with self.pipeline.sessions() as session:
            return sorted(store.answer_ids(session, entry.id))

    def leftover_keys(self) -> list[str]:
        """Buffer, job and intent keys left in Redis (the sheet cache may stay)."""
        client = self.pipeline.redis
        keys = [k.decode() for k in client.scan_iter(f"{PREFIX}:{{*")]
        leftovers = [k for k in keys if not k.endswith(":sheet")]
        if client.zcard(BUFFER_INDEX):
            leftovers.append(BUFFER_INDEX)
        return sorted(leftovers)
