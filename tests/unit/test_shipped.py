"""Task and deployment files ship in the package: every verb finds its defaults anywhere."""

from __future__ import annotations

from rally_keystone_bench import cli, shipped
from rally_keystone_bench.driver import workspace
from rally_keystone_bench.verbs import matrix


def test_default_tasks_resolve_from_an_empty_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gate = cli.build_parser().parse_args(["gate", "--baseline", "a", "--candidate", "b"])
    path = workspace.task_file(gate.task)
    assert path == shipped.DATA / "tasks" / "gate-cloud.yaml" and path.is_file()
    assert workspace.task_file("token-suite.yaml").name == "token-suite.yaml"
    assert matrix.load_deployments("deployments/workers.yaml")


def test_a_users_own_file_wins_over_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "gate.yaml").write_text("version: 2\n")
    assert workspace.task_file("tasks/gate.yaml").resolve() == tmp_path / "tasks" / "gate.yaml"


def test_tasks_verb_lists_and_copies_every_shipped_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["tasks"]) == 0
    listed = capsys.readouterr().out.split()
    names = {p.rsplit("/", 1)[-1] for p in listed}
    assert {"gate.yaml", "capacity-probe.yaml", "token-suite.yaml", "workers.yaml"} <= names
    assert cli.main(["tasks", "--copy", "mine"]) == 0
    assert (tmp_path / "mine" / "tasks" / "gate.yaml").read_text() == (
        shipped.DATA / "tasks" / "gate.yaml"
    ).read_text()
    assert cli.main(["tasks", "--copy", "mine"]) == 2  # never overwrites
