"""The HTTP transport under google-api-python-client: httplib2's interface on urllib3.

Why not httplib2 itself: when a server closes the connection without answering,
httplib2 re-sends the request once, whatever the method (it takes the close for a
stale keep-alive connection, and this path ignores ``httplib2.RETRIES``). For
``values.append`` that is a second append of the same rows, invisible to the caller.
Here every request is sent exactly once (``retries=False``); a dropped response
surfaces as an error, and the flush's write-ahead intent decides what landed.
"""

from __future__ import annotations

import time
from typing import Any

import httplib2
import urllib3

from sheetsync.errors import TransientError

#: Connections kept per host.
DEFAULT_POOL_SIZE = 4


class SingleShotHttp:
    """The subset of :class:`httplib2.Http` that googleapiclient and google-auth use."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        #: A monotonic time no request may outlive (set around one call), or None.
        self.deadline: float | None = None
        self.follow_redirects = False
        self.redirect_codes: frozenset[int] = frozenset()
        self._pool = urllib3.PoolManager(
            num_pools=8,
            maxsize=DEFAULT_POOL_SIZE,
            retries=False,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
        )

    def request(
        self,
        uri: str,
        method: str = "GET",
        body: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        redirections: int = 0,
        connection_type: Any = None,
    ) -> tuple[httplib2.Response, bytes]:
        timeout = self.timeout
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
            if timeout <= 0:
                # Never sent: a request that could outlive the run's lease is not started.
                raise TransientError("no time left in the lease for this request", ambiguous=False)
        response = self._pool.request(
            method,
            uri,
            body=body,
            headers=headers,
            redirect=False,
            preload_content=True,
            decode_content=True,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
        )
        info: dict[str, str] = {key.lower(): value for key, value in response.headers.items()}
        info["status"] = str(response.status)
        # The body is already decoded; a stale content-encoding would make the client
        # try to decode it again.
        info.pop("content-encoding", None)
        return httplib2.Response(info), response.data

    def close(self) -> None:
        self._pool.clear()
