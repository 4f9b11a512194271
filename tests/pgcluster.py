"""The tests' throwaway PostgreSQL cluster (:mod:`standins.postgres`, where scripts can import it
too), and :func:`query_rows` to read a bot's database from outside it."""

from __future__ import annotations

from pathlib import Path

from standins.postgres import SERVER_USER, ThrowawayCluster, find_bindir

__all__ = ["SERVER_USER", "ThrowawayCluster", "find_bindir", "query_rows"]


def query_rows(target: Path | str, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of ``sql`` (``?`` placeholders) read from another connection, outside the bot:
    ``target`` an SQLite file or a PostgreSQL URL (as ``db_target`` gives them)."""
    if isinstance(target, Path):
        import sqlite3

        with sqlite3.connect(target) as conn:
            return conn.execute(sql, params).fetchall()
    import psycopg

    from storage.backend import to_pyformat

    with psycopg.connect(target) as conn:
        return conn.execute(to_pyformat(sql) if params else sql, params or None).fetchall()
