"""Where things are."""

from __future__ import annotations

from pathlib import Path

#: The repository's root directory.
ROOT = Path(__file__).resolve().parents[2]
