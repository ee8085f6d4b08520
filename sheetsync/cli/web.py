"""``sheetsync web``: serve the operators' console (see :mod:`sheetsync.web`)."""

from __future__ import annotations

from typing import Annotated

import typer

from sheetsync import extras
from sheetsync.cli.output import hint, usage_error

#: Where the console listens unless told otherwise: this machine only.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8088


def web(
    ctx: typer.Context,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="ADDRESS",
            help="Address to listen on; any but loopback needs SHEETSYNC_WEB_TOKEN.",
        ),
    ] = DEFAULT_HOST,
    port: Annotated[
        int, typer.Option("--port", metavar="PORT", min=0, max=65535, help="Port to listen on.")
    ] = DEFAULT_PORT,
    sample_interval: Annotated[
        float,
        typer.Option(
            "--sample-interval",
            metavar="SECONDS",
            min=0.1,
            help="How often the overview's charts sample buffers and rate limits.",
        ),
    ] = 5.0,
    refresh_interval: Annotated[
        float,
        typer.Option(
            "--refresh-interval",
            metavar="SECONDS",
            min=0,
            help="How often open pages update their figures (0: never; a page can pause it).",
        ),
    ] = 5.0,
) -> None:
    """Serve the web console: overview charts, buffers, links and dead letters.

    With SHEETSYNC_WEB_TOKEN set, every request must send it (as a bearer token or as
    the basic-auth password); without it the console serves loopback addresses only.
    """
    extras.require("web", "sheetsync web")
    from sheetsync.cli.runtime import load_settings
    from sheetsync.startup import check_process
    from sheetsync.web.auth import is_loopback

    settings = load_settings()
    if settings.web_token is None and not is_loopback(host):
        usage_error(
            ctx,
            f"--host {host} is reachable from other machines: set SHEETSYNC_WEB_TOKEN "
            "(or listen on 127.0.0.1)",
        )
    check_process("console")  # its database, with the schema at this version's revision
    import uvicorn

    from sheetsync.web import create_app

    app = create_app(
        settings, sample_interval_s=sample_interval, refresh_interval_s=refresh_interval
    )
    shown = f"[{host}]" if ":" in host else host
    auth = "token required" if settings.web_token is not None else "loopback only, no token"
    hint(f"sheetsync console on http://{shown}:{port}/ ({auth})")
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
