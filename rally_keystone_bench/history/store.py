"""The results store: a SQLite file (the default) or a PostgreSQL database.

``--history STORE`` names it: a path (SQLite, created on first use) or a
``postgresql://`` URL (a team's shared store; needs the ``postgresql`` extra,
psycopg). Each run is written in one transaction, so a reader sees a run
whole or not at all, a killed writer leaves the last committed state, and two
writers at once both land (SQLite: WAL and a busy timeout; PostgreSQL: its
own locking). The schema carries its version; opening an older store
migrates it forward in the same kind of transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench.errors import BenchError, mask_urls
from rally_keystone_bench.history.records import ActionRow, RunRecord

ENV_VAR = "KEYSTONE_BENCH_HISTORY"
PG_SCHEMES = ("postgresql://", "postgres://")
BUSY_TIMEOUT_S = 60.0
# Version N is reached by running MIGRATIONS[N - 1]; {ID} is the dialect's key column.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE runs (id {ID}, recorded_at TEXT NOT NULL, verb TEXT NOT NULL,"
        " keystone TEXT, keystone_commit TEXT, keystone_describe TEXT, keystone_repo TEXT,"
        " deployment TEXT, settings TEXT, machine TEXT, cpu_model TEXT, cores INTEGER,"
        " tool_version TEXT, source TEXT)",
        "CREATE TABLE results (run_id INTEGER NOT NULL REFERENCES runs(id),"
        " workload TEXT NOT NULL, action TEXT NOT NULL, p50 REAL, p95 REAL, p99 REAL,"
        " rate REAL, success_percent REAL, count INTEGER)",
    ),
    (
        "ALTER TABLE runs ADD COLUMN interference TEXT",
        "ALTER TABLE results ADD COLUMN cpu_per_request REAL",
        "ALTER TABLE results ADD COLUMN counters TEXT",
        "CREATE INDEX results_series ON results (workload, action)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
RUN_COLUMNS = (
    "recorded_at", "verb", "keystone", "keystone_commit", "keystone_describe", "keystone_repo",
    "deployment", "settings", "machine", "cpu_model", "cores", "tool_version", "source",
    "interference",
)  # fmt: skip
RESULT_COLUMNS = (
    "workload", "action", "p50", "p95", "p99", "rate", "success_percent", "count",
    "cpu_per_request", "counters",
)  # fmt: skip


def is_postgresql(url: str) -> bool:
    return url.startswith(PG_SCHEMES)


class Store:
    """One open store; ``with Store.open(url) as store:`` closes it."""

    def __init__(self, conn: Any, dialect: str, where: str) -> None:
        self.conn = conn
        self.dialect = dialect
        self.where = where

    @classmethod
    def open(cls, url: str, upgrade: bool = True, target: int = SCHEMA_VERSION) -> Store:
        """Connect to URL, create or migrate its schema (up to TARGET); BenchError when it fails."""
        if is_postgresql(url):
            store = cls(_connect_postgresql(url), "postgresql", _redacted(url))
        else:
            store = cls(_connect_sqlite(url), "sqlite", url)
        try:
            if upgrade:
                store.migrate(target)
            elif store.version() < 0:
                raise BenchError(f"{store.where} is not a keystone-bench history store")
        except BaseException:
            store.close()
            raise
        return store

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    def _sql(self, text: str) -> str:
        return text.replace("?", "%s") if self.dialect == "postgresql" else text

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        cur = self.conn.cursor()
        cur.execute(self._sql(text), tuple(params))
        return cur

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction: committed whole, or rolled back whole."""
        if self.dialect == "sqlite":
            self.conn.execute("BEGIN IMMEDIATE")  # take the write lock now, not mid-way
        try:
            yield
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    def version(self) -> int:
        """The schema version; 0 for an empty database, -1 for one holding other tables."""
        if self.dialect == "sqlite":
            tables = {r[0] for r in self.execute("SELECT name FROM sqlite_master")}
        else:
            cur = self.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
            tables = {r[0] for r in cur}
            self.conn.commit()
        if "schema_version" not in tables:
            # Another program's database (say Rally's own) is not ours to fill. In a
            # PostgreSQL database, only our own table name counts: a team's shared one
            # may hold others.
            foreign = {t for t in tables - {"runs", "results"} if not t.startswith("sqlite_")}
            foreign = foreign if self.dialect == "sqlite" else set()
            return -1 if "runs" in tables or foreign else 0
        row = self.execute("SELECT version FROM schema_version").fetchone()
        if self.dialect == "postgresql":
            self.conn.commit()
        return int(row[0]) if row else 0

    def migrate(self, target: int = SCHEMA_VERSION) -> None:
        """Bring the schema to version TARGET, one transaction (and a lock) for all steps."""
        key = "INTEGER PRIMARY KEY" if self.dialect == "sqlite" else "SERIAL PRIMARY KEY"
        if self.version() < 0:
            raise BenchError(f"{self.where} is not a keystone-bench history store")
        with self.transaction():
            if self.dialect == "postgresql":
                self.execute("SELECT pg_advisory_xact_lock(4242029)")
            self.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = self.execute("SELECT version FROM schema_version").fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise BenchError(
                    f"{self.where} has schema version {current}; this keystone-bench knows "
                    f"up to {SCHEMA_VERSION}: upgrade it"
                )
            for steps in MIGRATIONS[current:target]:
                for step in steps:
                    self.execute(step.replace("{ID}", key))
            if row is None:
                self.execute("INSERT INTO schema_version (version) VALUES (?)", (target,))
            elif target > current:
                self.execute("UPDATE schema_version SET version = ?", (target,))

    def record(self, run: RunRecord) -> int:
        """Write RUN and its rows in one transaction; its id."""
        values = run.columns()
        with self.transaction():
            cur = self.execute(
                f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES "
                f"({', '.join('?' * len(RUN_COLUMNS))}) RETURNING id",
                [values[c] for c in RUN_COLUMNS],
            )
            run_id = int(cur.fetchone()[0])
            for row in run.rows:
                cells = row.columns()
                self.execute(
                    f"INSERT INTO results (run_id, {', '.join(RESULT_COLUMNS)}) VALUES "
                    f"(?, {', '.join('?' * len(RESULT_COLUMNS))})",
                    [run_id, *(cells[c] for c in RESULT_COLUMNS)],
                )
        return run_id

    def runs(self, **where: str | None) -> list[dict[str, Any]]:
        """Every run (oldest first) with at least one row matching WHERE (workload, action,
        deployment, machine: substrings), each with its id and ``rows``."""
        clauses, params = _filters(where)
        cur = self.execute(
            f"SELECT runs.id, {', '.join('runs.' + c for c in RUN_COLUMNS)}, "
            f"{', '.join('results.' + c for c in RESULT_COLUMNS)} FROM runs "
            f"JOIN results ON results.run_id = runs.id {clauses} ORDER BY runs.id",
            params,
        )
        found: dict[int, dict[str, Any]] = {}
        for r in cur.fetchall():
            run = found.setdefault(
                r[0], {"id": r[0], **dict(zip(RUN_COLUMNS, r[1:], strict=False)), "rows": []}
            )
            row = dict(zip(RESULT_COLUMNS, r[1 + len(RUN_COLUMNS) :], strict=True))
            row["counters"] = json.loads(row["counters"]) if row["counters"] else None
            run["rows"].append(row)
        if self.dialect == "postgresql":
            self.conn.commit()
        for run in found.values():
            for key in ("settings", "interference"):
                run[key] = json.loads(run[key]) if run[key] else None
        return list(found.values())


