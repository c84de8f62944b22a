"""The mock Keystone's state: the SQLite store of admin resources, bootstrap, signed tokens.

Shared by every worker of ``keystone-bench mock`` (deploy/mock.py) through
RUN_DIR; the HTTP side is deploy/mock_http.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sqlite3
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

ADMIN_USER = "admin"
ADMIN_PROJECT = "admin"
DEFAULT_DOMAIN = "default"
REGION = "RegionOne"
TOKEN_TTL_S = 3600
API_VERSION = "v3.14"
UPDATED = "2020-04-07T00:00:00Z"
KINDS = ("domains", "projects", "users", "roles", "services", "endpoints", "regions")


class NotFound(Exception):
    pass


class Unauthorized(Exception):
    pass


def _now_iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# -- state ---------------------------------------------------------------------
class Store:
    """Admin resources, grants and revocations in one SQLite file, per-thread connections."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    @property
    def db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    def create_schema(self) -> None:
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(
            """
            CREATE TABLE IF NOT EXISTS obj (kind TEXT, id TEXT, name TEXT, domain_id TEXT,
                data TEXT, PRIMARY KEY (kind, id));
            CREATE INDEX IF NOT EXISTS obj_name ON obj (kind, name);
            CREATE TABLE IF NOT EXISTS grant_ (actor TEXT, target_kind TEXT, target TEXT,
                role TEXT, PRIMARY KEY (actor, target_kind, target, role));
            CREATE TABLE IF NOT EXISTS revoked (audit TEXT PRIMARY KEY);
            """
        )

    def put(self, kind: str, data: dict) -> dict:
        self.db.execute(
            "INSERT OR REPLACE INTO obj VALUES (?, ?, ?, ?, ?)",
            (kind, data["id"], data.get("name"), data.get("domain_id"), json.dumps(data)),
        )
        return data

    def get(self, kind: str, oid: str) -> dict:
        row = self.db.execute("SELECT data FROM obj WHERE kind=? AND id=?", (kind, oid)).fetchone()
        if row is None:
            raise NotFound(f"Could not find {kind[:-1]}: {oid}.")
        return json.loads(row[0])

    def find(self, kind: str, **filters: str) -> list[dict]:
        sql, args = "SELECT data FROM obj WHERE kind=?", [kind]
        for col in ("id", "name", "domain_id"):
            if filters.get(col) is not None:
                sql += f" AND {col}=?"
                args.append(filters[col])
        rows = [json.loads(r[0]) for r in self.db.execute(sql, args)]
        extra = {k: v for k, v in filters.items() if k not in ("id", "name", "domain_id")}
        return [r for r in rows if all(str(r.get(k)) == str(v) for k, v in extra.items())]

    def delete(self, kind: str, oid: str) -> None:
        if self.db.execute("DELETE FROM obj WHERE kind=? AND id=?", (kind, oid)).rowcount == 0:
            raise NotFound(f"Could not find {kind[:-1]}: {oid}.")
        col = "actor" if kind == "users" else "target" if kind in ("projects", "domains") else None
        if kind == "roles":
            self.db.execute("DELETE FROM grant_ WHERE role=?", (oid,))
        elif col:
            self.db.execute(f"DELETE FROM grant_ WHERE {col}=?", (oid,))

    def grant(self, user: str, target_kind: str, target: str, role: str, on: bool = True) -> None:
        if on:
            self.db.execute(
                "INSERT OR IGNORE INTO grant_ VALUES (?, ?, ?, ?)",
                (user, target_kind, target, role),
            )
        elif (
            self.db.execute(
                "DELETE FROM grant_ WHERE actor=? AND target_kind=? AND target=? AND role=?",
                (user, target_kind, target, role),
            ).rowcount
            == 0
        ):
            raise NotFound("Could not find role assignment.")

    def grants(self, **f: str | None) -> list[tuple[str, str, str, str]]:
        sql, args = "SELECT actor, target_kind, target, role FROM grant_ WHERE 1=1", []
        for col in ("actor", "target_kind", "target", "role"):
            if f.get(col) is not None:
                sql += f" AND {col}=?"
                args.append(f[col])
        return list(self.db.execute(sql, args))

    def revoke(self, audit: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO revoked VALUES (?)", (audit,))

    def is_revoked(self, audit: str) -> bool:
        return (
            self.db.execute("SELECT 1 FROM revoked WHERE audit=?", (audit,)).fetchone() is not None
        )


def bootstrap(store: Store, password: str, base_url: str) -> None:
    """What ``keystone-manage bootstrap`` makes: Default domain, admin, roles, catalog."""
    store.create_schema()
    store.put(
        "domains",
        {"id": DEFAULT_DOMAIN, "name": "Default", "enabled": True, "description": ""},
    )
    roles = {}
    for name in ("admin", "member", "reader"):
        roles[name] = store.put("roles", {"id": uuid.uuid4().hex, "name": name, "domain_id": None})
    proj = store.put(
        "projects",
        {
            "id": uuid.uuid4().hex,
            "name": ADMIN_PROJECT,
            "domain_id": DEFAULT_DOMAIN,
            "enabled": True,
            "description": "",
            "is_domain": False,
            "parent_id": DEFAULT_DOMAIN,
        },
    )
    user = store.put(
        "users",
        {
            "id": uuid.uuid4().hex,
            "name": ADMIN_USER,
            "domain_id": DEFAULT_DOMAIN,
            "enabled": True,
            "password": password,
        },
    )
    store.grant(user["id"], "projects", proj["id"], roles["admin"]["id"])
    store.grant(user["id"], "system", "all", roles["admin"]["id"])
    svc = store.put(
        "services",
        {"id": uuid.uuid4().hex, "type": "identity", "name": "keystone", "enabled": True},
    )
    store.put("regions", {"id": REGION, "description": "", "parent_region_id": None})
    for iface in ("public", "internal", "admin"):
        store.put(
            "endpoints",
            {
                "id": uuid.uuid4().hex,
                "interface": iface,
                "region": REGION,
                "region_id": REGION,
                "service_id": svc["id"],
                "url": base_url + "/v3",
                "enabled": True,
            },
        )


# -- tokens --------------------------------------------------------------------
class Tokens:
    """Self-verifying tokens: base64(payload) + "." + HMAC-SHA256 over it."""

    def __init__(self, key: bytes, store: Store) -> None:
        self.key = key
        self.store = store

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self.key, body.encode(), hashlib.sha256).digest()[:20])

    def issue(self, payload: dict) -> str:
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return f"{body}.{self._sign(body)}"

    def check(self, token: str | None) -> dict:
        """The payload of a valid, unexpired, unrevoked token, or raise NotFound."""
        if not token or "." not in token:
            raise NotFound("Could not find token.")
        body, sig = token.rsplit(".", 1)
        if not hmac.compare_digest(sig, self._sign(body)):
            raise NotFound("Could not find token.")
        payload = json.loads(_unb64(body))
        if payload["e"] < time.time() or self.store.is_revoked(payload["a"]):
            raise NotFound("Could not find token.")
        return payload
