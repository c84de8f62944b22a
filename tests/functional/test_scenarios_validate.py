"""`rally task validate` refuses each bad KeystoneTokens argument, naming it."""

from __future__ import annotations

import json

import pytest
import validation_cases
from test_scenarios_live import TASKS

from rally_keystone_bench.driver.rally import RallyHome, keystone_spec

pytestmark = pytest.mark.functional


@pytest.fixture(scope="module")
def rh(small_keystone, tmp_path_factory):
    home = RallyHome(tmp_path_factory.mktemp("rally"))
    home.create_env("ks", keystone_spec(small_keystone.admin_credentials))
    home.openrc = str(small_keystone.openrc_path)
    return home


def _task_args(task, openrc: str) -> list[str]:
    """What a shipped task needs from its runner: the gate's two sides' openrc files."""
    if task.name not in ("gate.yaml", "gate-cloud.yaml"):
        return []
    sides = {"baseline": openrc, "candidate": openrc}
    if task.name == "gate-cloud.yaml":  # and its cache-off pair's
        sides |= {"baseline_nocache": openrc, "candidate_nocache": openrc}
    return ["--task-args", json.dumps(sides)]


def _validate(rh: RallyHome, tmp_path, name: str, args: dict):
    task = {
        "version": 2,
        "title": "bad argument",
        "subtasks": [
            {
                "title": "t",
                "scenario": {name: args},
                "runner": {"constant": {"times": 1, "concurrency": 1}},
            }
        ],
    }
    path = tmp_path / "task.json"
    path.write_text(json.dumps(task))
    return rh.rally("task", "validate", str(path), "--deployment", "ks", check=False)


@pytest.mark.parametrize("name, args, argument", validation_cases.BAD_ARGUMENTS)
def test_bad_argument_fails_validation_and_is_named(rh, tmp_path, name, args, argument):
    proc = _validate(rh, tmp_path, name, args)
    assert proc.returncode != 0
    assert f"{argument} is" in proc.stdout + proc.stderr


def test_good_arguments_and_the_shipped_task_files_validate(rh, tmp_path):
    # One good case through the real CLI; the unit tests run the whole table.
    name, args = validation_cases.GOOD_ARGUMENTS[-2]
    proc = _validate(rh, tmp_path, name, args)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # The LDAP tasks take existing users from a directory this SQL Keystone does
    # not have; tests/functional/test_ldap_live.py runs them on one that does.
    for task in sorted(t for t in TASKS.glob("*.yaml") if not t.name.startswith("ldap-")):
        cmd = ["task", "validate", str(task), "--deployment", "ks", *_task_args(task, rh.openrc)]
        proc = rh.rally(*cmd, check=False)
        assert proc.returncode == 0, f"{task.name}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
