"""``sheetsync web``: serve the operators' console (see :mod:`sheetsync.web`)."""

from __future__ import annotations

from typing import Annotated

import typer

from sheetsync import extras
from sheetsync.cli.output import hint, usage_error

#: Where the console listens unless told otherwise: this machine only.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8088
#: sheetsync.web.throttle's defaults, restated: importing the console here would slow
#: every other command's start.
DEFAULT_LOGIN_FAILURES = 5
DEFAULT_LOGIN_LOCKOUT_S = 1.0


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
    ssl_certfile: Annotated[
        str | None,
        typer.Option(
            "--ssl-certfile",
            metavar="PEM",
            help="Serve HTTPS with this certificate (its chain may follow it in the file).",
        ),
    ] = None,
    ssl_keyfile: Annotated[
        str | None,
        typer.Option("--ssl-keyfile", metavar="PEM", help="The certificate's private key."),
    ] = None,
    login_failures: Annotated[
        int,
        typer.Option(
            "--login-failures",
            metavar="N",
            min=1,
            help="Wrong tokens from one address answered at once; later ones wait (a tarpit).",
        ),
    ] = DEFAULT_LOGIN_FAILURES,
    login_lockout: Annotated[
        float,
        typer.Option(
            "--login-lockout",
            metavar="SECONDS",
            min=0.001,
            help="The tarpit's first wait; each further wrong token doubles it (to 16x).",
        ),
    ] = DEFAULT_LOGIN_LOCKOUT_S,
) -> None:
    """Serve the web console: overview charts, buffers, links and dead letters.

    With SHEETSYNC_WEB_TOKEN set (at least 32 characters), every request must send it
    (as a bearer token or as the basic-auth password): the right one always gets in at
    once, and an address that keeps sending wrong ones waits longer for each answer (a
    tarpit, never a lockout); without it the console serves loopback addresses only.
    With --ssl-certfile and --ssl-keyfile it serves HTTPS only.
    """
    extras.require("web", "sheetsync web")
    from sheetsync.cli.runtime import load_settings
    from sheetsync.settings.checks import tls_files_problem
    from sheetsync.startup import check_process
    from sheetsync.web.auth import is_loopback

    settings = load_settings()
    if settings.web_token is None and not is_loopback(host):
        usage_error(
            ctx,
            f"--host {host} is reachable from other machines: set SHEETSYNC_WEB_TOKEN "
            "(or listen on 127.0.0.1)",
        )
    tls_problem = tls_files_problem(ssl_certfile, ssl_keyfile)
    if tls_problem:
        usage_error(ctx, f"--ssl-certfile/--ssl-keyfile: {tls_problem}")
    check_process("console")  # its database, with the schema at this version's revision
    import uvicorn

    from sheetsync.web import create_app
    from sheetsync.web.throttle import LoginThrottle

    app = create_app(
        settings,
        sample_interval_s=sample_interval,
        refresh_interval_s=refresh_interval,
        throttle=LoginThrottle(login_failures, login_lockout),
    )
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if ssl_certfile else "http"
    auth = "token required" if settings.web_token is not None else "loopback only, no token"
    hint(f"sheetsync console on {scheme}://{shown}:{port}/ ({auth})")
    # proxy_headers=False: uvicorn would otherwise take the client address from
    # X-Forwarded-For of any loopback client, and a guesser could pick a fresh address
    # for every failed login.
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
    )
