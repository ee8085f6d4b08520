"""``sheetsync status``: buffers and their jobs, dead letters, and rate-limit use.

The figures are gathered by :mod:`sheetsync.cli.status_data`; this module prints them.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from sheetsync.cli.output import duration, heading, hint, mask_url, out, print_json, table
from sheetsync.cli.runtime import open_pipeline

#: Buffers listed unless told otherwise (the oldest first: they matter most).
DEFAULT_STATUS_LIMIT = 50


def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="List at most this many buffers (oldest first).")
    ] = DEFAULT_STATUS_LIMIT,
) -> None:
    """Buffers (depth, age, job), dead letters by status and reason, rate-limit use."""
    from sheetsync.cli import status_data

    with open_pipeline() as pipeline:
        report = {
            "redis_url": mask_url(pipeline.settings.redis_url),
            "database_url": mask_url(pipeline.settings.database_url),
            "buffers": status_data.collect_buffers(pipeline, limit),
            "dead_letters": status_data.collect_dead_letters(pipeline),
            "limiter": status_data.collect_limiter(pipeline),
        }
    if as_json:
        print_json(report)
        return
    render(report)


def render(report: dict[str, Any]) -> None:
    out.print(f"redis {report['redis_url']}   database {report['database_url']}", markup=False)
    _render_buffers(report["buffers"])
    _render_dead_letters(report["dead_letters"])
    _render_limiter(report["limiter"])


def _render_buffers(buffers: dict[str, Any]) -> None:
    heading(f"buffers: {buffers['total']}")
    if buffers["items"]:
        columns = ("owner", "form", "spreadsheet / gid", "depth", "oldest", "job", "seq")
        grid = table(*columns, "queue", "due / lease", right=("depth",))
        for item in buffers["items"]:
            job = item["job"] or {}
            grid.add_row(
                item["user_id"],
                item["submission_id"],
                f"{item['spread_sheet_id']} / {item['sheet_id']}",
                str(item["depth"]),
                duration(item["oldest_age_s"]),
                _job_state(job),
                str(job.get("seq") or "-"),
                str(job.get("queue") or "-"),
                _timing(job),
            )
        out.print(grid)
        if buffers["total"] > buffers["shown"]:
            hint(
                f"showing the {buffers['shown']} oldest of {buffers['total']} buffers; "
                "raise --limit to see more"
            )
    if buffers["malformed"]:
        hint(f"{len(buffers['malformed'])} malformed buffer index entries skipped")


def _job_state(job: dict[str, Any]) -> str:
    if not job:
        return "none"
    state = str(job.get("state") or "?")
    if job.get("promoted"):
        state += " (promoted)"
    if job.get("attempts"):
        state += f" retry {job['attempts']}"
    return state


def _timing(job: dict[str, Any]) -> str:
    if job.get("state") == "running" and job.get("lease_left_s") is not None:
        left = job["lease_left_s"]
        return f"lease {duration(left)}" if left >= 0 else f"lease expired {duration(-left)} ago"
    due = job.get("due_in_s")
    if due is None:
        return "-"
    return f"due in {duration(due)}" if due >= 0 else f"overdue {duration(-due)}"


def _render_dead_letters(dead: dict[str, Any]) -> None:
    heading(f"dead letters: {dead['total']} ({dead['pending_due_now']} pending and due now)")
    if not dead["counts"]:
        return
    reasons = sorted(dead["by_reason"])
    grid = table("status", *reasons, "total", right=(*reasons, "total"))
    cells = {(item["status"], item["reason"]): item["count"] for item in dead["counts"]}
    for state in sorted(dead["by_status"]):
        grid.add_row(
            state,
            *(str(cells.get((state, reason), 0)) for reason in reasons),
            str(dead["by_status"][state]),
        )
    out.print(grid)


def _render_limiter(limiter: dict[str, Any]) -> None:
    heading(f"rate limits: requests in the last {limiter['window_s']:g}s")
    grid = table("window", "used", "limit", right=("used", "limit"))
    project = limiter["project"]
    grid.add_row("project", str(project["used"]), str(project["limit"]))
    # Idle accounts stay out of the table (a busy service has thousands); --json has all.
    busy = [item for item in limiter["accounts"] if item["used"]]
    for item in sorted(busy, key=lambda item: -item["used"]):
        grid.add_row(f"account {item['account']}", str(item["used"]), str(item["limit"]))
    out.print(grid)
    idle = len(limiter["accounts"]) - len(busy)
    if idle:
        hint(f"{idle} accounts with no requests in the window not shown")
