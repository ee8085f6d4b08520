"""Standing in for a process that dies between two steps: the step raises once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


class Crash(Exception):
    """Stands for the process dying at this point."""


def crash_once(
    monkeypatch: pytest.MonkeyPatch,
    owner: Any,
    name: str,
    *,
    when: Callable[..., Any] = lambda *a, **k: True,
) -> list[bool]:
    """Make ``owner.name`` raise :class:`Crash` the first time ``when`` holds for its
    arguments; returns a list that holds ``True`` once it has."""
    original = getattr(owner, name)
    fired: list[bool] = []

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not fired and when(*args, **kwargs):
            fired.append(True)
            raise Crash(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return fired
