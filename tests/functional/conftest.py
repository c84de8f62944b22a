"""Shared fixtures: one real local Keystone and one Rally home per test session."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.deploy import process
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec
from rally_keystone_bench.driver.task import TASK_UUID_RE

ENV = "functional"


@pytest.fixture(scope="session")
def keystone(tmp_path_factory: pytest.TempPathFactory):
    """A real Keystone (SQLite, Fernet, uWSGI, 2 workers) for the whole session.

    4 bcrypt rounds: none of its tests measures password hashing (the gate's
    test of more rounds starts Keystones of its own).
    """
    run_dir = tmp_path_factory.mktemp("keystone")
    deployment = Deployment(password_hash_rounds=SMALL_ROUNDS)
    yield from _shared(LocalKeystone(deployment, run_dir))


# One worker process: with two, SQLite Keystone answers 500 "database is
# locked" when two users' first password authentications of the day (each
# writes user.last_active_at) or a user creation overlap, and uWSGI's HTTP
# router then holds the client's connection until its 60 s timeout.
SMALL_WORKERS = 1
SMALL_ROUNDS = 4  # bcrypt's minimum: users and tokens stay cheap on 2 cores


@pytest.fixture(scope="session")
def small_keystone(tmp_path_factory: pytest.TempPathFactory):
    """A real Keystone of 1 worker and 4 bcrypt rounds, shared by the modules of a session.

    Its modules only add users and projects of their own names and read
    their own tasks' requests from its access log, so one start serves them
    all (under pytest-xdist, one per worker process that runs them).
    """
    deployment = Deployment(workers=SMALL_WORKERS, password_hash_rounds=SMALL_ROUNDS)
    yield from _shared(LocalKeystone(deployment, tmp_path_factory.mktemp("ks")))


# Names that Rally's contexts give what they create: our keystone_tenants and
# keystone_users ("rkb-"), Rally's stock users context ("c_rally_", "s_rally_").
CONTEXT_PREFIXES = ("rkb-", "c_rally_", "s_rally_")


def _shared(ks: LocalKeystone) -> Iterator[LocalKeystone]:
    """Start KS, yield it to the session, stop it, and fail the session on a leak.

    A leak is a user or project a context created and did not delete, or a
    process whose command line names the run directory once Keystone stopped.
    """
    ks.start()
    try:
        yield ks
        admin = AdminClient(ks.admin_credentials, pool_size=1)
        left = [
            f"{kind[:-1]} {r['name']}"
            for kind in ("users", "projects")
            for prefix in CONTEXT_PREFIXES
            for r in admin.list_prefixed(kind, prefix)
        ]
    finally:
        ks.stop()
    assert not left, f"left in the shared Keystone {ks.run_dir}: {left}"
    assert processes_naming(ks.run_dir) == [], f"still running after {ks.run_dir} stopped"


def processes_naming(path: Path) -> list[str]:
    """Processes (other than this one) whose command line names PATH."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmd and process.is_alive(int(entry.name)):
            found.append(f"{entry.name}: {cmd[:120]}")
    return found


@pytest.fixture(scope="session")
def rally_home(keystone: LocalKeystone, tmp_path_factory: pytest.TempPathFactory) -> RallyHome:
    """A RallyHome with env ``functional`` on the session's Keystone, checked."""
    home = RallyHome(tmp_path_factory.mktemp("rally"))
    home.create_env(ENV, keystone_spec(keystone.admin_credentials))
    home.check_env(ENV)
    return home


def run_task(
    home: RallyHome, task: Path | dict, tmp_path: Path, task_args: dict | None = None
) -> tuple[int, dict[str, Any]]:
    """``rally task start`` on TASK (a file or a dict), then its parsed JSON report.

    Returns Rally's exit code (0 passed, 2 an SLA failed) and the report.
    """
    if isinstance(task, dict):
        path = tmp_path / "task.json"
        path.write_text(json.dumps(task))
    else:
        path = Path(task).resolve()
    cmd = ["task", "start", str(path), "--env", ENV]
    if task_args:
        cmd += ["--task-args", json.dumps(task_args)]
    proc = home.rally(*cmd, check=False)
    found = TASK_UUID_RE.search(proc.stdout)
    if found is None:
        raise AssertionError(f"rally task start made no task:\n{proc.stdout[-3000:]}")
    out = tmp_path / "report.json"
    home.rally("task", "report", found.group(1), "--json", "--out", str(out))
    return proc.returncode, json.loads(out.read_text())


def uwsgi_pids() -> set[int]:
    """Pids of every uWSGI process on the machine."""
    out = subprocess.run(["pgrep", "-f", "uwsgi"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}
