"""matrix: deployment files, the study table."""

import json
import sys
from pathlib import Path

import pytest

from rally_keystone_bench import cli, matrix, results
from rally_keystone_bench.errors import BenchError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_unknown_key_exits_2_naming_it(tmp_path, capsys):
    f = tmp_path / "d.yaml"
    f.write_text("one:\n  workers: 1\ntwo:\n  wrokers: 2\n")
    rc = cli.main(["matrix", "--deployments", str(f), "--task", "tasks/gate.yaml"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "'wrokers'" in err and "'two'" in err


def test_bad_value_is_refused(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("one:\n  server: tomcat\n")
    with pytest.raises(BenchError, match="tomcat"):
        matrix.load_deployments(str(f))


def test_values_get_their_field_types(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("one:\n  workers: '4'\n  password-hash-rounds: 5\n")
    dep = matrix.load_deployments(str(f))["one"]
    assert dep.workers == 4 and dep.password_hash_rounds == 5


@pytest.mark.parametrize("name", ["workers.yaml", "releases.yaml", "backends.yaml"])
def test_shipped_deployment_files_hold_known_keys_only(name):
    import yaml

    data = yaml.safe_load((ROOT / "deployments" / name).read_text())
    assert len(data) >= 4
    for dep_name, values in data.items():
        matrix.deployment_from_mapping(values or {}, dep_name)


def test_workers_file_compares_1_2_and_4_workers_and_apache():
    deps = matrix.load_deployments(str(ROOT / "deployments" / "workers.yaml"))
    assert sorted(d.workers for d in deps.values() if d.server == "uwsgi") == [1, 2, 4]
    assert any(d.server == "apache" for d in deps.values())


def _workloads(concurrency: int, seed: int) -> list[results.Workload]:
    data = synthetic.iterations(30, concurrency=concurrency, seed=seed)
    wl = synthetic.workload(data, runner={"times": 30, "concurrency": concurrency})
    return results.from_report(synthetic.report([wl]))


def test_table_has_a_row_per_deployment_setting_and_action(tmp_path):
    rows = matrix.build_table([("uwsgi-1w", _workloads(4, 1)), ("uwsgi-2w", _workloads(4, 2))])
    keys = {(r["deployment"], r["setting"], r["action"]) for r in rows}
    assert ("uwsgi-1w", "concurrency 4", "keystone.issue_token") in keys
    assert ("uwsgi-2w", "concurrency 4", "total") in keys
    row = rows[0]
    for col in ("min", "avg", "max", "p90", "p95", "success_percent", "count", "throughput"):
        assert col in row
    assert row["min"] <= row["avg"] <= row["max"]
    html, js = matrix.write_report(rows, tmp_path, "tasks/x.yaml", {"uwsgi-1w": "keystone"})
    assert json.loads(js.read_text())["rows"][0]["deployment"] == "uwsgi-1w"
    assert "uwsgi-2w" in html.read_text()
    text = matrix.format_table(rows)
    assert "uwsgi-1w" in text and "p95" in text


def test_a_deployment_that_fails_loses_no_other_results(tmp_path, monkeypatch, capsys):
    import contextlib

    from rally_keystone_bench import runner

    f = tmp_path / "d.yaml"
    f.write_text("one:\n  workers: 1\nbroken:\n  workers: 2\nthree:\n  workers: 4\n")
    task = tmp_path / "t.json"
    task.write_text("{}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runner, "build_envs", lambda deps, root: None)

    @contextlib.contextmanager
    def prepared_env(run_dir, deployment):
        if deployment.workers == 2:
            raise BenchError("Keystone exited during start; see its log")
        yield None, "env"

    def run_task(home, env, task_file, task_args, out_dir):
        return runner.TaskOutcome(task_file, "uuid", 0, workloads=_workloads(4, 1))

    monkeypatch.setattr(runner, "prepared_env", prepared_env)
    monkeypatch.setattr(runner, "run_task", run_task)
    code = cli.main(
        ["matrix", "--deployments", str(f), "--task", str(task), "--reports-dir", "reports"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "1 of 3 deployment runs failed (broken)" in err
    (out,) = (tmp_path / "reports").iterdir()
    doc = json.loads((out / "matrix.json").read_text())
    assert {r["deployment"] for r in doc["rows"]} == {"one", "three"}
    assert "Keystone exited during start" in doc["failed"]["broken"]
    assert "Keystone exited during start" in (out / "matrix.html").read_text()
