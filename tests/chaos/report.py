"""The printed result of a chaos run."""

from __future__ import annotations

from collections import Counter

from chaos.accounting import BAD_OUTCOMES, OUTCOMES, Finding
from chaos.config import FAULT_KINDS
from chaos.runner import ChaosReport

#: Findings shown per kind; the rest are counted.
SHOWN = 8


def format_report(report: ChaosReport) -> str:
    config, accounting = report.config, report.accounting
    lines = [
        f"== sheetsync chaos: seed {config.seed}, {config.answers} answers, {config.sheets} sheets,"
        f" {config.faults_per_kind} faults per kind, {config.workers} workers x"
        f" {config.concurrency} (w{config.workers - 1} clock {config.skew_s:+d} s), PostgreSQL",
        "   duration: "
        + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in report.phases.items())
        + ("" if report.quiet else "  (NOT quiet at the timeout)"),
        f"   end state: {report.quiet_state}",
        "",
        f"   {'outcome per (answer, sheet)':<30}{'count':>8}",
    ]
    for outcome in OUTCOMES:
        mark = "  <-- must be 0" if outcome in BAD_OUTCOMES and accounting.outcomes[outcome] else ""
        lines.append(f"   {outcome:<30}{accounting.outcomes[outcome]:>8}{mark}")
    lines.append(
        f"   {'total':<30}{accounting.targets:>8}  ({accounting.answers} answers stored, emitted)"
    )
    lines.append(
        f"   the app edited {report.edited} answers and deleted {report.deleted} "
        f"({report.erased} of them by an erasure)"
    )
    kinds = Counter(report.hostile.values())
    lines.append(
        f"   hostile answers among them: {kinds['oversized']} oversized (megabytes a row), "
        f"{kinds['surrogates']} with lone surrogates"
    )
    lines += ["", f"   {'fault':<20}{'injected':>9}{'skipped':>9}{'unfired':>9}"]
    for kind in FAULT_KINDS:
        if kind not in config.kinds:
            continue
        faults = report.faults
        lines.append(
            f"   {kind:<20}{faults.injected[kind]:>9}{faults.skipped[kind]:>9}"
            f"{report.unfired.get(kind, ''):>9}"
        )
    skew = ", ".join(f"{k} {v:+.1f}s" for k, v in report.clock_skew.items())
    lines.append(f"   {'clock_skew':<20}{'1 worker':>9}  measured: {skew or 'no log lines'}")
    lines += _process_lines(report) + _emulator_lines(report) + _pii_lines(report)
    lines += _finding_lines(report)
    lines.append(f"   logs: {report.log_dir}")
    lines.append("   RESULT: " + ("PASS" if report.ok else "FAIL"))
    return "\n".join(lines)


def _process_lines(report: ChaosReport) -> list[str]:
    faults = report.faults
    reasons = Counter(reason for _, reason in report.deaths)
    lines = [
        "",
        f"   revocations: {faults.injected['revoke_reconnect']}, of which a flush noticed "
        f"{faults.revoked_dead_lettered} before the reconnect",
        f"   duplicate links accepted: {report.links_accepted}, refused: {report.links_refused}; "
        f"rows deleted by a person: {sum(len(d.answer_ids) for d in faults.deletions)} "
        f"({_unsettled(report)} not yet COMPLETED in the ledger when deleted)",
        f"   processes that died on their own: {len(report.deaths)}; stuck and replaced: "
        f"{len(report.stuck)}",
    ]
    lines += [f"     {count} x {reason}" for reason, count in reasons.most_common()]
    if report.emit_failures:
        _, error = report.emit_failures[0]
        lines.append(f"   web app requests that failed: {len(report.emit_failures)} ({error})")
    return lines


def _unsettled(report: ChaosReport) -> int:
    return sum(state != "COMPLETED" for d in report.faults.deletions for state in d.states)


def _emulator_lines(report: ChaosReport) -> list[str]:
    stats = report.emulator
    if not stats:
        return []
    requests = stats["requests"]
    by_kind = requests.get("by_kind", {})
    limited = stats["rate_limited"]["total"]
    errors = stats.get("errors_by_status", {})
    return [
        "",
        f"   emulator: {requests['total']} requests ({by_kind.get('values.append', 0)} appends, "
        f"{by_kind.get('values.get', 0)} reads of values), {limited} 429s by quota; "
        f"errors by status {errors}; faults fired {stats.get('faults_fired', {})}",
    ]


def _pii_lines(report: ChaosReport) -> list[str]:
    pii = report.pii
    scanned = sum(pii.scanned.values())
    places = sorted({where.split(" (")[0].split(" ")[0] for where in pii.scanned})
    lines = [
        "",
        f"   PII: {pii.leaks} plaintext canaries found in {scanned / 1e6:.1f} MB scanned "
        f"({', '.join(places)})",
    ]
    for (where, what), values in sorted(pii.found.items()):
        example = sorted(values)[0]
        lines.append(f"     {what} in {where}: {len(values)} (e.g. {example})")
    return lines


def _finding_lines(report: ChaosReport) -> list[str]:
    accounting = report.accounting
    lines: list[str] = []
    if accounting.failed_reasons:
        lines += ["", "   FAILED by reason:"]
        lines += [f"     {n} x {reason}" for reason, n in accounting.failed_reasons.most_common()]
    if accounting.duplicate_causes:
        lines += ["", "   duplicates by suspected cause (one duplicate may have several):"]
        lines += [f"     {n} x {cause}" for cause, n in accounting.duplicate_causes.most_common()]
    for outcome in BAD_OUTCOMES:
        found = accounting.findings.get(outcome, [])
        if found:
            lines += ["", f"   {outcome}: {len(found)}"]
            lines += [
                f"     {f.answer_id} in {f.sheet[0]}:{f.sheet[1]}: {f.detail}"
                for f in found[:SHOWN]
            ]
    if accounting.ledger_mismatches:
        lines += ["", f"   ledger disagrees with the sheet: {len(accounting.ledger_mismatches)}"]
        lines += [_finding(f) for f in accounting.ledger_mismatches[:SHOWN]]
    if accounting.unexpected_rows:
        lines += ["", f"   rows that are no answer of the sheet: {len(accounting.unexpected_rows)}"]
        lines += [f"     {row}" for row in accounting.unexpected_rows[:SHOWN]]
    return lines


def _finding(finding: Finding) -> str:
    return f"     {finding.answer_id} in {finding.sheet[0]}:{finding.sheet[1]}: {finding.detail}"
