"""The chaos suite: the real stack (PostgreSQL, Redis, worker processes, beat, the Sheets
emulator) under seeded faults, then an account of every (answer, sheet) and a PII audit.

Run it with ``make chaos`` or ``PYTHONPATH=tests python -m chaos --seed 1``; pytest runs a
small seeded run (``tests/chaos/test_chaos.py``).
"""

from chaos.config import FAULT_KINDS, ChaosConfig
from chaos.runner import Chaos, ChaosReport

__all__ = ["FAULT_KINDS", "Chaos", "ChaosConfig", "ChaosReport"]
