"""`make bench`: every benchmark, one after another. Figures, not pass/fail: each is
printed beside its baseline, measured in the same run, and the issue's goal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

BENCHES: tuple[tuple[str, list[str]], ...] = (
    ("bench_rows.py", ["--runs", "15"]),
    ("bench_emit.py", []),
    ("bench_claim.py", []),
    ("bench_pipeline.py", []),
    ("bench_changes.py", []),
    ("bench_flow.py", []),
    ("bench_scale.py", []),
    ("bench_scale_down.py", []),
    ("bench_quota.py", []),
    ("bench_alternatives.py", []),
    ("bench_capacity.py", []),
)


def main() -> int:
    only = set(sys.argv[1:])
    failed = 0
    for script, args in BENCHES:
        if only and script.removesuffix(".py").removeprefix("bench_") not in only:
            continue
        print(f"\n== {script} ==", flush=True)
        failed |= subprocess.call([sys.executable, str(HERE / script), *args])
    return failed


if __name__ == "__main__":
    sys.exit(main())
