"""A port taken between its pick and the server's bind: the start is retried (item 15).

Before, ``keystone up`` failed with uWSGI's "bind(): Address already in
use" when another socket took the port the tool had picked as free. Here
the first port picked is one this test holds, as that other socket would.
"""

from __future__ import annotations

import contextlib
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


def test_a_traced_start_retried_on_new_ports_traces_what_the_shared_key_signs(
    tmp_path, monkeypatch
):
    """The gate's layout: a key shared into two run directories before either starts
    (our clients sign with the first's); the second one's first port is taken. After
    the retry, its Keystone still traces a request signed with the shared key."""
    from rally_keystone_bench.clients.tokens import TokenClient, UserAuth
    from rally_keystone_bench.deploy import tracing
    from rally_keystone_bench.driver import counters as driver_counters
    from rally_keystone_bench.verdicts import counters

    signer, run_dir = tmp_path / "baseline" / "keystone", tmp_path / "baseline_nocache" / "keystone"
    driver_counters.share_key([signer, run_dir])
    thief = socket.socket()
    thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    thief.bind(("127.0.0.1", 0))
    thief.listen()
    real = process.find_free_port
    picks = iter([thief.getsockname()[1]])
    monkeypatch.setattr(process, "find_free_port", lambda *a: next(picks, None) or real(*a))
    said: list[str] = []
    deployment = Deployment(workers=1, password_hash_rounds=4, trace=True)
    ks = LocalKeystone(deployment, run_dir, progress=said.append)
    try:
        ks.start()
        assert any("a port was taken between its pick and its bind" in s for s in said), said
        assert tracing.same_key(run_dir, signer)
        with tracing.client_environment(signer, rate=1.0):
            client = TokenClient(ks.auth_url)
        auth = UserAuth.from_credential(ks.admin_credentials)
        client.authorize(auth)  # untimed: not signed
        client.issue(auth, timer=contextlib.nullcontext)
        costs = counters.request_costs(tracing.read_records(run_dir))
        assert [c.action for c in costs] == ["keystone.issue_token"]
    finally:
        ks.stop()
        thief.close()
