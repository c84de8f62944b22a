"""A port taken between its pick and the server's bind: the start is retried (item 15).

Before, ``keystone up`` failed with uWSGI's "bind(): Address already in
use" when another socket took the port the tool had picked as free. Here
the first port picked is one this test holds, as that other socket would.
"""

from __future__ import annotations

import socket

import pytest

from rally_keystone_bench.deploy import process
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone

pytestmark = pytest.mark.functional


def test_a_port_taken_after_its_pick_is_replaced(tmp_path, monkeypatch):
    """The first port picked is one this test holds: the start retries on another.
    No time bound of its own: the race is made by construction, and only Keystone's
    start timeout (START_TIMEOUT, 120 s an attempt) bounds it."""
    thief = socket.socket()
    thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    thief.bind(("127.0.0.1", 0))
    thief.listen()
    taken = thief.getsockname()[1]
    real = process.find_free_port
    picks = iter([taken])
    monkeypatch.setattr(process, "find_free_port", lambda *a: next(picks, None) or real(*a))
    said: list[str] = []
    ks = LocalKeystone(
        Deployment(workers=1, password_hash_rounds=4), tmp_path, progress=said.append
    )
    try:
        ks.start()
        assert ks.port != taken
        assert ks.answers()
        assert any("a port was taken between its pick and its bind" in s for s in said), said
    finally:
        ks.stop()
        thief.close()
    assert not any(process.is_alive(p) for p in ks.pids.values())
