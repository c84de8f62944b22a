"""Shared fixtures: one real local Keystone and one Rally home per test session."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rally_keystone_bench.deploy.keystone import Deployment, LocalKeystone
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec
from rally_keystone_bench.driver.task import TASK_UUID_RE

ENV = "functional"


@pytest.fixture(scope="session")
def keystone(tmp_path_factory: pytest.TempPathFactory):
    """A real Keystone (SQLite, Fernet, uWSGI, 2 workers) for the whole session."""
    run_dir = tmp_path_factory.mktemp("keystone")
    with LocalKeystone(Deployment(), run_dir) as ks:
        yield ks


# One worker process: with two, SQLite Keystone answers 500 "database is
# locked" when two users' first password authentications of the day (each
# writes user.last_active_at) or a user creation overlap, and uWSGI's HTTP
# router then holds the client's connection until its 60 s timeout.
SMALL_WORKERS = 1
SMALL_ROUNDS = 4  # bcrypt's minimum: users and tokens stay cheap on 2 cores


@pytest.fixture(scope="module")
def small_keystone(tmp_path_factory: pytest.TempPathFactory):
    """A real Keystone of 1 worker and 4 bcrypt rounds, for one test module."""
    deployment = Deployment(workers=SMALL_WORKERS, password_hash_rounds=SMALL_ROUNDS)
    with LocalKeystone(deployment, tmp_path_factory.mktemp("ks")) as ks:
        yield ks


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
