"""``python -m chaos --seed 1 --answers 5000 --sheets 6`` (with ``tests/`` on sys.path)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from chaos.config import DEFAULT_POSTGRES_URL, FAULT_KINDS, ChaosConfig
from chaos.report import format_report
from chaos.runner import Chaos


def parse(argv: list[str]) -> tuple[list[ChaosConfig], bool]:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--seed", type=int, nargs="+", default=[1], help="one run per seed")
    parser.add_argument("--answers", type=int, default=5000)
    parser.add_argument("--sheets", type=int, default=6)
    parser.add_argument("--faults-per-kind", type=int, default=20)
    parser.add_argument("--workers", type=int, default=3, help="the last one's clock is off")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--emit-s", type=float, help="how long answers arrive (default N/20)")
    parser.add_argument("--quiesce-timeout", type=float, default=300.0)
    parser.add_argument("--skew", type=int, help="the skewed worker's clock offset in seconds")
    parser.add_argument("--skip", nargs="*", default=[], choices=FAULT_KINDS, metavar="KIND")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES_URL, help="server to create on")
    parser.add_argument("--log-dir", type=Path, help="default: a new directory under /tmp")
    parser.add_argument("--clean-logs", action="store_true", help="remove logs of passing runs")
    args = parser.parse_args(argv)
    configs = [
        ChaosConfig(
            seed=seed,
            answers=args.answers,
            sheets=args.sheets,
            faults_per_kind=args.faults_per_kind,
            workers=args.workers,
            concurrency=args.concurrency,
            emit_s=args.emit_s,
            quiesce_timeout_s=args.quiesce_timeout,
            clock_skew_s=args.skew,
            kinds=tuple(kind for kind in FAULT_KINDS if kind not in args.skip),
            postgres_url=args.postgres,
            log_dir=args.log_dir / f"seed-{seed}" if args.log_dir else None,
        )
        for seed in args.seed
    ]
    return configs, args.clean_logs


def main(argv: list[str]) -> int:
    configs, clean_logs = parse(argv)
    failed = []
    for config in configs:
        report = Chaos(config, out=lambda line: print(line, flush=True)).run()
        print(format_report(report), flush=True)
        if not report.ok:
            failed.append(config.seed)
        elif clean_logs:
            shutil.rmtree(report.log_dir, ignore_errors=True)
    if len(configs) > 1:
        print(
            f"== {len(configs) - len(failed)} of {len(configs)} seeds passed"
            + (f"; failed: {failed}" if failed else "")
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
