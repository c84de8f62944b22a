"""A fresh Keystone database on a running PostgreSQL or MariaDB/MySQL server.

``--db postgresql`` or ``--db mysql`` names a server by URL (default: the
local one, ``postgresql://postgres@127.0.0.1:5432`` or
``mysql+pymysql://root@127.0.0.1:3306``). Each deployment gets a database of
its own, ``keystone_bench_<random>``, created before Keystone is initialised
and dropped when the deployment is torn down.

The work is done by the database driver inside Keystone's own environment
(psycopg2 or PyMySQL, installed there anyway for Keystone), so the benchmark's
own environment needs neither. The server URL travels in the environment of
that child process, never on its command line.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import socket
import subprocess
import urllib.parse
from pathlib import Path

from rally_keystone_bench.errors import BenchError

DEFAULT_URLS = {
    "postgresql": "postgresql://postgres@127.0.0.1:5432",
    "mysql": "mysql+pymysql://root@127.0.0.1:3306",
}
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}
SQLALCHEMY_SCHEMES = {"postgresql": "postgresql+psycopg2", "mysql": "mysql+pymysql"}
NAME_PREFIX = "keystone_bench_"
CONNECT_TIMEOUT = 5.0

# Runs in Keystone's environment: python - ACTION DB NAME, server URL in $RKB_DB_URL.
_DRIVER_SCRIPT = r"""
import os, sys, urllib.parse
action, kind, name = sys.argv[1:4]
u = urllib.parse.urlsplit(os.environ["RKB_DB_URL"])
user = urllib.parse.unquote(u.username or "")
password = urllib.parse.unquote(u.password or "")
if kind == "postgresql":
    import psycopg2
    conn = psycopg2.connect(host=u.hostname, port=u.port or 5432, user=user or None,
                            password=password or None, dbname="postgres", connect_timeout=5)
    conn.autocommit = True
    create = f'CREATE DATABASE "{name}"'
    drop = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
else:
    import pymysql
    conn = pymysql.connect(host=u.hostname, port=u.port or 3306, user=user or None,
                           password=password, connect_timeout=5, autocommit=True)
    create = f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"
    drop = f"DROP DATABASE IF EXISTS `{name}`"
cur = conn.cursor()
if action == "create":
    cur.execute(create)
elif action == "drop":
    cur.execute(drop)
elif action == "exists":
    if kind == "postgresql":
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
    else:
        cur.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (name,))
    print("yes" if cur.fetchone() else "no")
conn.close()
"""


@dataclasses.dataclass
class Database:
    """One database on a server: what Keystone connects to, and what to drop."""

    kind: str  # "postgresql" or "mysql"
    server_url: str
    name: str

    @property
    def keystone_url(self) -> str:
        """The SQLAlchemy URL Keystone's [database] connection takes."""
        u = urllib.parse.urlsplit(self.server_url)
        query = "charset=utf8mb4" if self.kind == "mysql" else ""
        return urllib.parse.urlunsplit(
            (SQLALCHEMY_SCHEMES[self.kind], u.netloc, "/" + self.name, query, "")
        )

    def as_state(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def server_url(kind: str, url: str | None) -> str:
    """The server URL for KIND: the given one, checked, or the local default."""
    url = url or DEFAULT_URLS[kind]
    u = urllib.parse.urlsplit(url)
    family = u.scheme.split("+", 1)[0]
    wanted = "postgresql" if kind == "postgresql" else "mysql"
    if family not in (wanted, "postgres" if kind == "postgresql" else "mariadb"):
        raise BenchError(f"--db-url {redact_url(url)} is not a {kind} URL (scheme {u.scheme!r})")
    if not u.hostname:
        raise BenchError(f"--db-url {redact_url(url)} names no host")
    if u.path not in ("", "/"):
        raise BenchError(
            f"--db-url {redact_url(url)} names a database; give the server only "
            "(a fresh database is created there)"
        )
    return url


def redact_url(url: str) -> str:
    """URL with its password replaced by ***."""
    u = urllib.parse.urlsplit(url)
    if u.password is None:
        return url
    netloc = u.netloc.replace(":" + u.password + "@", ":***@", 1)
    return urllib.parse.urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))


def check_reachable(kind: str, url: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """BenchError unless something accepts TCP connections at the URL's host and port."""
    u = urllib.parse.urlsplit(url)
    host, port = u.hostname or "", u.port or DEFAULT_PORTS[kind]
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise BenchError(
            f"the {kind} server at {redact_url(url)} is unreachable: {reason}"
        ) from None


def new_name() -> str:
    return NAME_PREFIX + secrets.token_hex(4)


def _driver(venv: Path, action: str, db: Database) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["RKB_DB_URL"] = db.server_url
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _DRIVER_SCRIPT, action, db.kind, db.name],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        reason = lines[-1] if lines else f"exit {proc.returncode}"
        raise BenchError(
            f"cannot {action} database {db.name} on {redact_url(db.server_url)}: {reason}"
        )
    return proc.stdout.strip()


def create(venv: Path, kind: str, url: str) -> Database:
    """Create a fresh, empty database on the server at URL; return it."""
    db = Database(kind, url, new_name())
    _driver(venv, "create", db)
    return db


def drop(venv: Path, db: Database) -> None:
    """Drop DB (and only DB); dropping one that is gone is not an error."""
    _driver(venv, "drop", db)


def exists(venv: Path, db: Database) -> bool:
    return _driver(venv, "exists", db) == "yes"
