"""SIGTERM while ``keystone up`` starts a deployment leaves nothing running (issue 45, item 1).

As a service manager or a CI job's timeout would stop it: exit 143, no
process of the run directory left, and no ``/dev/shm/keystone-bench-*``
directory of a tmpfs database. The signal lands in the start by
construction (sent once the start's own line is printed).
"""

from __future__ import annotations

import signal

import pytest
from test_nodes_interrupted import kill_all, processes_of, up_until

from rally_keystone_bench.deploy import storage

pytestmark = [pytest.mark.functional]

ROUNDS = ["--password-hash-rounds", "4", "--workers", "1"]


@pytest.mark.parametrize(
    ("options", "line"),
    [
        ([], "starting Keystone ("),
        (
            ["--nodes", "3", "--db", "postgresql", "--db-storage", "tmpfs"],
            "starting Keystone node2",
        ),
    ],
    ids=["one-node", "three-nodes-tmpfs"],
)
def test_sigterm_during_a_start_leaves_nothing(tmp_path, options, line):
    run_dir = tmp_path / "ks"
    proc = up_until(run_dir, line, ["keystone", "up", *ROUNDS, *options])
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 143
        assert proc.stderr is not None
        assert "keystone-bench: interrupted by SIGTERM" in proc.stderr.read()
        assert processes_of(run_dir) == []
        assert not storage.tmpfs_dir(run_dir).exists()
    finally:
        kill_all(run_dir)
        storage.remove(run_dir)
