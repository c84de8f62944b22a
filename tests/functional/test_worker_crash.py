"""Both uWSGI workers killed during a run: no request waits for uWSGI's 60 s timeout.

A Keystone whose router gives up on a silent worker after 5 s
(``request_timeout``), a token workload with our contexts, and SIGKILL to
both worker processes once the load runs. The durations Rally recorded
(not the wall clock) stay under 10 s, the run ends, and its report counts
what failed.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from rally_keystone_bench import results
from rally_keystone_bench.deploy.keystone import Deployment, LocalKeystone
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec

pytestmark = pytest.mark.functional


def served_by(access_log: Path) -> set[int]:
    """Pids of the worker processes that answered a request (the log's last column)."""
    pids = set()
    for line in access_log.read_text().splitlines():
        parts = line.split()
        if parts and parts[-1].isdigit():
            pids.add(int(parts[-1]))
    return pids


def test_killed_workers_cost_seconds_not_a_minute(tmp_path):
    dep = Deployment(request_timeout=5, password_hash_rounds=4)
    with LocalKeystone(dep, tmp_path / "keystone") as ks:
        home = RallyHome(tmp_path / "rally")
        home.create_env("crash", keystone_spec(ks.admin_credentials))
        task = tmp_path / "crash.json"
        task.write_text(
            json.dumps(
                {
                    "version": 2,
                    "title": "crash",
                    "subtasks": [
                        {
                            "title": "tokens while the workers die",
                            "scenario": {"KeystoneTokens.authenticate": {"method": "password"}},
                            "runner": {"constant": {"times": 60, "concurrency": 2}},
                            "contexts": {
                                "keystone_tenants": {"tenants": 1},
                                "keystone_users": {"users_per_tenant": 2},
                            },
                        }
                    ],
                }
            )
        )
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
