"""capacity and load on a cloud, cut short: the cleanup command from their recorded workloads.

``run --existing-cloud`` printed it (issue 27 item 5); a capacity probe or a
``load --engine rally`` task cut short on a cloud leaves the same names and
must print the same line. Rally itself is replaced here by a task run whose
workloads sit in a real Rally-shaped SQLite database, as Rally writes them
when the task starts.
"""

from __future__ import annotations

import contextlib
import sqlite3
import types
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.driver import left_behind, targets
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.engines.locust import setup as locust_setup
from rally_keystone_bench.errors import BenchError, Interrupted
from rally_keystone_bench.verbs import load

AUTH_URL = "http://127.0.0.1:5000/v3"
WORKLOADS = ["4a88fea2-1111-4000-8000-000000000001", "0badcafe-2222-4000-8000-000000000002"]


def fake_home(path: Path, task_uuid: str, workloads: list[str]) -> types.SimpleNamespace:
    """A Rally home whose database holds TASK_UUID's WORKLOADS; every rally command fails."""
    path.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(path / "rally.sqlite")) as conn, conn:
        conn.execute("CREATE TABLE workloads (id INTEGER PRIMARY KEY, uuid TEXT, task_uuid TEXT)")
        conn.executemany(
            "INSERT INTO workloads (uuid, task_uuid) VALUES (?, ?)",
            [(w, task_uuid) for w in workloads],
        )
    return types.SimpleNamespace(
        path=path,
        rally=lambda *a, **k: types.SimpleNamespace(returncode=1, stdout="", stderr=""),
        quiet_config=lambda: None,
    )


def task_run(home, tmp_path: Path, rc: int = -9) -> rally_task.TaskRun:
    run = rally_task.TaskRun(home, tmp_path / "probe.yaml", tmp_path / "probe.rally.log")
    run.log_path.write_text("")
    run.uuid, run.rc = "e16c1366-ecc3-442d-9ece-34a697a07cd8", rc
    return run


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    """OS_* variables of a cloud, and a prepared env on it whose Rally home is fake_home."""
    monkeypatch.chdir(tmp_path)
    for k, v in dict(
        OS_AUTH_URL=AUTH_URL, OS_USERNAME="admin", OS_PASSWORD="pw", OS_PROJECT_NAME="admin"
    ).items():
        monkeypatch.setenv(k, v)
    home = fake_home(tmp_path / "home", "e16c1366-ecc3-442d-9ece-34a697a07cd8", WORKLOADS)

    @contextlib.contextmanager
    def prepared_env(run_dir, **kw):
        assert kw.get("cloud") is not None
        yield targets.ReadyEnv(home, "env", AUTH_URL)

    monkeypatch.setattr(targets, "prepared_env", prepared_env)
    return home


def test_the_command_names_each_recorded_workload_of_a_killed_task(tmp_path):
    run = task_run(
        fake_home(tmp_path / "home", "e16c1366-ecc3-442d-9ece-34a697a07cd8", WORKLOADS), tmp_path
    )
    outcome = left_behind.outcome_of(run)
    assert outcome.workload_uuids == WORKLOADS and outcome.may_have_left
    (line,) = left_behind.left_behind_lines([outcome], AUTH_URL, None)
    assert line.startswith("rally task start exited -9 before its cleanup ended")
    assert "rkb-4a88fea2-*, c_rally_4a88fea2_*, rkb-0badcafe-*, c_rally_0badcafe_*" in line
    assert line.endswith("keystone-bench cleanup --workload-id 4a88fea2 --workload-id 0badcafe")


def test_a_task_that_ended_and_cleaned_up_says_nothing(tmp_path):
    run = task_run(
        fake_home(tmp_path / "home", "e16c1366-ecc3-442d-9ece-34a697a07cd8", WORKLOADS),
        tmp_path,
        rc=0,
    )
    assert left_behind.left_behind_lines([left_behind.outcome_of(run)], AUTH_URL, None) == []


def test_a_context_that_said_it_left_something_is_named(tmp_path):
    run = task_run(
        fake_home(tmp_path / "home", "e16c1366-ecc3-442d-9ece-34a697a07cd8", WORKLOADS),
        tmp_path,
        rc=0,
    )
    run.log_path.write_text("keystone_users cleanup: 2 users left behind\n")
    (line,) = left_behind.left_behind_lines([left_behind.outcome_of(run)], AUTH_URL, "s.yaml")
    assert line.startswith("a context's cleanup failed.")
    assert line.endswith(f"--workload-id 0badcafe --spec {Path('s.yaml').resolve()}")


