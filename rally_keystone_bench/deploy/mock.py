"""``keystone-bench mock``: a minimal, fast Keystone v3 token service on loopback.

The paper's baseline (a token service with none of Keystone's work behind
it), standard library only. It serves version discovery, token issue
(password and token methods; project, domain, system or no scope;
``nocatalog``), validate, check and revoke, and the admin calls that
``rally env check``, Rally's ``users`` context and our contexts make
(domains, projects, users, roles, role assignments, services, endpoints).

Processes. ``workers`` processes share one listening socket (forked after
bind), each a ``ThreadingHTTPServer`` speaking HTTP/1.1 with keep-alive.
State lives in RUN_DIR: a SQLite database (WAL) for the admin resources and
revoked tokens, and an HMAC key. A token is ``payload.signature``: the
payload (user, scope, methods, expiry, a random audit id) signed with that
key, so any worker validates any token; a revoke is a row in the database.

Load knobs, for token requests only (``/v3/auth/tokens``):

* ``service_time_ms``: each worker serves one token request at a time for
  that long (a lock held while sleeping), so the mock's capacity is
  ``workers * 1000 / service_time_ms`` requests per second; past it,
  requests queue and latency grows.
* ``slope_ms_per_s``: extra latency of K ms per second since start, outside
  the lock (it does not change the capacity).
* ``error_rate``: that fraction of token requests is answered with HTTP 500.
* ``stall_s`` every ``stall_every_s``: every worker stops answering token
  requests for ``stall_s`` seconds, starting ``stall_every_s`` seconds after
  start and again every ``stall_every_s`` seconds (the clock is shared by
  the forked workers). A request that arrives during a stall is answered
  when it ends, then waits its turn for the service time: the server-side
  hiccup that coordinated omission hides from a closed-loop generator.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import math
import os
import random
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rally_keystone_bench.errors import BenchError, Interrupted

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


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)


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


# -- HTTP ----------------------------------------------------------------------
class MockServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, addr, store: Store, tokens: Tokens, options: dict) -> None:
        super().__init__(addr, Handler)
        self.store = store
        self.tokens = tokens
        self.options = options
        self.started = time.monotonic()
        self.service_lock = threading.Lock()
        self.busy_until = 0.0  # monotonic time when the queued token requests are done


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in two writes: without TCP_NODELAY the body
    # waits for the client's delayed ACK (40 ms on Linux) on a kept-alive connection
    disable_nagle_algorithm = True
    server: MockServer
    server_version = "keystone-bench-mock"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    # -- plumbing
    def _send(self, status: int, body: dict | None = None, headers: dict | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Vary", "X-Auth-Token")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, title: str, message: str) -> None:
        self._send(status, {"error": {"code": status, "title": title, "message": message}})

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def _base(self) -> str:
        host = self.headers.get("Host") or f"127.0.0.1:{self.server.server_address[1]}"
        return f"http://{host}"

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        self.query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        parts = [p for p in url.path.split("/") if p]
        try:
            if not parts:
                return self._send(300, {"versions": {"values": [self._version()]}})
            if parts[0] != "v3":
                raise NotFound("The resource could not be found.")
            if len(parts) == 1:
                return self._send(200, {"version": self._version()})
            if parts[1:3] == ["auth", "tokens"]:
                return self._token_request()
            if parts[1:3] == ["auth", "projects"]:
                me = self._caller()
                return self._send(200, {"projects": self._user_projects(me["u"]), "links": {}})
            self._admin(parts[1:])
        except NotFound as exc:
            self._error(404, "Not Found", str(exc))
        except Unauthorized as exc:
            self._error(
                401,
                "Unauthorized",
                str(exc) or "The request you have made requires authentication.",
            )
        except (ValueError, KeyError, TypeError) as exc:
            self._error(400, "Bad Request", f"Invalid request: {type(exc).__name__}")

    def _version(self) -> dict:
        return {
            "id": API_VERSION,
            "status": "stable",
            "updated": UPDATED,
            "links": [{"rel": "self", "href": self._base() + "/v3/"}],
            "media-types": [
                {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
            ],
        }

    # -- tokens
    def _stall(self) -> None:
        opts = self.server.options
        stall, every = opts.get("stall_s", 0.0), opts.get("stall_every_s", 0.0)
        if not (stall and every):
            return
        since = time.monotonic() - self.server.started
        phase = since % every
        if since >= every and phase < stall:
            time.sleep(stall - phase)

    def _delay(self) -> None:
        opts = self.server.options
        self._stall()
        if opts["slope_ms_per_s"]:
            extra = opts["slope_ms_per_s"] * (time.monotonic() - self.server.started)
            time.sleep(extra / 1000.0)
        if opts["service_time_ms"]:
            # One request at a time, first come first served, on a virtual clock:
            # a late wake-up of the sleeping thread adds to its own latency but
            # never to the next request's, so the capacity is exact under load.
            with self.server.service_lock:
                now = time.monotonic()
                done = max(now, self.server.busy_until) + opts["service_time_ms"] / 1000.0
                self.server.busy_until = done
            time.sleep(done - now)

    def _token_request(self) -> None:
        self._delay()
        if (
            self.server.options["error_rate"]
            and random.random() < self.server.options["error_rate"]
        ):
            return self._error(500, "Internal Server Error", "injected error")
        catalog = "nocatalog" not in self.query
        if self.command == "POST":
            payload = self._authenticate(self._body()["auth"])
            token = self.server.tokens.issue(payload)
            return self._send(
                201, {"token": self._token_body(payload, catalog)}, {"X-Subject-Token": token}
            )
        self._caller()
        subject = self.server.tokens.check(self.headers.get("X-Subject-Token"))
        if self.command == "DELETE":
            self.server.store.revoke(subject["a"])
            return self._send(204)
        if self.command in ("GET", "HEAD"):
            return self._send(
                200,
                {"token": self._token_body(subject, catalog)},
                {"X-Subject-Token": self.headers["X-Subject-Token"]},
            )
        self._error(405, "Method Not Allowed", "method not allowed")

    def _caller(self) -> dict:
        try:
            return self.server.tokens.check(self.headers.get("X-Auth-Token"))
        except NotFound:
            raise Unauthorized("The request you have made requires authentication.") from None

    def _find_domain(self, ref: dict | None) -> dict:
        ref = ref or {"id": DEFAULT_DOMAIN}
        store = self.server.store
        if "id" in ref:
            return store.get("domains", ref["id"])
        found = store.find("domains", name=ref["name"])
        if not found:
            raise Unauthorized(f"Could not find domain: {ref['name']}.")
        return found[0]

    def _authenticate(self, auth: dict) -> dict:
        store = self.server.store
        ident = auth["identity"]
        methods = ident["methods"]
        if "password" in methods:
            u = ident["password"]["user"]
            if "id" in u:
                users = store.find("users", id=u["id"])
            else:
                dom = self._find_domain(u.get("domain"))
                users = store.find("users", name=u["name"], domain_id=dom["id"])
            if (
                not users
                or not users[0].get("enabled", True)
                or not hmac.compare_digest(str(users[0].get("password")), str(u.get("password")))
            ):
                raise Unauthorized("The request you have made requires authentication.")
            user_id = users[0]["id"]
            expires = time.time() + TOKEN_TTL_S
        elif "token" in methods:
            try:
                old = self.server.tokens.check(ident["token"]["id"])
            except NotFound:
                raise Unauthorized("Could not find token.") from None
            user_id, expires = old["u"], old["e"]
        else:
            raise Unauthorized("Unsupported authentication method.")
        scope = auth.get("scope")
        kind, target = None, None
        if isinstance(scope, dict) and "project" in scope:
            p = scope["project"]
            if "id" in p:
                proj = store.find("projects", id=p["id"])
            else:
                proj = store.find(
                    "projects", name=p["name"], domain_id=self._find_domain(p.get("domain"))["id"]
                )
            if not proj:
                raise Unauthorized("Could not find project.")
            kind, target = "projects", proj[0]["id"]
        elif isinstance(scope, dict) and "domain" in scope:
            kind, target = "domains", self._find_domain(scope["domain"])["id"]
        elif isinstance(scope, dict) and "system" in scope:
            kind, target = "system", "all"
        if kind and not store.grants(actor=user_id, target_kind=kind, target=target):
            raise Unauthorized("User has no access to the requested scope.")
        return {
            "u": user_id,
            "k": kind,
            "t": target,
            "m": methods,
            "e": expires,
            "i": time.time(),
            "a": _b64(secrets.token_bytes(16)),
        }

    def _token_body(self, p: dict, catalog: bool) -> dict:
        store = self.server.store
        user = store.get("users", p["u"])
        udom = store.get("domains", user["domain_id"])
        body: dict[str, Any] = {
            "methods": p["m"],
            "user": {
                "id": user["id"],
                "name": user["name"],
                "password_expires_at": None,
                "domain": {"id": udom["id"], "name": udom["name"]},
            },
            "audit_ids": [p["a"]],
            "expires_at": _now_iso(p["e"]),
            "issued_at": _now_iso(p["i"]),
        }
        if p["k"]:
            role_ids = {g[3] for g in store.grants(actor=p["u"], target_kind=p["k"], target=p["t"])}
            body["roles"] = []
            for rid in sorted(role_ids):
                for r in store.find("roles", id=rid):
                    body["roles"].append({"id": r["id"], "name": r["name"]})
            if p["k"] == "projects":
                proj = store.get("projects", p["t"])
                pdom = store.get("domains", proj["domain_id"])
                body["project"] = {
                    "id": proj["id"],
                    "name": proj["name"],
                    "domain": {"id": pdom["id"], "name": pdom["name"]},
                }
                body["is_domain"] = False
            elif p["k"] == "domains":
                dom = store.get("domains", p["t"])
                body["domain"] = {"id": dom["id"], "name": dom["name"]}
            else:
                body["system"] = {"all": True}
            if catalog:
                body["catalog"] = self._catalog()
        return body

    def _catalog(self) -> list[dict]:
        store = self.server.store
        out = []
        for svc in store.find("services"):
            eps = [e for e in store.find("endpoints") if e["service_id"] == svc["id"]]
            out.append(
                {
                    "id": svc["id"],
                    "type": svc["type"],
                    "name": svc.get("name", ""),
                    "endpoints": [
                        {
                            "id": e["id"],
                            "interface": e["interface"],
                            "region": e["region"],
                            "region_id": e["region_id"],
                            "url": e["url"],
                        }
                        for e in eps
                    ],
                }
            )
        return out

    def _user_projects(self, user_id: str) -> list[dict]:
        ids = {g[2] for g in self.server.store.grants(actor=user_id, target_kind="projects")}
        return [self.server.store.get("projects", i) for i in sorted(ids)]

    # -- admin API
    def _admin(self, parts: list[str]) -> None:
        me = self._caller()
        store = self.server.store
        admin_roles = {r["id"] for r in store.find("roles", name="admin")}
        if not any(g[3] in admin_roles for g in store.grants(actor=me["u"])):
            return self._error(
                403, "Forbidden", "You are not authorized to perform the requested action."
            )
        kind = parts[0]
        if kind == "role_assignments":
            return self._role_assignments()
        if kind == "users" and len(parts) == 3 and parts[2] == "projects":
            store.get("users", parts[1])
            return self._send(200, {"projects": self._user_projects(parts[1]), "links": {}})
        if kind in ("projects", "domains") and len(parts) >= 4 and parts[2] == "users":
            return self._grant(kind, parts)
        if kind not in KINDS:
            raise NotFound("The resource could not be found.")
        single = kind[:-1]
        if len(parts) == 1 and self.command == "GET":
            filters = {k: v for k, v in self.query.items() if k in ("name", "domain_id", "enabled")}
            if "enabled" in filters:
                filters["enabled"] = str(filters["enabled"].lower() in ("true", "1"))
            items = [self._public(kind, o) for o in store.find(kind, **filters)]
            return self._send(
                200,
                {
                    kind: items,
                    "links": {"self": self._base() + self.path, "next": None, "previous": None},
                },
            )
        if len(parts) == 1 and self.command == "POST":
            data = self._body()[single]
            data.setdefault("id", uuid.uuid4().hex)
            data.setdefault("enabled", True)
            if kind in ("projects", "users"):
                data.setdefault("domain_id", DEFAULT_DOMAIN)
                store.get("domains", data["domain_id"])
                if store.find(kind, name=data["name"], domain_id=data["domain_id"]):
                    return self._error(409, "Conflict", f"Duplicate entry for {single}.")
            if kind == "projects":
                data.setdefault("parent_id", data["domain_id"])
                data.setdefault("is_domain", False)
                data.setdefault("description", "")
            if kind in ("domains", "roles") and store.find(kind, name=data["name"]):
                return self._error(409, "Conflict", f"Duplicate entry for {single}.")
            store.put(kind, data)
            return self._send(201, {single: self._public(kind, data)})
        oid = parts[1]
        if len(parts) == 2 and self.command in ("GET", "HEAD"):
            return self._send(200, {single: self._public(kind, store.get(kind, oid))})
        if len(parts) == 2 and self.command == "PATCH":
            data = store.get(kind, oid)
            data.update(self._body()[single])
            data["id"] = oid
            store.put(kind, data)
            return self._send(200, {single: self._public(kind, data)})
        if len(parts) == 2 and self.command == "DELETE":
            if kind == "domains" and store.get(kind, oid).get("enabled", True):
                return self._error(
                    403,
                    "Forbidden",
                    "Cannot delete a domain that is enabled, please disable it first.",
                )
            store.delete(kind, oid)
            return self._send(204)
        raise NotFound("The resource could not be found.")

    def _public(self, kind: str, data: dict) -> dict:
        out = {k: v for k, v in data.items() if k != "password"}
        out["links"] = {"self": f"{self._base()}/v3/{kind}/{data['id']}"}
        return out

    def _grant(self, kind: str, parts: list[str]) -> None:
        store = self.server.store
        target, user = parts[1], parts[3]
        store.get(kind, target)
        store.get("users", user)
        if len(parts) == 5 and parts[4] == "roles" and self.command == "GET":
            rids = [g[3] for g in store.grants(actor=user, target_kind=kind, target=target)]
            roles = [self._public("roles", store.get("roles", r)) for r in rids]
            return self._send(200, {"roles": roles, "links": {}})
        if len(parts) != 6 or parts[4] != "roles":
            raise NotFound("The resource could not be found.")
        role = parts[5]
        store.get("roles", role)
        if self.command == "PUT":
            store.grant(user, kind, target, role)
            return self._send(204)
        if self.command == "DELETE":
            store.grant(user, kind, target, role, on=False)
            return self._send(204)
        if self.command in ("GET", "HEAD"):
            if not store.grants(actor=user, target_kind=kind, target=target, role=role):
                raise NotFound("Could not find role assignment.")
            return self._send(204)
        raise NotFound("The resource could not be found.")

    def _role_assignments(self) -> None:
        q = self.query
        kind = (
            "projects" if "scope.project.id" in q else "domains" if "scope.domain.id" in q else None
        )
        target = q.get("scope.project.id") or q.get("scope.domain.id")
        out = []
        for actor, tkind, tgt, role in self.server.store.grants(
            actor=q.get("user.id"), target_kind=kind, target=target, role=q.get("role.id")
        ):
            if tkind == "system":
                scope = {"system": {"all": True}}
            else:
                scope = {tkind[:-1]: {"id": tgt}}
            out.append(
                {
                    "user": {"id": actor},
                    "role": {"id": role},
                    "scope": scope,
                    "links": {"assignment": self._base() + self.path},
                }
            )
        self._send(200, {"role_assignments": out, "links": {}})


# -- process -------------------------------------------------------------------
def _bind(
    port: int | None, store: Store, tokens: Tokens, options: dict, host: str = "127.0.0.1"
) -> MockServer:
    try:
        return MockServer((host, port or 0), store, tokens, options)
    except OSError as exc:
        where = f"{host}:{port}" if port else f"{host} (any free port)"
        raise BenchError(f"cannot listen on {where}: {exc.strerror}") from None


def serve(
    run_dir: Path,
    port: int | None = None,
    workers: int = 1,
    service_time_ms: float = 0.0,
    slope_ms_per_s: float = 0.0,
    error_rate: float = 0.0,
    announce=print,
    stall_s: float = 0.0,
    stall_every_s: float = 0.0,
    host: str = "127.0.0.1",
) -> int:
    """Run the mock in the foreground until SIGTERM or Ctrl-C."""
    if workers < 1 or service_time_ms < 0 or slope_ms_per_s < 0 or not 0 <= error_rate <= 1:
        raise BenchError(
            "need --workers >= 1, --service-time >= 0, --slope >= 0, 0 <= --error-rate <= 1"
        )
    check_stall(stall_s, stall_every_s)
    run_dir.mkdir(parents=True, exist_ok=True)
    key_path, db_path = run_dir / "mock.key", run_dir / "mock.sqlite"
    for stale in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
        stale.unlink(missing_ok=True)
    _write_private(key_path, secrets.token_hex(32))
    store = Store(db_path)
    tokens = Tokens(key_path.read_text().encode(), store)
    options = {
        "service_time_ms": service_time_ms,
        "slope_ms_per_s": slope_ms_per_s,
        "error_rate": error_rate,
        "stall_s": stall_s,
        "stall_every_s": stall_every_s,
    }
    server = _bind(port, store, tokens, options, host)
    real_port = server.server_address[1]
    base = f"http://{host}:{real_port}"
    password = secrets.token_urlsafe(16)
    bootstrap(store, password, base)
    os.chmod(db_path, 0o600)
    store.db.close()
    store._local = threading.local()
    _write_private(run_dir / "admin-password", password + "\n")
    _write_private(
        run_dir / "openrc",
        "\n".join(
            [
                f"export OS_AUTH_URL={base}/v3",
                f"export OS_USERNAME={ADMIN_USER}",
                f"export OS_PASSWORD={password}",
                f"export OS_PROJECT_NAME={ADMIN_PROJECT}",
                "export OS_USER_DOMAIN_NAME=Default",
                "export OS_PROJECT_DOMAIN_NAME=Default",
                f"export OS_REGION_NAME={REGION}",
                "export OS_IDENTITY_API_VERSION=3",
                "",
            ]
        ),
    )
    (run_dir / "mock.json").write_text(json.dumps({"port": real_port, "pid": os.getpid()}) + "\n")
    (run_dir / "mock.pid").write_text(f"{os.getpid()}\n")

    children: list[int] = []
    stopped_by = [signal.SIGINT]  # Ctrl-C arrives as KeyboardInterrupt

    def _stop(signum, frame):
        stopped_by[0] = signum
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    try:  # from the first fork on: a signal at any point stops every worker
        for _ in range(workers - 1):
            # SIGTERM waits (blocked) until the worker has its own disposition: a
            # SIGTERM to a worker that still had our Python handler would be lost.
            sigs = {signal.SIGTERM, signal.SIGINT}
            signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
            pid = os.fork()
            if pid == 0:  # a worker: serve on the inherited socket until killed
                try:
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    signal.signal(signal.SIGINT, signal.SIG_IGN)
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
                    server.serve_forever()
                finally:
                    os._exit(0)
            children.append(pid)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
        announce(
            f"mock Keystone: {workers} worker(s), service time {service_time_ms:g} ms, "
            f"slope {slope_ms_per_s:g} ms/s, error rate {error_rate:g}"
            + (f", stalls {stall_s:g} s every {stall_every_s:g} s" if stall_s else "")
        )
        announce(f"auth URL: {base}/v3")
        announce(f"openrc: {run_dir / 'openrc'}")
        server.serve_forever()
    except KeyboardInterrupt:
        # Stopped by a signal, as a foreground service is: 130 or 143, said so.
        raise Interrupted(int(stopped_by[0])) from None
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        server.server_close()
        for name in ("mock.pid", "mock.json"):
            (run_dir / name).unlink(missing_ok=True)
    return 0


def check_stall(stall_s: float, stall_every_s: float) -> None:
    """BenchError unless the stall is off or 0 < stall < stall-every."""
    if not (math.isfinite(stall_s) and math.isfinite(stall_every_s)):
        raise BenchError("--stall and --stall-every must be finite numbers of seconds")
    if stall_s < 0 or stall_every_s < 0:
        raise BenchError("--stall and --stall-every must not be negative")
    if stall_s and not stall_every_s:
        raise BenchError("--stall needs --stall-every above 0 (seconds from one stall to the next)")
    if stall_s and stall_s >= stall_every_s:
        raise BenchError(
            f"--stall {stall_s:g} s must be shorter than --stall-every {stall_every_s:g} s"
        )


# -- Python API ----------------------------------------------------------------
class MockKeystone:
    """The mock as a subprocess, for tests and the capacity search.

    ``with MockKeystone(workers=2, service_time_ms=5) as ks: ks.auth_url``; its
    known capacity is ``workers * 1000 / service_time_ms`` requests per second.
    """

    def __init__(
        self,
        workers: int = 1,
        service_time_ms: float = 0.0,
        slope_ms_per_s: float = 0.0,
        error_rate: float = 0.0,
        port: int | None = None,
        run_dir: Path | str | None = None,
        stall_s: float = 0.0,
        stall_every_s: float = 0.0,
        host: str = "127.0.0.1",
        netns: str | None = None,
    ) -> None:
        self.workers = workers
        self.stall_s = stall_s
        self.stall_every_s = stall_every_s
        self.host = host
        self.netns = netns  # run inside this network namespace (ip netns exec)
        self.service_time_ms = service_time_ms
        self.slope_ms_per_s = slope_ms_per_s
        self.error_rate = error_rate
        self.port = port
        self._tmp = None if run_dir else tempfile.TemporaryDirectory(prefix="ks-mock-")
        self.run_dir = Path(run_dir or self._tmp.name).resolve()
        self.proc: subprocess.Popen | None = None

    @property
    def capacity_rps(self) -> float:
        """Token requests per second the mock can serve; inf without a service time."""
        if not self.service_time_ms:
            return float("inf")
        return self.workers * 1000.0 / self.service_time_ms

    @property
    def openrc_path(self) -> Path:
        return self.run_dir / "openrc"

    @property
    def auth_url(self) -> str:
        if self.port is None:
            raise BenchError("the mock has no port yet: start it first")
        return f"http://{self.host}:{self.port}/v3"

    @property
    def admin_credentials(self) -> dict[str, str]:
        return {
            "auth_url": self.auth_url,
            "username": ADMIN_USER,
            "password": (self.run_dir / "admin-password").read_text().strip(),
            "project_name": ADMIN_PROJECT,
            "user_domain_name": "Default",
            "project_domain_name": "Default",
        }

    def __enter__(self) -> MockKeystone:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 30.0) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        state = self.run_dir / "mock.json"
        state.unlink(missing_ok=True)
        settings = {
            "run_dir": str(self.run_dir),
            "port": self.port,
            "workers": self.workers,
            "service_time_ms": self.service_time_ms,
            "slope_ms_per_s": self.slope_ms_per_s,
            "error_rate": self.error_rate,
            "stall_s": self.stall_s,
            "stall_every_s": self.stall_every_s,
            "host": self.host,
        }
        # The mock's own entry point (see the end of this module), not the CLI.
        cmd = [sys.executable, "-m", "rally_keystone_bench.deploy.mock", json.dumps(settings)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        log = open(self.run_dir / "mock.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.run_dir / "mock.log").read_text().strip().splitlines()[-1:]
                raise BenchError(f"the mock exited at start: {' '.join(tail)}")
            if state.exists():
                with contextlib.suppress(ValueError):
                    self.port = json.loads(state.read_text())["port"]
                    if self._answers():
                        return
            time.sleep(0.05)
        self.stop()
        raise BenchError(f"the mock did not answer within {timeout:g} s")

    def _answers(self) -> bool:
        try:
            if self.netns:  # not reachable from here: the mock wrote its state file
                return True
            with socket.create_connection((self.host, self.port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _serve_settings(text: str) -> int:
    """Serve with the keyword arguments of ``serve`` given as one JSON object."""
    settings = json.loads(text)
    settings["run_dir"] = Path(settings["run_dir"])
    try:
        return serve(**settings, announce=lambda line: print(line, flush=True))
    except Interrupted as exc:
        return exc.exit_code
    except BenchError as exc:
        print(f"mock: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_serve_settings(sys.argv[1]))
