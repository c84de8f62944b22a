"""The mock token service, served in a thread of the test process."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import mock
from rally_keystone_bench.errors import BenchError


class Mock:
    def __init__(self, tmp: Path, **options) -> None:
        opts = {"service_time_ms": 0.0, "slope_ms_per_s": 0.0, "error_rate": 0.0, **options}
        store = mock.Store(tmp / "mock.sqlite")
        self.server = mock._bind(None, store, mock.Tokens(b"k" * 32, store), opts)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.password = "secret-pw"
        mock.bootstrap(store, self.password, self.base)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def call(self, method: str, path: str, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                raw = resp.read()
                return resp.status, dict(resp.headers), json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            return exc.code, dict(exc.headers), json.loads(raw) if raw else None

    def token(self, user="admin", password=None, scope="project", query="", project="admin"):
        scopes = {
            "project": {"project": {"name": project, "domain": {"name": "Default"}}},
            "domain": {"domain": {"id": "default"}},
            "system": {"system": {"all": True}},
            "unscoped": None,
        }
        auth = {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {
                        "name": user,
                        "domain": {"name": "Default"},
                        "password": password or self.password,
                    }
                },
            }
        }
        if scopes[scope]:
            auth["scope"] = scopes[scope]
        return self.call("POST", "/v3/auth/tokens" + query, {"auth": auth})

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server(tmp_path):
    m = Mock(tmp_path)
    yield m
    m.stop()


def admin_headers(server) -> dict:
    return {"X-Auth-Token": server.token()[1]["X-Subject-Token"]}


def test_version_discovery_in_keystone_format(server):
    status, _, body = server.call("GET", "/")
    assert status == 300
    assert body["versions"]["values"][0]["links"][0]["href"] == server.base + "/v3/"
    status, _, body = server.call("GET", "/v3")
    assert status == 200
    assert body["version"]["id"].startswith("v3.")
    assert body["version"]["status"] == "stable"


def test_project_token_has_roles_and_a_catalog_pointing_at_the_mock(server):
    status, headers, body = server.token()
    tok = body["token"]
    assert status == 201
    assert headers["X-Subject-Token"]
    assert tok["project"]["name"] == "admin"
    assert tok["user"]["name"] == "admin"
    assert [r["name"] for r in tok["roles"]] == ["admin"]
    assert tok["expires_at"].endswith("Z")
    urls = {e["url"] for s in tok["catalog"] if s["type"] == "identity" for e in s["endpoints"]}
    assert urls == {server.base + "/v3"}
    assert "catalog" not in server.token(query="?nocatalog")[2]["token"]


def test_domain_system_and_unscoped_tokens(server):
    assert server.token(scope="domain")[0] == 401  # no role on the domain yet
    h = admin_headers(server)
    admin_id = server.call("GET", "/v3/users?name=admin", headers=h)[2]["users"][0]["id"]
    role = server.call("GET", "/v3/roles?name=admin", headers=h)[2]["roles"][0]["id"]
    url = f"/v3/domains/default/users/{admin_id}/roles/{role}"
    assert server.call("PUT", url, headers=h)[0] == 204
    assert server.token(scope="domain")[2]["token"]["domain"]["name"] == "Default"
    system = server.token(scope="system")[2]["token"]
    assert system["system"] == {"all": True}
    unscoped = server.token(scope="unscoped")[2]["token"]
    assert "roles" not in unscoped and "project" not in unscoped


def test_wrong_password_is_401_and_names_no_password(server):
    status, _, body = server.token(password="nope")
    assert status == 401
    assert "nope" not in json.dumps(body)


def test_validate_check_revoke(server):
    auth = admin_headers(server)
    subject = server.token()[1]["X-Subject-Token"]
    hdrs = {**auth, "X-Subject-Token": subject}
    status, headers, body = server.call("GET", "/v3/auth/tokens", headers=hdrs)
    assert status == 200 and headers["X-Subject-Token"] == subject
    assert body["token"]["project"]["name"] == "admin"
    assert server.call("HEAD", "/v3/auth/tokens", headers=hdrs)[0] == 200
    assert server.call("DELETE", "/v3/auth/tokens", headers=hdrs)[0] == 204
    assert server.call("GET", "/v3/auth/tokens", headers=hdrs)[0] == 404
    assert server.call("HEAD", "/v3/auth/tokens", headers=hdrs)[0] == 404
    forged = subject[:-4] + ("AAAA" if not subject.endswith("AAAA") else "BBBB")
    assert (
        server.call("GET", "/v3/auth/tokens", headers={**auth, "X-Subject-Token": forged})[0] == 404
    )
    assert (
        server.call(
            "GET", "/v3/auth/tokens", headers={"X-Auth-Token": "x", "X-Subject-Token": subject}
        )[0]
        == 401
    )


def test_token_method_rescopes(server):
    unscoped = server.token(scope="unscoped")[1]["X-Subject-Token"]
    auth = {
        "identity": {"methods": ["token"], "token": {"id": unscoped}},
        "scope": {"project": {"name": "admin", "domain": {"id": "default"}}},
    }
    status, _, body = server.call("POST", "/v3/auth/tokens", {"auth": auth})
    assert status == 201
    assert body["token"]["methods"] == ["token"]
    assert body["token"]["project"]["name"] == "admin"


def test_admin_calls_that_rally_users_context_makes(server):
    h = admin_headers(server)
    status, _, body = server.call("POST", "/v3/projects", {"project": {"name": "p1"}}, h)
    assert status == 201
    pid = body["project"]["id"]
    user = {"user": {"name": "u1", "password": "pw1", "domain_id": "default"}}
    uid = server.call("POST", "/v3/users", user, h)[2]["user"]["id"]
    assert server.call("GET", "/v3/users?name=u1", headers=h)[2]["users"][0]["id"] == uid
    assert "password" not in server.call("GET", f"/v3/users/{uid}", headers=h)[2]["user"]
    member = server.call("GET", "/v3/roles?name=member", headers=h)[2]["roles"][0]["id"]
    assert server.call("PUT", f"/v3/projects/{pid}/users/{uid}/roles/{member}", headers=h)[0] == 204
    ra = server.call("GET", f"/v3/role_assignments?user.id={uid}", headers=h)[2]
    assert ra["role_assignments"][0]["scope"] == {"project": {"id": pid}}
    tok = server.token(user="u1", password="pw1", project="p1")[2]["token"]
    assert [r["name"] for r in tok["roles"]] == ["member"]
    # a member is not an admin
    uh = {
        "X-Auth-Token": server.token(user="u1", password="pw1", project="p1")[1]["X-Subject-Token"]
    }
    assert server.call("GET", "/v3/users", headers=uh)[0] == 403
    assert server.call("DELETE", f"/v3/users/{uid}", headers=h)[0] == 204
    assert server.call("DELETE", f"/v3/projects/{pid}", headers=h)[0] == 204
    assert server.call("GET", f"/v3/users/{uid}", headers=h)[0] == 404
    assert server.call("GET", "/v3/users?name=u1", headers=h)[2]["users"] == []
    services = server.call("GET", "/v3/services", headers=h)[2]["services"]
    assert [s["type"] for s in services] == ["identity"]
    assert len(server.call("GET", "/v3/endpoints", headers=h)[2]["endpoints"]) == 3


def test_error_rate_one_answers_500(tmp_path):
    m = Mock(tmp_path, error_rate=1.0)
    try:
        assert m.token()[0] == 500
        assert m.call("GET", "/v3")[0] == 200  # only token requests fail
    finally:
        m.stop()


def test_service_time_serialises_token_requests_in_a_worker(tmp_path):
    """Six token requests at once on one worker of 50 ms take at least 0.3 s. One-sided:
    a slow machine only adds time; only serving two at once could be faster."""
    m = Mock(tmp_path, service_time_ms=50)
    try:
        results = []
        threads = [threading.Thread(target=lambda: results.append(m.token()[0])) for _ in range(6)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        assert results == [201] * 6
        assert elapsed >= 0.3  # one worker: 6 x 50 ms one after another (capacity 20 rps)
    finally:
        m.stop()


def test_a_taken_port_exits_2_with_one_line(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(BenchError, match=f"cannot listen on 127.0.0.1:{port}"):
            mock.serve(tmp_path, port=port)
        rc = cli.main(["mock", "--port", str(port), "--run-dir", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"127.0.0.1:{port}" in err


def test_stall_holds_token_requests_until_it_ends(tmp_path):
    """A token request sent 0.65 s in, inside the stall [0.6, 1.0), is answered at 1.0 s
    or later. One-sided: a late send only makes it later; one over 0.35 s late would
    miss the stall and pass without testing it (no send lateness was measured)."""
    m = Mock(tmp_path, stall_s=0.4, stall_every_s=0.6)
    try:
        started = m.server.started
        assert m.token()[0] == 201  # before the first stall: answered at once
        time.sleep(max(0.0, started + 0.65 - time.monotonic()))  # inside [0.6, 1.0)
        assert m.token()[0] == 201
        assert time.monotonic() >= started + 1.0  # answered only when the stall ended
        assert m.call("GET", "/v3")[0] == 200  # only token requests stall
    finally:
        m.stop()


@pytest.mark.parametrize(
    "stall", [["--stall", "2"], ["--stall", "5", "--stall-every", "5"], ["--stall", "-1"]]
)
def test_bad_stall_is_one_line_exit_2(tmp_path, capsys, stall):
    rc = cli.main(["mock", "--run-dir", str(tmp_path), *stall])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--stall" in err[0]
    assert not (tmp_path / "mock.pid").exists()
