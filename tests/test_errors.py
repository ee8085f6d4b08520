"""The error root holds errors only: the flush's come-back-later signals are apart, so a
broad ``except SheetSyncError`` never takes a full quota for a failure; both pickle with
their fields (Celery ships them between processes)."""

from __future__ import annotations

import pickle

import pytest

from sheetsync.errors import (
    ComeBackLater,
    ConfigError,
    HoldForBatch,
    RateLimited,
    SheetSyncError,
    TransientError,
    WaitForIntent,
)


@pytest.mark.parametrize("signal", [RateLimited, HoldForBatch, WaitForIntent])
def test_a_come_back_later_signal_is_not_an_error(signal: type[ComeBackLater]) -> None:
    raised = signal("no slot until later", retry_after_s=2.5)
    assert isinstance(raised, ComeBackLater)
    assert not isinstance(raised, SheetSyncError)
    with pytest.raises(ComeBackLater):
        try:
            raise raised
        except SheetSyncError:  # what a caller writes to handle sheetsync's failures
            pytest.fail("a come-back-later signal was caught as an error")
    copy = pickle.loads(pickle.dumps(raised))
    assert type(copy) is signal and copy.retry_after_s == 2.5 and str(copy) == str(raised)


@pytest.mark.parametrize("error", [ConfigError("x"), TransientError("y", status=503)])
def test_errors_stay_under_the_root_and_pickle(error: SheetSyncError) -> None:
    assert not isinstance(error, ComeBackLater)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and copy.fields == error.fields