def _filters(where: dict[str, str | None]) -> tuple[str, list[str]]:
    table = {"workload": "results", "action": "results", "deployment": "runs", "machine": "runs"}
    clauses, params = [], []
    for key, value in where.items():
        if value:
            clauses.append(f"{table[key]}.{key} LIKE ?")
            params.append(f"%{value}%")
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


def _wal(conn: sqlite3.Connection) -> None:
    """WAL mode. Two writers opening a new store at once: the switch answers "database is
    locked" at once, without the busy timeout's wait, so it is tried again meanwhile."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _connect_sqlite(path: str) -> sqlite3.Connection:
    target = Path(path)
    if target.is_dir():
        raise BenchError(f"--history {path}: is a directory, not a store file")
    if not target.parent.is_dir():
        raise BenchError(f"--history {path}: no directory {target.parent}")
    try:
        conn = sqlite3.connect(str(target), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        _wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.DatabaseError as exc:
        why = _unwritable(target, exc)
        if why:  # SQLite says only "unable to open database file" or "readonly database"
            raise BenchError(f"--history {path}: could not be written: {why}") from None
        raise BenchError(f"--history {path}: not a SQLite store ({exc})") from None
    return conn


def _unwritable(target: Path, exc: Exception) -> str | None:
    """Why SQLite could not write the store TARGET (EXC: what it said); None when EXC is
    about something else (a file that is no SQLite database)."""
    said = str(exc)
    if "readonly" not in said and "unable to open" not in said:
        return None
    try:
        if os.statvfs(target.parent).f_flag & os.ST_RDONLY:
            return f"it is on a read-only file system ({said})"
        if target.exists() and not target.stat().st_mode & 0o200:
            return f"the file is read-only (mode {target.stat().st_mode & 0o777:o})"
        if not target.parent.stat().st_mode & 0o200:
            return f"its directory {target.parent} is read-only (SQLite writes beside the file)"
    except OSError:
        pass
    return said


def _connect_postgresql(url: str) -> Any:
    try:
        import psycopg
    except ImportError:
        raise BenchError(
            "a postgresql:// history store needs psycopg: "
            "pip install 'rally-keystone-bench[postgresql]'"
        ) from None
    try:
        return psycopg.connect(url, connect_timeout=10)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BenchError(f"--history {_redacted(url)}: {reason}") from None


def _redacted(url: str) -> str:
    """URL without a password: ``postgresql://user:***@host/db``, ``?password=***``."""
    return _QUERY_PASSWORD_RE.sub(r"\1***", mask_urls(url))


_QUERY_PASSWORD_RE = re.compile(r"(?i)([?&]password=)[^&]*")


__all__ = ["ENV_VAR", "SCHEMA_VERSION", "ActionRow", "RunRecord", "Store", "is_postgresql"]
