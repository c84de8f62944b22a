"""`rally task validate` refuses each bad KeystoneTokens argument, naming it."""

from __future__ import annotations

import json

import pytest
from test_scenarios_live import TASKS, start_keystone

from rally_keystone_bench.rallyenv import RallyHome, keystone_spec

pytestmark = pytest.mark.functional


@pytest.fixture(scope="module")
def rh(tmp_path_factory):
    ks = start_keystone(tmp_path_factory.mktemp("ks"))
    try:
        home = RallyHome(tmp_path_factory.mktemp("rally"))
        home.create_env("ks", keystone_spec(ks.admin_credentials))
        yield home
    finally:
        ks.stop()


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


@pytest.mark.parametrize(
    "name, args, argument",
    [
        ("KeystoneTokens.authenticate", {"scope": "galaxy"}, "scope"),
        ("KeystoneTokens.authenticate", {"method": "kerberos"}, "method"),
        (
            "KeystoneTokens.authenticate",
            {"method": "application_credential", "scope": "system"},
            "scope",
        ),
        ("KeystoneTokens.validate", {"method": "POST"}, "method"),
        ("KeystoneTokens.validate", {"repetitions": 0}, "repetitions"),
        ("KeystoneTokens.concurrent_create", {"count": 0}, "count"),
        ("KeystoneTokens.concurrent_create", {"count": 10, "parallel": 20}, "parallel"),
        ("KeystoneTokens.concurrent_create", {"scope": "galaxy"}, "scope"),
        ("KeystoneTokens.lifecycle", {"validations": -1}, "validations"),
    ],
)
def test_bad_argument_fails_validation_and_is_named(rh, tmp_path, name, args, argument):
    proc = _validate(rh, tmp_path, name, args)
    assert proc.returncode != 0
    assert f"{argument} is" in proc.stdout + proc.stderr


def test_good_arguments_and_the_shipped_task_files_validate(rh, tmp_path):
    proc = _validate(rh, tmp_path, "KeystoneTokens.concurrent_create", {"count": 5, "parallel": 5})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for task in sorted(TASKS.glob("*.yaml")):
        proc = rh.rally("task", "validate", str(task), "--deployment", "ks", check=False)
        assert proc.returncode == 0, f"{task.name}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
