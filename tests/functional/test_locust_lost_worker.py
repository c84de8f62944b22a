"""A Locust worker killed mid-load: the survivors' samples are kept (issue 27, item 3).

Before, ``load`` ended in "unexpected error: TypeError ..." and dropped the
surviving worker's samples too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.functional


def locust_workers_of(parent: int) -> list[int]:
    """Pids of `locust --worker` processes whose command line names our locustfile."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        if ppid == parent and b"--worker" in argv:
            found.append(int(entry.name))
    return found


def test_a_killed_worker_keeps_the_survivors_samples(tmp_path):
    """A worker SIGKILLed 8 s after both exist: exit 2, "lost 1 of 2", the survivor's kept.

    Timing luck: the kill must land once every worker is ready (a worker lost before
    that stops the load, and nothing is sent); the 8 s sleep stands for it, and no
    setup time of this load is quoted. It cannot land after the 12 s load. The
    survivor sends its share either way, about 120 (10 rps for 12 s), against 50."""
    argv = [sys.executable, "-m", "rally_keystone_bench.cli", "load", "--target", "mock"]
    argv += [
        "--scenario",
        "authenticate",
        "--rate",
        "20",
        "--duration",
        "12",
        "--locust-workers",
        "2",
    ]
    argv += ["--reports-dir", str(tmp_path / "reports")]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while len(workers) < 2 and time.monotonic() < deadline:
        workers = locust_workers_of(proc.pid)
        time.sleep(0.2)
    assert len(workers) == 2, "the workers never started"
    time.sleep(8)  # the load is on (the users are made, the schedule has begun)
    os.kill(workers[0], signal.SIGKILL)
    out, err = proc.communicate(timeout=240)
    out, err = out.decode(), err.decode()
    assert proc.returncode == 2, err
    assert "TypeError" not in err
    last = err.strip().splitlines()[-1]
    assert "lost 1 of 2 worker(s)" in last and "the others' are kept" in last
    (run_json,) = (tmp_path / "reports").glob("*/locust/run.json")
    meta = json.loads(run_json.read_text())
    assert len(meta["lost"]) == 1
    survivor = [w for w in meta["workers"].values() if w["received"]]
    assert len(survivor) == 1 and survivor[0]["received"] > 50  # ~10 rps for 12 s
    assert meta["samples_in_report"] == survivor[0]["received"]
    assert meta["left_behind"] == []
