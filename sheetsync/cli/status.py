"""``sheetsync status``: live workers, buffers and their jobs, dead letters, and
rate-limit use; and the protections the settings turn off on purpose (downgrades).

The figures are gathered by :mod:`sheetsync.ops.status`; this module prints them.
A buffer that is overdue on a queue no live worker consumes is named, with the command
that would flush it: without it the buffer just looks late.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from sheetsync.cli.output import counted, heading, hint, out, print_json, table
from sheetsync.cli.runtime import open_services
from sheetsync.redis_keys import DEFAULT_GOOGLE_CLIENT
from sheetsync.text import duration, mask_url

#: Buffers listed unless told otherwise (the oldest first: they matter most).
DEFAULT_STATUS_LIMIT = 50
#: How to start the processes `status` finds missing.
START_WORKER = "celery -A sheetsync.celery worker"
START_BEAT = "celery -A sheetsync.celery beat"


def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    limit: Annotated[
        int,
        typer.Option(
            "--limit", metavar="N", min=1, help="List at most this many buffers (oldest first)."
        ),
    ] = DEFAULT_STATUS_LIMIT,
) -> None:
    """Live workers, buffers, dead letters and rate-limit use.

    Buffers are listed with depth, age and job; an overdue buffer on a queue that no
    live worker consumes names the queue.
    """
    from sheetsync import redis_urls
    from sheetsync.downgrades import downgrades
    from sheetsync.ops import status as status_data

    with open_services() as services:
        report: dict[str, Any] = {
            "redis_url": mask_url(services.settings.redis_url),
            "database_url": mask_url(services.settings.database_url),
            "workers": status_data.collect_workers(services),
            "buffers": status_data.collect_buffers(services, limit),
            "dead_letters": status_data.collect_dead_letters(services),
            "changes_pending": status_data.collect_changes(services),
            "limiter": status_data.collect_limiter(services),
            "redis_warning": redis_urls.eviction_warning(services.redis),
            "downgrades": downgrades(services.settings),
        }
    report["stalled_queues"] = status_data.flag_stalled(report["buffers"], report["workers"])
    if as_json:
        print_json(report)
        return
    render(report)


def render(report: dict[str, Any]) -> None:
    out.print(f"redis {report['redis_url']}   database {report['database_url']}", markup=False)
    for line in report["downgrades"]:  # turned off on purpose: part of the status
        out.print(f"warning: {line}", markup=False)
    if report.get("redis_warning"):
        hint(f"warning: {report['redis_warning']}")
    workers_alive = _render_workers(report["workers"])
    _render_buffers(report["buffers"])
    if workers_alive:  # with none alive, the workers section already said what to do
        _render_stalled(report["stalled_queues"])
    _render_dead_letters(report["dead_letters"])
    _render_changes(report["changes_pending"])
    _render_limiter(report["limiter"])


def _render_workers(workers: dict[str, Any]) -> bool:
    """The live processes; says what to start when no worker or no beat is alive.
    Returns whether any worker is alive."""
    live = workers["live"]
    heading(f"workers: {len(live)} alive" if live else "workers: none alive")
    if live:
        grid = table("name", "role", "queues", "heartbeat")
        for beat in live:
            grid.add_row(
                beat["name"],
                beat["role"],
                ", ".join(beat["queues"]) or "-",
                f"{duration(beat['heartbeat_age_s'])} ago",
            )
        out.print(grid)
    roles = {beat["role"] for beat in live}
    if "worker" not in roles:
        out.print(
            f"no worker is alive, so no buffer is flushed: start one with `{START_WORKER}`",
            markup=False,
        )
    if "beat" not in roles:
        out.print(
            "no beat is alive, so stuck jobs are not swept and due dead letters are not "
            f"replayed: start it with `{START_BEAT}`",
            markup=False,
        )
    return "worker" in roles


def _render_stalled(stalled: list[dict[str, Any]]) -> None:
    for item in stalled:
        waiting = counted(item["overdue_buffers"], "overdue buffer")
        verb = "waits" if item["overdue_buffers"] == 1 else "wait"
        out.print(
            f"{waiting} {verb} on queue {item['queue']}, which no live worker consumes: "
            f"start one with `{START_WORKER} -Q {item['queue']}`",
            markup=False,
        )


def _render_buffers(buffers: dict[str, Any]) -> None:
    heading(f"buffers: {buffers['total']}")
    if buffers["items"]:
        columns = ("owner", "form", "spreadsheet / gid", "depth", "oldest", "job", "seq")
        grid = table(*columns, "queue", "due / lease", "at the quota", right=("depth",))
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
                quota_place(item.get("quota")),
            )
        out.print(grid)
        if buffers["total"] > buffers["shown"]:
            hint(
                f"showing the {buffers['shown']} oldest of {buffers['total']} buffers; "
                "raise --limit to see more"
            )
    if buffers["malformed"]:
        skipped = counted(
            len(buffers["malformed"]),
            "malformed buffer index entry",
            "malformed buffer index entries",
        )
        hint(f"{skipped} skipped")


def quota_place(place: dict[str, Any] | None) -> str:
    """A buffer's place at Google's quota, in a few words ("-": not waiting)."""
    if not place:
        return "-"
    when = f"in {duration(place['expected_in_s'])}"
    kind = "read" if place["kind"] == "read" else "write"
    if place["state"] == "parked":
        return f"{kind}: its account's window is full, {when}"
    ahead = "next" if not place["ahead"] else f"{place['ahead']} ahead"
    return f"{kind}: {ahead}, {when}"


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
    if due >= 0:
        return f"due in {duration(due)}"
    stalled = job.get("overdue") and not job.get("queue_consumed")
    return f"overdue {duration(-due)}" + (" (no worker)" if stalled else "")


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


def _render_changes(changes: dict[str, int]) -> None:
    """Edits and deletions waiting for their sheets (an erasure's deletions among them)."""
    edits, deletions = changes.get("UPDATE", 0), changes.get("DELETE", 0)
    heading(
        f"changes pending: {counted(edits, 'edit')}, {counted(deletions, 'deletion')} "
        "(erasures among them)"
    )
    if deletions:
        hint("a deletion pending for long waits for its sheet: `sheetsync erase --check ID`")


def _render_limiter(limiter: dict[str, Any]) -> None:
    heading(f"rate limits: requests in the last {limiter['window_s']:g}s")
    grid = table("window", "used", "limit", right=("used", "limit"))
    project, reads = limiter["project"], limiter["project_reads"]
    grid.add_row("project writes", str(project["used"]), str(project["limit"]))
    grid.add_row("project reads", str(reads["used"]), str(reads["limit"]))
    for name, use in limiter["projects"].items():  # the other OAuth clients' projects
        if name != DEFAULT_GOOGLE_CLIENT:
            for kind in ("write", "read"):
                window = use[kind]
                grid.add_row(f"project {name} {kind}s", str(window["used"]), str(window["limit"]))
    # Idle accounts stay out of the table (a busy service has thousands); --json has all.
    busy = [item for item in limiter["accounts"] if item["used"] or item["reads"]]
    for item in sorted(busy, key=lambda item: (-item["used"], -item["reads"])):
        account = item["account"]
        if item.get("client", DEFAULT_GOOGLE_CLIENT) != DEFAULT_GOOGLE_CLIENT:
            account = f"{account} ({item['client']})"
        grid.add_row(f"account {account} writes", str(item["used"]), str(item["limit"]))
        grid.add_row(f"account {account} reads", str(item["reads"]), str(item["read_limit"]))
    out.print(grid)
    idle = len(limiter["accounts"]) - len(busy)
    if idle:
        hint(f"{counted(idle, 'account')} with no requests in the window not shown")
