"""uWSGI workers killed during a run: no request waits for uWSGI's 60 s timeout.

A Keystone whose router gives up on a silent worker after 5 s
(``request_timeout``), token workloads with our contexts, and SIGKILL to
the worker processes, once while the load runs and once while
keystone_users creates its users. During the load the durations Rally
recorded (not the wall clock) stay under 10 s, the run ends, and its
report counts what failed; during setup the contexts' retries carry the
workload through and cleanup leaves no user behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.deploy.keystone import Deployment, LocalKeystone
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec
from rally_keystone_bench.verdicts import results

# serial: the durations Rally records must stay under 10 s.
pytestmark = [pytest.mark.functional, pytest.mark.serial]


def served_by(access_log: Path) -> set[int]:
    """Pids of the worker processes that answered a request (the log's last column)."""
    pids = set()
    for line in access_log.read_text().splitlines():
        parts = line.split()
        if parts and parts[-1].isdigit():
            pids.add(int(parts[-1]))
    return pids


@pytest.fixture(scope="module")
def keystone(tmp_path_factory):
    """One Keystone for both tests (uWSGI's master starts new workers after each kill)."""
    base = tmp_path_factory.mktemp("crash")
    dep = Deployment(request_timeout=5, password_hash_rounds=4)
    with LocalKeystone(dep, base / "keystone") as ks:
        home = RallyHome(base / "rally")
        home.create_env("crash", keystone_spec(ks.admin_credentials))
        yield ks, home


def token_task(path: Path, times: int, concurrency: int, tenants: int, users: int) -> Path:
    subtask = {
        "title": "tokens while the workers die",
        "scenario": {"KeystoneTokens.authenticate": {"method": "password"}},
        "runner": {"constant": {"times": times, "concurrency": concurrency}},
        "contexts": {
            "keystone_tenants": {"tenants": tenants},
            "keystone_users": {"users_per_tenant": users},
        },
    }
    path.write_text(json.dumps({"version": 2, "title": "crash", "subtasks": [subtask]}))
    return path


def test_killed_workers_cost_seconds_not_a_minute(keystone, tmp_path):
    ks, home = keystone
    task = token_task(tmp_path / "crash.json", times=60, concurrency=2, tenants=1, users=2)
    killed: list[int] = []

    def watch(run: rally_task.TaskRun, line: str) -> None:
        if not killed and run.counts.done >= 10:
            workers = served_by(ks.access_log_path)
            for pid in workers:
                os.kill(pid, signal.SIGKILL)
            killed.extend(workers)

    run = rally_task.start_task(home, "crash", task, {}, tmp_path / "crash.log", watch=watch)
    assert len(killed) == 2, killed
    out = tmp_path / "crash-report.json"
    assert rally_task.json_report(home, run.uuid, out)
    (wl,) = results.load(out)
    assert wl.iterations == 60  # the run ended
    longest = {name: float(a.duration.max()) for name, a in wl.actions.items() if a.count}
    assert max(longest.values()) < 10.0, longest
    issue = wl.actions["keystone.issue_token"]
    assert issue.failed.sum() + wl.failed_iterations >= 1  # what the crash cost is counted


# Rally logs a context's end, not its start: keystone_users starts as keystone_tenants ends.
SETUP_STARTED = re.compile(r"keystone_tenants@\S+ setup\(\)\s+finished")
SETUP_DONE = re.compile(r"keystone_users setup: (\d+) retr")


def test_context_setup_survives_killed_workers_by_its_retries(keystone, tmp_path):
    ks, home = keystone
    task = token_task(tmp_path / "setup.json", times=6, concurrency=2, tenants=3, users=10)
    killed: list[int] = []
    lines: list[str] = []

    def kill_served_workers() -> None:  # twice, so that one kill lands on a request in flight
        for delay in (0.2, 0.8):
            time.sleep(delay)
            for pid in served_by(ks.access_log_path) - set(killed):
                try:  # the first test's workers are gone already
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                killed.append(pid)

    def watch(run: rally_task.TaskRun, line: str) -> None:
        lines.append(line)
        if SETUP_STARTED.search(line):
            threading.Thread(target=kill_served_workers, daemon=True).start()

    run = rally_task.start_task(home, "crash", task, {}, tmp_path / "setup.log", watch=watch)
    assert killed, "no keystone_users setup line in Rally's output:\n" + "".join(lines[-20:])
    out = tmp_path / "setup-report.json"
    assert rally_task.json_report(home, run.uuid, out)
    (wl,) = results.load(out)
    assert wl.iterations == 6, "the workload did not run: its context setup failed"
    retried = [m.group(1) for m in map(SETUP_DONE.search, lines) if m]
    print(f"workers killed during keystone_users setup: {len(killed)}; retries: {retried}")
    admin = AdminClient(ks.admin_credentials)
    assert [u["name"] for u in admin.list_prefixed("users", "rkb")] == []
    assert [p["name"] for p in admin.list_prefixed("projects", "rkb")] == []
