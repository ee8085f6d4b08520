"""Fixtures for the security tests: the console script's (see ``support.cli_fixtures``)
and the rendered compose files' (``support.compose``)."""

from support.cli_fixtures import cli, cli_env, database, pg_cli, redis_db, upgraded_sqlite
from support.compose import compose

__all__ = ["cli", "cli_env", "compose", "database", "pg_cli", "redis_db", "upgraded_sqlite"]
