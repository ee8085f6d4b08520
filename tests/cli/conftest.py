"""Fixtures for driving the real ``sheetsync`` console script (see
``support.cli_fixtures``): ``cli``, ``pg_cli``, ``cli_env``, ``database``, ``redis_db``."""

from support.cli_fixtures import cli, cli_env, database, pg_cli, redis_db, upgraded_sqlite

__all__ = ["cli", "cli_env", "database", "pg_cli", "redis_db", "upgraded_sqlite"]
