"""Every Sheets request of a flush run goes through one place,
:meth:`sheetsync.flush.sheet.SheetAccess.send`: it renews the lease first (which fences
a stale run and sets the request's deadline), and counts only requests really sent."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import sheetsync
from sheetsync.buffers.store import Lease
from sheetsync.errors import ContentRefusedError, StaleRunError
from sheetsync.flush.outcomes import Tally
from sheetsync.flush.rollover import Rollover
from sheetsync.flush.sheet import ActiveTab, SheetAccess, Tab
from sheetsync.models import SheetColumn
from sheetsync.redis_keys import BufferKey

PACKAGE = Path(sheetsync.__file__).parent
#: The one module allowed to renew the lease and count a request.
THE_PATH = PACKAGE / "flush" / "sheet.py"


def _offences(path: Path) -> list[str]:
    """``renew(...)`` calls and ``….requests.append(...)`` calls in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in ("renew", "_renew"):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(func)}(")
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "append"
            and isinstance(func.value, ast.Attribute)
            and func.value.attr == "requests"
        ):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(func)}(")
    return found


def test_only_the_one_request_path_renews_the_lease_or_counts_a_request():
    sources = sorted((PACKAGE / "flush").glob("*.py")) + sorted(
        (PACKAGE / "recovery").glob("**/*.py")
    )
    assert THE_PATH in sources and len(sources) > 10
    offences = [o for path in sources if path != THE_PATH for o in _offences(path)]
    assert offences == [], "send Sheets requests through SheetAccess.send"
    assert _offences(THE_PATH)  # the check does see what it looks for


def test_the_check_finds_a_hand_written_renewal_and_tally(tmp_path):
    stray = tmp_path / "stray.py"
    stray.write_text(
        '"""renew( in a docstring is no call."""\n'
        "lease = access.renew()\n"
        "self.services.store.renew(key, lease)\n"
        "run.tally.requests.append('values.get')\n"
        "names.append('renew')\n"
    )
    assert _offences(stray) == [
        "stray.py:2: access.renew(",
        "stray.py:3: self.services.store.renew(",
        "stray.py:4: run.tally.requests.append(",
    ]


# -- the path itself, with a fake store and client -------------------------------------

KEY = BufferKey("owner", "form", "spreadsheet", 0)
LINK_ID = 7


class Log(list[str]):
    """What happened, in order: renewals and Sheets requests."""


class FakeStore:
    def __init__(self, log: Log, *, fenced: bool = False) -> None:
        self.log = log
        self.fenced = fenced
        self.redis = SimpleNamespace(hget=lambda *a: None)

    def renew(self, key: BufferKey, lease: Lease) -> Lease | None:
        self.log.append("renew")
        if self.fenced:
            return None
        return Lease(lease.token, lease.epoch, lease.until_ms + 1000, lease.until_ms - 59_000)

    def remember_sheet(self, key: BufferKey, **fields: Any) -> None:
        pass

    def forget_sheet(self, key: BufferKey, *fields: str) -> None:
        pass


class FakeSession:
    def __init__(self, columns: list[SheetColumn]) -> None:
        self.columns = columns

    def __enter__(self) -> FakeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def scalars(self, statement: object) -> list[SheetColumn]:
        return self.columns

    def execute(self, statement: object) -> None:
        return None


class FakeSessions:
    def __init__(self, columns: list[SheetColumn]) -> None:
        self.columns = columns

    def __call__(self) -> FakeSession:
        return FakeSession(self.columns)

    def begin(self) -> FakeSession:
        return FakeSession(self.columns)


class FakeClient:
    """The Sheets calls a roll-over makes, logged; ``refuse`` refuses appends."""

    def __init__(self, log: Log, *, refuse: bool = False) -> None:
        self.log = log
        self.refuse = refuse
        self.deadline: float | None = None

    def sheet_grid(self, spreadsheet_id: str) -> dict[int, tuple[str, int]]:
        self.log.append("sheet_grid")
        return {0: ("Responses", 3)}

    def add_sheet_with_rows(self, spreadsheet_id: str, title: str, **kwargs: Any) -> int:
        self.log.append(f"add_sheet {title}")
        return 42

    def write_header(self, spreadsheet_id: str, gid: int, cells: Any, formats: Any, **kw: Any):
        self.log.append(f"write_header {gid}")

    def append_rows(self, spreadsheet_id: str, a1_range: str, rows: Any) -> None:
        self.log.append("append_rows")
        if self.refuse:
            raise ContentRefusedError("Google refused the values", status=400)


def _column(question_id: str, position: int | None) -> SheetColumn:
    return SheetColumn(
        link_id=LINK_ID,
        question_id=question_id,
        type="TEXT",
        title=question_id,
        written_title=question_id,
        position=position,
    )


def _access(log: Log, columns: list[SheetColumn], **client: Any) -> SheetAccess:
    services = SimpleNamespace(
        store=FakeStore(log),
        settings=SimpleNamespace(lease_s=60.0, tab_cell_limit=100),
        sessions=FakeSessions(columns),
    )
    lease = Lease("token", "1", until_ms=60_000, granted_ms=0)
    return SheetAccess(services, KEY, FakeClient(log, **client), Tally(), lease)  # type: ignore[arg-type]


def _rollover(access: SheetAccess) -> Rollover:
    rollover = Rollover(ActiveTab(access, Tab(LINK_ID, 1, 0, 300)))
    rollover.header = ["Answer ID", "Submitter", "Submitted at"]
    return rollover


def test_a_roll_overs_header_write_renews_the_lease_first():
    log = Log()
    access = _access(log, [_column("#answer_id", 0), _column("q1", 1)])
    _rollover(access).roll_over()
    assert log == [
        "renew",
        "sheet_grid",
        "renew",
        "add_sheet Responses (2)",
        "renew",  # the header write: the lease (and the request's deadline) renewed first
        "write_header 42",
    ]
    assert access.tally.requests == [
        "spreadsheets.get",
        "spreadsheets.batchUpdate (addSheet)",
        "spreadsheets.batchUpdate",
    ]
    assert access.client.deadline is not None


def test_a_header_write_not_sent_is_not_counted():
    log = Log()
    access = _access(log, [_column("q1", None)])  # nothing placed: nothing to write
    _rollover(access).roll_over()
    assert "write_header 42" not in log
    assert access.tally.requests == ["spreadsheets.get", "spreadsheets.batchUpdate (addSheet)"]


def test_a_fenced_run_sends_nothing_and_counts_nothing():
    log = Log()
    access = _access(log, [_column("#answer_id", 0)])
    access.services.store.fenced = True  # type: ignore[attr-defined]
    ran = []
    with pytest.raises(StaleRunError):
        access.send("values.get", lambda client: ran.append(True), before=ran.append)
    assert log == ["renew"] and ran == [] and access.tally.requests == []


def test_send_runs_its_step_with_the_fresh_lease_and_counts_a_refusal_as_refused():
    log = Log()
    access = _access(log, [], refuse=True)
    leases: list[Lease] = []
    with pytest.raises(ContentRefusedError):
        access.send(
            "values.append",
            lambda client: client.append_rows("s", "A:A", [["a"]]),
            before=lambda lease: (leases.append(lease), log.append("before")),
        )
    assert log == ["renew", "before", "append_rows"]
    assert leases == [access.lease] and access.lease.until_ms == 61_000
    assert access.tally.requests == ["values.append (refused)"]


def test_a_step_that_raises_sends_nothing():
    log = Log()
    access = _access(log, [])

    def no_time(lease: Lease) -> None:
        raise TimeoutError("no time left")

    with pytest.raises(TimeoutError):
        access.send(
            "values.append", lambda client: client.append_rows("s", "A:A", []), before=no_time
        )
    assert log == ["renew"] and access.tally.requests == []
