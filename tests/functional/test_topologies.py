"""The studies' topologies for real: nginx in front of uWSGI, nodes behind HAProxy, tmpfs.

Each starts for real, runs a tiny task through ``keystone-bench run``, and
leaves nothing behind: no process, no database, no tmpfs directory.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from _bench_helpers import bench, bench_databases, live_pids, states, tiny_task

pytestmark = pytest.mark.functional


def require(command: str, package: str) -> None:
    """Skip (or fail under CI) when a Debian package's command is missing."""
    if shutil.which(command) or os.path.exists(f"/usr/sbin/{command}"):
        return
    message = f"{command} is not installed: apt-get install {package}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def processes_mentioning(text: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", text], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if "pgrep" not in ln]


def token_lines(log) -> list[list[str]]:
    return [ln.split() for ln in log.read_text().splitlines() if " /v3/auth/tokens" in ln]


@pytest.mark.slow
def test_nginx_in_front_of_uwsgi_runs_a_task_and_leaves_nothing(tmp_path):
    require("nginx", "nginx")
    task = tiny_task(tmp_path / "tiny.json")
    proc = bench(
        "run", str(task), "--server", "nginx", "--password-hash-rounds", "4",
        "--reports-dir", str(tmp_path / "reports"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (state,) = states(tmp_path / ".keystone-bench")
    assert set(state["pids"]) == set() and live_pids(state) == []
    (log,) = (tmp_path / ".keystone-bench").rglob("keystone/access.log")
    tokens = token_lines(log)
    # nginx's own log, in the line every server writes.
    assert tokens and all(len(f) == 6 and f[3] in ("200", "201") for f in tokens)
    assert all(f[0].isdigit() and f[4].isdigit() and f[5].isdigit() for f in tokens)
    assert (log.parent / "nginx" / "nginx.conf").exists()
    assert processes_mentioning(str(log.parent)) == []


def _token(auth_url: str, password: str) -> str:
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {"name": "admin", "domain": {"name": "Default"}, "password": password}
                },
            },
            "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}},
        }
    }
    req = urllib.request.Request(
        auth_url + "/auth/tokens?nocatalog",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status == 201
        return resp.headers["X-Subject-Token"]


def _validate(auth_url: str, token: str) -> int:
    req = urllib.request.Request(
        auth_url + "/auth/tokens?nocatalog",
        headers={"X-Auth-Token": token, "X-Subject-Token": token},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def wait_for(condition, what: str, failed: list[str], deadline_s: float = 120.0) -> None:
    """Poll CONDITION until it holds; fail naming WHAT after DEADLINE_S (a bound, not a pace)."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {deadline_s:g} s for {what}; failed: {failed[:3]}")
        time.sleep(0.1)


@pytest.mark.slow
# serial: it once slept 6 s after node 1's stop and wanted answers in the last 3 s
# (gate-ci.rst); it now waits for states, and only its 120 s bounds are wall clock.
@pytest.mark.serial
def test_two_nodes_behind_haproxy_share_keys_and_survive_losing_one(tmp_path):
    """Node 1 stops while a serial load runs: HAProxy sends the rest to node 2.

    No fixed sleep: the test waits for the load to run, stops node 1 (terminate
    returns once it is gone), then for three answers after that, which only node 2
    can give. Slack: 120 s bounds each wait, against HAProxy's redispatch of refused
    connections and its drop of node 1 after two failed checks 1 s apart
    (doc/source/deployments.rst), a takeover never timed; 18 looped runs at load
    12 to 22 passed (gate-ci.rst). Up to 3 failures pass; the serial load has one
    request in flight on node 1.
    """
    require("haproxy", "haproxy")
    from rally_keystone_bench.deploy import balancer, process
    from rally_keystone_bench.deploy.deployment import Deployment
    from rally_keystone_bench.deploy.keystone import LocalKeystone

    dep = Deployment(nodes=2, db="postgresql", password_hash_rounds=4)
    ks = LocalKeystone(dep, tmp_path / "ks")
    ks.start()
    database = ks.database.name
    try:
        password = ks.admin_password
        for _ in range(6):
            _token(ks.auth_url, password)
        counts = balancer.requests_per_node(ks.run_dir)
        assert set(counts) == {"node1", "node2"} and all(counts.values()), counts
        # Shared Fernet keys: issued by node 1 itself, valid on node 2 itself.
        (_, port1), (_, port2) = ks.nodes()
        token = _token(f"http://127.0.0.1:{port1}/v3", password)
        assert _validate(f"http://127.0.0.1:{port2}/v3", token) == 200

        # Node 1 stops mid-run: HAProxy sends the rest to node 2.
        failed, served = [], []
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set():
                try:
                    _token(ks.auth_url, password)
                    served.append(time.monotonic())
                except (OSError, AssertionError) as exc:
                    failed.append(repr(exc))

        worker = threading.Thread(target=load)
        worker.start()
        wait_for(lambda: len(served) >= 3, "the load to start", failed)
        process.terminate(ks.pids["node1-server"])  # returns once node 1 is gone
        stopped_at = time.monotonic()
        node2_before = balancer.requests_per_node(ks.run_dir)["node2"]
        # The load goes on through node 2 alone: wait for it, not for a time.
        wait_for(lambda: len([t for t in served if t > stopped_at]) >= 3, "node 2 to serve", failed)
        stop.set()
        worker.join(timeout=120)
        assert balancer.requests_per_node(ks.run_dir)["node2"] > node2_before
        assert len(failed) <= 3, failed  # the requests node 1 had in flight, at most
    finally:
        ks.stop()
    assert processes_mentioning(str(ks.run_dir)) == []
    # Its own database, by name: other runs may create theirs on the same server meanwhile.
    assert database not in bench_databases()


@pytest.mark.slow
def test_sqlite_on_tmpfs_runs_a_task_and_leaves_nothing(tmp_path):
    task = tiny_task(tmp_path / "tiny.json")
    shm_before = set(Path("/dev/shm").iterdir())
    proc = bench(
        "run", str(task), "--db-storage", "tmpfs", "--password-hash-rounds", "4",
        "--reports-dir", str(tmp_path / "reports"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "removed /dev/shm/keystone-bench-" in proc.stderr
    assert "db on tmpfs" in proc.stderr
    assert set(Path("/dev/shm").iterdir()) - shm_before == set()
    (run_dir,) = (tmp_path / ".keystone-bench").rglob("keystone/state.json")
    assert not (run_dir.parent / "keystone.db").exists()  # it lived on tmpfs
    assert processes_mentioning(str(run_dir.parent)) == []


@pytest.mark.slow
@pytest.mark.serial  # it compares all of /dev/shm before and after: nothing else may write there
def test_postgresql_on_tmpfs_is_a_private_server_gone_afterwards(tmp_path):
    """PostgreSQL on tmpfs is a private server on a port of its own, gone afterwards with
    its /dev/shm directory. No time bound: serial only because it compares all of
    /dev/shm before and after; the 2 s connect timeout only checks a closed port,
    which refuses at once."""
    task = tiny_task(tmp_path / "tiny.json")
    shm_before = set(Path("/dev/shm").iterdir())
    proc = bench(
        "run", str(task), "--db", "postgresql", "--db-storage", "tmpfs",
        "--password-hash-rounds", "4", "--reports-dir", str(tmp_path / "reports"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "private PostgreSQL on port" in proc.stderr
    (state,) = states(tmp_path / ".keystone-bench")
    port = state["private_db_port"]
    assert set(Path("/dev/shm").iterdir()) - shm_before == set()
    with pytest.raises(OSError):  # the private server is gone
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    from rally_keystone_bench.deploy import storage

    (found,) = (tmp_path / ".keystone-bench").rglob("keystone/state.json")
    assert processes_mentioning(str(storage.tmpfs_dir(found.parent))) == []
