"""The mock Keystone's HTTP side: one handler for discovery, tokens and the admin calls.

State is deploy/mock_store.py's; the processes that serve are deploy/mock.py's.
"""

from __future__ import annotations

import hmac
import json
import random
import secrets
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rally_keystone_bench.deploy.mock_store import (
    API_VERSION,
    DEFAULT_DOMAIN,
    KINDS,
    TOKEN_TTL_S,
    UPDATED,
    NotFound,
    Store,
    Tokens,
    Unauthorized,
    _b64,
    _now_iso,
)


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
