"""`make bench`: every benchmark, one after another. Figures, not pass/fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failed = 0
    for script, args in (("bench_rows.py", ["--runs", "15"]), ("bench_pipeline.py", [])):
        print(f"\n== {script} ==", flush=True)
        failed |= subprocess.call([sys.executable, str(HERE / script), *args])
    return failed


if __name__ == "__main__":
    sys.exit(main())