def test_a_capacity_probe_killed_on_a_cloud_prints_the_cleanup(
    cloud, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(rally_task, "start_task", lambda *a, **k: task_run(cloud, tmp_path))
    argv = ["capacity", "--scenario", "authenticate", "--target", "cloud"]
    argv += ["--low", "2", "--high", "4", "--warmup", "0", "--window", "5"]
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert "rally task start exited -9, killed" in err
    said = [ln for ln in out.splitlines() if "keystone-bench cleanup" in ln]
    assert len(said) == 1, out
    assert said[0].startswith("rally task start exited -9 before its cleanup ended")
    assert f"in the cloud at {AUTH_URL}" in said[0]
    assert said[0].endswith("keystone-bench cleanup --workload-id 4a88fea2 --workload-id 0badcafe")


def test_load_rally_interrupted_twice_on_a_cloud_prints_the_cleanup(
    cloud, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(load, "cloud_credential", lambda spec: {"auth_url": AUTH_URL})

    def interrupted_twice(*a, **k):
        exc = Interrupted(2)
        exc.run, exc.twice = task_run(cloud, tmp_path, rc=-1), True
        raise exc

    monkeypatch.setattr(rally_task, "start_task", interrupted_twice)
    argv = ["load", "--engine", "rally", "--target", "cloud", "--scenario", "authenticate"]
    assert cli.main([*argv, "--rate", "2", "--duration", "2"]) == 130
    out, _ = capsys.readouterr()
    said = [ln for ln in out.splitlines() if "keystone-bench cleanup" in ln]
    assert len(said) == 1, out
    assert said[0].startswith("interrupted twice: cleanup cut short.")
    assert said[0].endswith("keystone-bench cleanup --workload-id 4a88fea2 --workload-id 0badcafe")


def test_load_rally_on_the_mock_says_nothing_of_a_cloud(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    home = fake_home(tmp_path / "home", "e16c1366-ecc3-442d-9ece-34a697a07cd8", WORKLOADS)

    @contextlib.contextmanager
    def prepared_env(run_dir, **kw):
        yield targets.ReadyEnv(home, "env", AUTH_URL)

    def interrupted_twice(*a, **k):
        exc = Interrupted(2)
        exc.run, exc.twice = task_run(home, tmp_path, rc=-1), True
        raise exc

    monkeypatch.setattr(targets, "prepared_env", prepared_env)
    monkeypatch.setattr(rally_task, "start_task", interrupted_twice)
    argv = ["load", "--engine", "rally", "--target", "mock", "--scenario", "authenticate"]
    assert cli.main([*argv, "--rate", "2", "--duration", "2"]) == 130
    assert "keystone-bench cleanup" not in capsys.readouterr().out


# -- load --engine locust: the master deletes its own users; when it could not ---------
class FakeAdmin:
    """A cloud holding LEFT (kind -> names), found by prefix as Keystone's filter does."""

    left: dict[str, list[str]] = {}

    def __init__(self, credential, pool_size=8):
        assert credential["auth_url"] == AUTH_URL

    def list_prefixed(self, kind, prefix, domain_id=None):
        return [{"id": n, "name": n} for n in self.left.get(kind, []) if n.startswith(prefix)]


def locust_on_a_cloud(monkeypatch, left_for_run, master):
    """load --engine locust --target cloud whose master does MASTER(run_id); the cloud then
    holds LEFT_FOR_RUN(run_id). The run id the verb printed, its stdout and exit code."""
    seen = {}

    def run_load(settings, credential, out_dir, say, run_id=None, **kw):
        seen["run_id"] = run_id
        FakeAdmin.left = left_for_run(run_id)
        master(run_id)

    monkeypatch.setattr(load, "cloud_credential", lambda spec: {"auth_url": AUTH_URL})
    monkeypatch.setattr(load.engine, "run_load", run_load)
    monkeypatch.setattr(locust_setup, "AdminClient", FakeAdmin)
    argv = ["load", "--engine", "locust", "--target", "cloud", "--scenario", "authenticate"]
    return seen, argv + ["--rate", "2", "--duration", "2"]


def killed_master(run_id):
    raise BenchError("the Locust master ended without a result: Killed")


def test_a_killed_locust_master_on_a_cloud_prints_the_cleanup_of_what_it_left(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    seen, argv = locust_on_a_cloud(
        monkeypatch,
        lambda r: {
            "users": [f"kbl-{r}-u0", f"kbl-{r}-u1", "kbl-00000000-u0"],
            "projects": [f"kbl-{r}"],
        },
        killed_master,
    )
    assert cli.main(argv) == 2
    run_id = seen["run_id"]
    assert len(run_id) == 8
    out = capsys.readouterr().out
    said = [ln for ln in out.splitlines() if "keystone-bench cleanup" in ln]
    assert len(said) == 1, out
    assert f"user kbl-{run_id}-u0, user kbl-{run_id}-u1, project kbl-{run_id}." in said[0]
    assert "kbl-00000000" not in said[0]  # another load's
    assert said[0].endswith(f"keystone-bench cleanup --load {run_id}")


def test_a_locust_master_that_cleaned_up_says_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _, argv = locust_on_a_cloud(
        monkeypatch, lambda r: {"users": ["kbl-00000000-u0"]}, killed_master
    )
    assert cli.main(argv) == 2
    assert "keystone-bench cleanup" not in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["", "4a88fea", "kbl-4a88fea2", "4a88fea2*", "../x"])
def test_cleanup_load_refuses_anything_but_an_id_in_one_line(bad, capsys, monkeypatch):
    for k in ("OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD"):
        monkeypatch.setenv(k, "x")
    assert cli.main(["cleanup", "--load", bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--load" in err[0]


def test_a_killed_locust_master_in_a_capacity_probe_on_a_cloud_prints_its_cleanup(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    for k, v in dict(
        OS_AUTH_URL=AUTH_URL, OS_USERNAME="admin", OS_PASSWORD="pw", OS_PROJECT_NAME="admin"
    ).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(targets, "check_reachable", lambda url: None)
    seen, _ = locust_on_a_cloud(
        monkeypatch, lambda r: {"users": [f"kbl-{r}-u0"], "projects": [f"kbl-{r}"]}, killed_master
    )
    argv = ["capacity", "--scenario", "authenticate", "--target", "cloud", "--engine", "locust"]
    assert cli.main([*argv, "--low", "2", "--high", "4", "--warmup", "0", "--window", "5"]) == 2
    out = capsys.readouterr().out
    said = [ln for ln in out.splitlines() if "keystone-bench cleanup" in ln]
    assert len(said) == 1, out
    run_id = seen["run_id"]
    assert f"user kbl-{run_id}-u0, project kbl-{run_id}." in said[0]
    assert said[0].endswith(f"keystone-bench cleanup --load {run_id}")
