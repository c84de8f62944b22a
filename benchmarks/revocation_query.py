"""The revocation-event query of a token validation, on the databases a sweep left behind.

    python benchmarks/revocation_query.py \\
        --db 28.0.0=.keystone-bench/runs/<run>/point-10000/keystone/keystone.db \\
        --db 29.0.0=.keystone-bench/runs/<run>/point-10000/keystone/keystone.db

Every validation asks SQLite for the revocation events that could apply to its
token (Keystone's ``keystone/revoke/backends/sql.py``, ``_list_token_events``:
events issued at or after the token, whose user, project, audit id and trust
are the token's or unset). This script asks each database the same question
for a token older than all its events, as a cloud's hour-old tokens are, with
the statement that query compiles to on SQLite, and prints:

- SQLite's query plan on each database (which index, if any, it walks);
- the query's time on each, in rounds that alternate the databases (A B,
  then B A), so that the machine's slower minutes and the first place in a
  round fall on both alike, as medians of milliseconds per query.

Each database is copied first (with its WAL), so Keystone's own files are
only read.

``--add COUNT:KIND`` (repeatable) first adds COUNT events of one kind to each
copy, newer than the token: ``audit`` (a revoked token, what the sweep's
context makes), ``user`` (a disabled user or changed password: user id only),
``project`` (project id only), ``grant`` (a removed role: user and project);
each of another user or project than the token's.

With ``--server URL`` (``mysql://root@127.0.0.1:3306`` or
``postgresql://postgres@127.0.0.1:5432``) the same rows and the same indexes
(each database's own, as its release's migrations made them) are loaded into
a database per release on that server, analysed, and asked there: the bug's
deployments ran MySQL, whose planner is not SQLite's. Run it with a Python
that has PyMySQL or psycopg2, e.g. the Keystone environment's that ``--db
mysql`` or ``--db postgresql`` installed it into. Those databases are
dropped at the end.

Nothing here starts Keystone: run a ``keystone-bench scale --dimension
revocation-events`` sweep per release first and point at its last point's
``keystone.db``.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

# What SQLAlchemy sends for _list_token_events of a project-scoped password
# token (no trust): the same text on 28.0.0 and 29.0.0.
QUERY = (
    "SELECT * FROM revocation_event WHERE revocation_event.issued_before >= ?"
    " AND (revocation_event.user_id IS NULL OR revocation_event.user_id = ?)"
    " AND (revocation_event.project_id IS NULL OR revocation_event.project_id = ?)"
    " AND (revocation_event.audit_id IS NULL OR revocation_event.audit_id = ?)"
    " AND revocation_event.trust_id IS NULL"
)


def _copy(path: Path, into: Path) -> Path:
    target = into / path.name
    shutil.copy2(path, target)
    for suffix in ("-wal", "-shm"):
        extra = path.with_name(path.name + suffix)
        if extra.exists():
            shutil.copy2(extra, into / extra.name)
    return target


KINDS = {
    "audit": ("audit_id",),
    "user": ("user_id",),
    "project": ("project_id",),
    "grant": ("user_id", "project_id"),
}


def _add(con: sqlite3.Connection, count: int, kind: str) -> None:
    """COUNT events of KIND, as new as the newest there, for other users and projects."""
    (newest,) = con.execute("SELECT max(issued_before) FROM revocation_event").fetchone()
    fields = KINDS[kind]
    cols = ", ".join((*fields, "issued_before", "revoked_at"))
    marks = ", ".join(["?"] * (len(fields) + 2))
    con.executemany(
        f"INSERT INTO revocation_event ({cols}) VALUES ({marks})",
        [
            (*(uuid.uuid4().hex[: 32 if f == "audit_id" else 64] for f in fields), newest, newest)
            for _ in range(count)
        ],
    )
    con.commit()


def _params(con: sqlite3.Connection, fresh: bool) -> tuple[str, str, str, str]:
    (oldest, newest) = con.execute(
        "SELECT min(issued_before), max(issued_before) FROM revocation_event"
    ).fetchone()
    if oldest is None:
        raise SystemExit("revocation_query: a database without revocation events")
    if fresh:
        issued = datetime.datetime.fromisoformat(newest) + datetime.timedelta(seconds=1)
    else:
        issued = datetime.datetime.fromisoformat(oldest) - datetime.timedelta(seconds=1)
    # A token of a user and project of its own: only the events with those
    # fields unset can apply to it, as for most of a cloud's tokens.
    return (
        issued.strftime("%Y-%m-%d %H:%M:%S.%f"),
        uuid.uuid4().hex,
        uuid.uuid4().hex,
        uuid.uuid4().hex[:22],
    )


MYSQL_TABLE = (
    "CREATE TABLE revocation_event (id INTEGER NOT NULL AUTO_INCREMENT,"
    " domain_id VARCHAR(64), project_id VARCHAR(64), user_id VARCHAR(64),"
    " role_id VARCHAR(64), trust_id VARCHAR(64), consumer_id VARCHAR(64),"
    " access_token_id VARCHAR(64), issued_before DATETIME NOT NULL, expires_at DATETIME,"
    " revoked_at DATETIME NOT NULL, audit_id VARCHAR(32), audit_chain_id VARCHAR(32),"
    " PRIMARY KEY (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
)


TABLE = {
    "mysql": MYSQL_TABLE,
    "postgresql": MYSQL_TABLE.replace("INTEGER NOT NULL AUTO_INCREMENT", "SERIAL")
    .replace("DATETIME", "TIMESTAMP")
    .replace(" ENGINE=InnoDB DEFAULT CHARSET=utf8mb4", ""),
}


class _Server:
    """One database on a MySQL/MariaDB or PostgreSQL server holding a copy of a SQLite
    database's events, with that database's indexes."""

    def __init__(self, url: str, source: sqlite3.Connection):
        import urllib.parse

        u = urllib.parse.urlparse(url)
        self.dialect = "postgresql" if u.scheme.startswith("postgres") else "mysql"
        self.name = "revocation_query_" + uuid.uuid4().hex[:8]
        password = urllib.parse.unquote(u.password or "")
        if self.dialect == "mysql":
            import pymysql  # the Keystone environment's: see the module's docstring

            def connect(dbname: str | None):
                return pymysql.connect(
                    host=u.hostname or "127.0.0.1", port=u.port or 3306,
                    user=u.username or "root", password=password, database=dbname,
                    autocommit=True,
                )  # fmt: skip

            self.server = connect(None)
        else:
            import psycopg2  # the Keystone environment's after --db postgresql

            def connect(dbname: str | None):
                con = psycopg2.connect(
                    host=u.hostname or "127.0.0.1", port=u.port or 5432,
                    user=u.username or "postgres", password=password,
                    dbname=dbname or u.path.lstrip("/") or "postgres",
                )  # fmt: skip
                con.autocommit = True
                return con

            self.server = connect(None)
        self.server.cursor().execute(f"CREATE DATABASE {self.name}")
        self._connect = connect
        self.db = connect(self.name)
        cur = self.db.cursor()
        cur.execute(TABLE[self.dialect])
        for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'revocation_event' AND type = 'index'"
            " AND sql IS NOT NULL"
        ):
            cur.execute(sql)
        rows = source.execute("SELECT * FROM revocation_event").fetchall()
        cur.executemany(
            "INSERT INTO revocation_event VALUES (" + ", ".join(["%s"] * 13) + ")", rows
        )
        cur.execute("ANALYZE TABLE revocation_event" if self.dialect == "mysql" else "ANALYZE")
        if self.dialect == "mysql":
            cur.fetchall()
        self.cur = cur

    def fresh(self) -> None:
        """A new connection for the next round: which server thread or process (and which
        core) serves a connection is chance, and one connection kept for every round made
        the database connected second about 0.04 ms a query slower, both databases alike."""
        self.db.close()
        self.db = self._connect(self.name)
        self.cur = self.db.cursor()

    def execute(self, query: str, params):
        self.cur.execute(query.replace("?", "%s"), params)
        return self.cur.fetchall()

    def plan(self, query: str, params) -> list[str]:
        self.cur.execute("EXPLAIN " + query.replace("?", "%s"), params)
        if self.dialect == "postgresql":
            return [row[0] for row in self.cur.fetchall()]
        names = [d[0] for d in self.cur.description]
        return [
            ", ".join(f"{k} {v}" for k, v in zip(names, row, strict=True)
                      if k in ("type", "key", "rows", "Extra"))
            for row in self.cur.fetchall()
        ]  # fmt: skip

    def close(self) -> None:
        try:
            self.db.close()
            self.server.cursor().execute(f"DROP DATABASE IF EXISTS {self.name}")
        finally:
            self.server.close()


class _SQLite:
    def __init__(self, con: sqlite3.Connection):
        self.con = con

    def fresh(self) -> None:
        pass  # in this process: no server side to vary

    def execute(self, query: str, params):
        return self.con.execute(query, params).fetchall()

    def plan(self, query: str, params) -> list[str]:
        return [row[-1] for row in self.con.execute("EXPLAIN QUERY PLAN " + query, params)]

    def close(self) -> None:
        self.con.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", action="append", required=True, metavar="LABEL=PATH")
    p.add_argument("--rounds", type=int, default=20, help="A B rounds")
    p.add_argument("--queries", type=int, default=20, help="queries per database per round")
    p.add_argument(
        "--token",
        choices=("old", "fresh"),
        default="old",
        help="old: issued before every event (default); fresh: after every event",
    )
    p.add_argument(
        "--add",
        action="append",
        default=[],
        metavar="COUNT:KIND",
        help=f"add events of a kind ({', '.join(KINDS)}) to each copy first",
    )
    p.add_argument(
        "--server",
        metavar="URL",
        help="ask a server instead of SQLite: mysql://root@127.0.0.1:3306 "
        "or postgresql://postgres@127.0.0.1:5432",
    )
    args = p.parse_args()
    dbs: list[tuple[str, Path]] = []
    for item in args.db:
        label, sep, path = item.partition("=")
        if not sep or not Path(path).is_file():
            p.error(f"--db {item}: need LABEL=PATH of an existing keystone.db")
        dbs.append((label, Path(path)))
    adds: list[tuple[int, str]] = []
    for item in args.add:
        count, _, kind = item.partition(":")
        if not count.isdigit() or kind not in KINDS:
            p.error(f"--add {item}: need COUNT:KIND, KIND one of {', '.join(KINDS)}")
        adds.append((int(count), kind))
    if args.rounds < 1 or args.queries < 1:
        p.error("--rounds and --queries: 1 or more")
    print(f"machine: {_machine.describe()}; SQLite {sqlite3.sqlite_version}")
    where = f"server {args.server.split('@')[-1]}" if args.server else "SQLite"
    print(f"asked of: {where}")
    with tempfile.TemporaryDirectory(prefix="revocation-query-") as tmp:
        cons = []
        try:
            for n, (label, path) in enumerate(dbs):
                into = Path(tmp) / str(n)
                into.mkdir()
                source = sqlite3.connect(_copy(path, into))
                for count, kind in adds:
                    _add(source, count, kind)
                params = _params(source, args.token == "fresh")
                (events,) = source.execute("SELECT count(*) FROM revocation_event").fetchone()
                if args.server:
                    con = _Server(args.server, source)
                    source.close()
                else:
                    con = _SQLite(source)
                cons.append((label, con, params, []))
                rows = len(con.execute(QUERY, params))
                print(f"{label}: {events} revocation events; {rows} apply to the token; plan:")
                for line in con.plan(QUERY, params):
                    print(f"    {line}")
            for r in range(args.rounds):
                # A B, then B A: neither database is always asked first.
                for _label, con, params, times in cons if r % 2 == 0 else cons[::-1]:
                    con.fresh()
                    t0 = time.perf_counter()
                    for _ in range(args.queries):
                        con.execute(QUERY, params)
                    times.append((time.perf_counter() - t0) * 1000.0 / args.queries)
        finally:
            for _label, con, _query_args, _times in cons:
                con.close()
        for label, _con, _query_args, times in cons:
            q1, _, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else (times * 3)
            print(
                f"{label}: {statistics.median(times):.3f} ms per query"
                f" (median of {len(times)} rounds of {args.queries}; quartiles {q1:.3f}-{q3:.3f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
