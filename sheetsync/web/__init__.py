"""``sheetsync web``: a server-rendered console for operators.

Starlette with Jinja2 templates, served by uvicorn, as ``examples/webapp`` is: small and
typed, and its plain (non-async) endpoints run in Starlette's thread pool, so the
console's blocking Redis and database reads (with short timeouts) never stall the
server, let alone the pipeline. Charts are inline SVG drawn on the server: no CDN,
nothing fetched from the internet; the one script (``static/console.js``) only refreshes
a page's data regions in place. Pages show ids, counts, titles and reasons, never an
answer's values, a credential or personal info (:mod:`sheetsync.web.labels`). See
:mod:`sheetsync.web.auth` for auth and CSRF.
"""

from __future__ import annotations

from sheetsync.web.app import create_app

__all__ = ["create_app"]
