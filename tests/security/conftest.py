"""Fixtures for the security tests: the console script's (see ``support.cli_fixtures``)."""

from support.cli_fixtures import cli, cli_env, database, pg_cli, redis_db

__all__ = ["cli", "cli_env", "database", "pg_cli", "redis_db"]
