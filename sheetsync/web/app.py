"""The console's application: its routes, and the sampler that runs while it is served.

Pages that read are in :mod:`sheetsync.web.pages`; the actions, each behind a
confirmation page, in :mod:`sheetsync.web.actions`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from sheetsync.settings import Settings
from sheetsync.web import actions, pages
from sheetsync.web.auth import Guard
from sheetsync.web.console import HERE, Console
from sheetsync.web.throttle import LoginThrottle

#: How often a page refreshes its figures by itself unless told otherwise.
DEFAULT_REFRESH_S = 5.0


def create_app(
    settings: Settings,
    *,
    sample_interval_s: float = 5.0,
    refresh_interval_s: float = DEFAULT_REFRESH_S,
    throttle: LoginThrottle | None = None,
) -> Starlette:
    """The console for ``settings``; the sampler runs while the app is served. Pages
    refresh every ``refresh_interval_s`` seconds (0: never). ``throttle`` is the tarpit
    that answers wrong tokens late (default: :class:`LoginThrottle`'s delays)."""
    console = Console(settings, sample_interval_s, refresh_interval_s)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        console.history.start()
        try:
            yield
        finally:
            console.history.stop()
            console.actions.close()
            console.read.close()

    token = settings.web_token.get_secret_value() if settings.web_token else None
    entry_action = "/dead-letters/{entry_id:int}/{action:str}"
    bulk_action = "/dead-letters/bulk/{action:str}"
    app = Starlette(
        routes=[
            Route("/", pages.overview),
            Route("/buffers", pages.buffers_page),
            Route("/links", pages.links_page),
            Route("/dead-letters", pages.dead_letters_page),
            Route("/dead-letters/{entry_id:int}", pages.dead_letter_page),
            Route(entry_action, actions.confirm_page, methods=["GET"]),
            Route(entry_action, actions.act, methods=["POST"]),
            Route(bulk_action, actions.bulk_confirm_page, methods=["GET"]),
            Route(bulk_action, actions.bulk_act, methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=[Middleware(Guard, token=token, throttle=throttle)],
        lifespan=lifespan,
    )
    app.state.console = console
    return app
