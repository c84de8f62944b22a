"""clients.pool.auth_token: one validator token per process, shared by every client."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

import pytest

from rally_keystone_bench.clients import pool
from rally_keystone_bench.clients.tokens import Token, UserAuth

CREDENTIAL = {"auth_url": "http://127.0.0.1:1/v3"}
ADMIN = UserAuth(username="admin", password="pw", project_name="admin")


def token(name: str, seconds_left: float) -> Token:
    stamp = datetime.fromtimestamp(time.time() + seconds_left, timezone.utc).isoformat()
    return Token(name, stamp)


@pytest.fixture(autouse=True)
def empty_pool():
    pool.clear()
    yield
    pool.clear()


class Issuer:
    def __init__(self) -> None:
        self.issued = 0

    def __call__(self) -> Token:
        self.issued += 1
        time.sleep(0.05)  # a bcrypt check: long enough for the other threads to arrive
        return token(f"fresh{self.issued}", 3600)


def test_the_token_the_context_issued_is_used_and_none_is_issued():
    issue, preset = Issuer(), token("preset", 3600)
    got = [pool.auth_token(CREDENTIAL, ADMIN, "project", 600, issue, preset) for _ in range(3)]
    assert got == [preset] * 3 and issue.issued == 0


def test_concurrent_new_clients_issue_one_token_between_them():
    """Eight clients at once while the issue takes 50 ms: one token between them. The
    50 ms only makes the race likely (the threads start within it, not measured); a
    thread that came later would find the cached token, so time cannot fail it."""
    issue, got = Issuer(), []
    threads = [
        threading.Thread(
            target=lambda: got.append(pool.auth_token(CREDENTIAL, ADMIN, "project", 600, issue))
        )
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert issue.issued == 1
    assert set(t.value for t in got) == {"fresh1"}


def test_a_token_near_expiry_is_replaced_once_and_the_replacement_kept():
    issue, preset = Issuer(), token("preset", 300)  # less than min_ttl left
    first = pool.auth_token(CREDENTIAL, ADMIN, "project", 600, issue, preset)
    again = pool.auth_token(CREDENTIAL, ADMIN, "project", 600, issue, preset)
    assert first.value == again.value == "fresh1" and issue.issued == 1


def test_each_user_and_scope_has_its_own_token():
    issue = Issuer()
    alice = UserAuth(username="alice", password="pw", project_name="demo")
    a = pool.auth_token(CREDENTIAL, ADMIN, "project", 600, issue)
    b = pool.auth_token(CREDENTIAL, alice, "project", 600, issue)
    c = pool.auth_token(CREDENTIAL, ADMIN, "system", 600, issue)
    assert len({a.value, b.value, c.value}) == 3 and issue.issued == 3


def test_the_validator_is_the_admin_when_there_is_one_else_the_user():
    user = {"credential": {"auth_url": "u", "username": "alice", "password": "p"}}
    admin = {"auth_url": "u", "username": "admin", "password": "p", "project_name": "admin"}
    _, auth, scope = pool.validator_auth({"user": user, "admin": {"credential": admin}})
    assert (auth.username, scope) == ("admin", "project")
    _, auth, scope = pool.validator_auth({"user": user})
    assert (auth.username, scope) == ("alice", "system")  # no project: system scope
