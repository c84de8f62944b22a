"""Local Keystone options for real: PostgreSQL, MariaDB, memcached, gunicorn.

Each runs a tiny task through ``keystone-bench run``; afterwards its database
is gone and none of its processes (Keystone, memcached) is left.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import pytest
from _bench_helpers import bench, bench_databases, live_pids, states, tiny_task
from _packages import require_package

pytestmark = pytest.mark.functional


@pytest.mark.parametrize(
    "options",
    [
        ["--db", "postgresql", "--cache", "memcached", "--server", "gunicorn"],
        ["--db", "mysql", "--server", "uwsgi"],
    ],
    ids=["postgresql-memcached-gunicorn", "mysql-uwsgi"],
)
def test_tiny_task_on_a_real_database_leaves_nothing_behind(tmp_path, options):
    if "memcached" in options:
        require_package("memcached", "memcached")
    task = tiny_task(tmp_path / "tiny.json")
    proc = bench(
        "run", str(task), "--password-hash-rounds", "4", *options,
        "--reports-dir", str(tmp_path / "reports"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    created = re.findall(r"created \w+ database (keystone_bench_\w+)", proc.stderr)
    assert len(created) == 1 and f"dropped database {created[0]}" in proc.stderr
    (state,) = states(tmp_path / ".keystone-bench")
    assert state["database"] is None  # dropped, and recorded as such
    # Only this run's database: the other xdist worker creates and drops its own.
    assert created[0] not in bench_databases()
    assert live_pids(state) == []
    # The access log has uWSGI's line format under every server.
    (log,) = (tmp_path / ".keystone-bench").rglob("keystone/access.log")
    tokens = [ln.split() for ln in log.read_text().splitlines() if " /v3/auth/tokens" in ln]
    assert tokens and all(len(f) == 6 and f[3] in ("200", "201") for f in tokens)
    assert all(f[0].isdigit() and f[4].isdigit() and f[5].isdigit() for f in tokens)
    if "memcached" in options:
        conf = next((tmp_path / ".keystone-bench").rglob("keystone/keystone.conf")).read_text()
        port = int(conf.split("memcache_servers = 127.0.0.1:")[1].split()[0])
        assert "backend = dogpile.cache.pymemcache" in conf
        with pytest.raises(OSError):  # memcached is gone
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_keystone_down_drops_the_database_restart_keeps_it(tmp_path):
    from rally_keystone_bench.deploy.deployment import Deployment
    from rally_keystone_bench.deploy.keystone import LocalKeystone

    ks = LocalKeystone(Deployment(db="postgresql", password_hash_rounds=4), tmp_path / "ks")
    ks.start()
    try:
        name = ks.database.name
        ks.restart()
        assert ks.database.name == name and ks.answers()
        assert name in bench_databases()
    finally:
        proc = bench("keystone", "down", "--run-dir", str(tmp_path / "ks"), cwd=tmp_path)
    assert proc.returncode == 0
    assert name not in bench_databases()
    assert not ks.is_running()


def test_unreachable_database_exits_2_before_anything_starts(tmp_path):
    proc = bench(
        "keystone", "up", "--db", "mysql", "--db-url", "mysql+pymysql://root@127.0.0.1:1",
        "--run-dir", str(tmp_path / "ks"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "unreachable" in proc.stderr and "127.0.0.1:1" in proc.stderr
    assert not (tmp_path / "ks" / "state.json").exists()
    assert "database keystone_bench_" not in proc.stderr  # none created (each is announced)


def test_spec_pip_cannot_install_exits_2_and_creates_no_database(tmp_path):
    env_cache = tmp_path / "cache"
    proc = subprocess.run(
        [sys.executable, "-m", "rally_keystone_bench.cli", "keystone", "up",
         "--keystone", "keystone==0.0.1", "--db", "postgresql", "--cache", "memcached",
         "--run-dir", str(tmp_path / "ks")],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env=dict(os.environ, KEYSTONE_BENCH_CACHE=str(env_cache)),
    )  # fmt: skip
    assert proc.returncode == 2
    assert "could not install keystone==0.0.1" in proc.stderr
    assert "database keystone_bench_" not in proc.stderr  # none created (each is announced)
    state = tmp_path / "ks" / "state.json"
    assert not state.exists() or not live_pids(json.loads(state.read_text()))


def test_matrix_with_an_unreachable_database_exits_2_before_any_deployment_starts(tmp_path):
    # The bad deployment is the second: the first must not have run either.
    deployments = tmp_path / "d.yaml"
    deployments.write_text(
        "fine:\n  workers: 1\n"
        "bad-db:\n  db: postgresql\n  db_url: postgresql://postgres@127.0.0.1:1\n"
    )
    task = tiny_task(tmp_path / "tiny.json", times=2, concurrency=1)
    proc = bench(
        "matrix", "--deployments", str(deployments), "--task", str(task), cwd=tmp_path
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"keystone-bench: {deployments}: deployment 'bad-db': the postgresql server at "
        "postgresql://postgres@127.0.0.1:1 is unreachable: Connection refused"
    )
    assert not (tmp_path / ".keystone-bench").exists()
    assert not (tmp_path / "reports").exists()
