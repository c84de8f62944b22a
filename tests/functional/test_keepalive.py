"""A request Keystone fails on must not hang a kept-alive connection.

Seen under Rally (about 1 run in 3): SQLite's "database is locked" escaped
Keystone's WSGI stack, uWSGI closed the worker connection without a response,
and its HTTP router (keep-alive mode) kept the client connection open waiting
for the next request, so the client hung 60 s before "Remote end closed
connection without response". Here a held SQLite write lock makes Keystone
fail a DELETE after its 30 s busy timeout; the client must get that 500 at
once, on its kept-alive connection, and the connection must stay usable.
"""

from __future__ import annotations

import http.client
import json
import sqlite3
import time
import urllib.parse

import pytest

# Not serial (since 2026-11-28): the answer must come within BUSY_TIMEOUT + 15 s
# of wall clock, and a hang is BUSY_TIMEOUT + ROUTER_TIMEOUT; a neighbour's load
# adds far less than 15 s to one request (17 looped runs at load average 2.9 to 20
# passed, doc/source/gate-ci.rst). It waits 30 s idle: the parallel part takes it
# at almost no cost.
pytestmark = pytest.mark.functional

BUSY_TIMEOUT = 30.0  # the ?timeout= of LocalKeystone's SQLite URL
ROUTER_TIMEOUT = 60.0  # uWSGI's http-timeout, what a hung client waits on top


def _request(conn, method, path, token=None, body=None):
    headers = {"Accept": "application/json", "Connection": "keep-alive"}
    if token:
        headers["X-Auth-Token"] = token
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    return resp, resp.read()


def test_a_failed_request_answers_500_at_once_on_a_kept_alive_connection(keystone):
    """The DELETE waits for a lock held before it is sent (by construction, no race).

    Slack: the answer may come up to 15 s after the 30 s busy timeout (a busy
    2-core machine), still far from the 30 + 60 s a hung connection takes. The
    whole test took 30.47 s at load 0.4 to 8 (doc/source/gate-ci.rst), so the
    answer came within half a second of the busy timeout; 17 looped runs at
    load 2.9 to 20 passed.
    """
    creds = keystone.admin_credentials
    url = urllib.parse.urlsplit(creds["auth_url"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=BUSY_TIMEOUT + 20)
    auth = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {
                        "name": creds["username"],
                        "domain": {"name": "Default"},
                        "password": creds["password"],
                    }
                },
            },
            "scope": {"project": {"name": creds["project_name"], "domain": {"name": "Default"}}},
        }
    }
    resp, _ = _request(conn, "POST", "/v3/auth/tokens?nocatalog", body=auth)
    assert resp.status == 201
    token = resp.getheader("X-Subject-Token")
    resp, body = _request(
        conn, "POST", "/v3/users", token, {"user": {"name": "ka-victim", "domain_id": "default"}}
    )
    assert resp.status == 201, body[:200]
    user = json.loads(body)["user"]["id"]

    lock = sqlite3.connect(keystone.run_dir / "keystone.db", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # Keystone's writers now time out
    try:
        started = time.monotonic()
        try:
            resp, body = _request(conn, "DELETE", f"/v3/users/{user}", token)
        except (TimeoutError, http.client.RemoteDisconnected) as exc:
            waited = time.monotonic() - started
            pytest.fail(f"no answer after {waited:.0f} s on a kept-alive connection: {exc!r}")
        waited = time.monotonic() - started
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert resp.status == 500
    assert json.loads(body)["error"]["code"] == 500
    assert waited < BUSY_TIMEOUT + 15 < BUSY_TIMEOUT + ROUTER_TIMEOUT

    # The same connection still serves, and the user can go now.
    resp, body = _request(conn, "DELETE", f"/v3/users/{user}", token)
    assert resp.status == 204, body[:200]
    conn.close()
