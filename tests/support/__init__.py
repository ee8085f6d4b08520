"""Helpers shared by the tests: import them from here, never from a conftest.

- ``support.waiting``    wait_until
- ``support.paths``      the repository root
- ``support.world``      seeds owners, forms, sheets (in the emulator) and answers
- ``support.processes``  real ``celery -A sheetsync.celery worker`` processes
- ``support.alerts``     a Slack-compatible webhook that records what it receives
- ``support.redis_dbs``  the Redis databases tests use
- ``support.databases``  run a test on SQLite and PostgreSQL
- ``support.cli``        the real ``sheetsync`` console script
- ``support.google``     google-api-python-client against the emulator
"""
