"""The Redis broker transport, with one fix: a worker survives the broker restarting.

Seen with celery 5.7.0, kombu 5.7.0 and redis 8.1.0: when the Redis connection drops
while the worker holds unacknowledged messages (every countdown task it waits to run),
Celery's consumer closes the old connection (``on_connection_error_after_connected``).
kombu's virtual ``Channel.close`` then restores the unacknowledged messages
(``QoS.restore_unacked_once``), which needs a client; by then the channel's transport
has already been released (``transport.client`` is None), so ``Channel._connparams``
raises ``AttributeError: 'NoneType' object has no attribute 'hostname'``. That is not a
connection error, so nothing ignores it, and the worker exits with "Unrecoverable
error". The same restore-on-close without a connection is kombu issue #970
(github.com/celery/kombu/issues/970, "Error on Restarting Celery").

Here the channel raises a connection error instead, which kombu's close path ignores:
the messages stay in Redis's ``unacked`` hash, and a worker restores them once their
visibility timeout passes; meanwhile the sweeper re-sends any buffer whose task is
overdue, so nothing waits for that timeout. (A Redis that lost its data lost them
anyway: the reconciler and the sweeper repair that.)
"""

from __future__ import annotations

from typing import Any

import redis
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> Any:
        if self.connection.client is None:
            raise redis.exceptions.ConnectionError("the broker connection is already closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel


class SentinelChannel(kombu_redis.SentinelChannel):
    """The same fix for a broker behind Redis Sentinel (``redis+sentinel://``)."""

    def _connparams(self, asynchronous: bool = False) -> Any:
        if self.connection.client is None:
            raise redis.exceptions.ConnectionError("the broker connection is already closed")
        return super()._connparams(asynchronous=asynchronous)


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel
