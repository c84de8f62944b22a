"""Sizes this machine cannot hold are refused with the limit (issue 27, item 6)."""

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import limits


@pytest.mark.parametrize(
    "argv, said",
    [
        (["keystone", "up", "--nodes", "100", "--db", "postgresql"], "server processes: more"),
        (
            ["load", "--scenario", "authenticate", "--rate", "1e12", "--duration", "1e6"],
            "requests/s each, measured",
        ),  # fmt: skip
        (
            ["load", "--scenario", "authenticate", "--rate", "2000", "--duration", "1e6"],
            "samples one run keeps in memory",
        ),  # fmt: skip
    ],
)
def test_too_big_is_refused_before_anything_starts(tmp_path, capsys, argv, said):
    assert cli.main([*argv, *(["--run-dir", str(tmp_path / "ks")] if "up" in argv else [])]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err
    assert not (tmp_path / "ks").exists()


def test_a_matrix_row_of_100_nodes_is_refused(tmp_path, capsys):
    f = tmp_path / "d.yaml"
    f.write_text("big:\n  nodes: 100\n  db: postgresql\n")
    assert cli.main(["matrix", "--deployments", str(f), "--task", "tasks/gate.yaml"]) == 2
    assert "100 node(s) x 2 worker(s)" in capsys.readouterr().err


def test_the_memory_limit_counts_every_server_process(monkeypatch):
    monkeypatch.setattr(limits, "cores", lambda: 64)
    monkeypatch.setattr(limits, "memory_mib", lambda: 4096)  # half: 2048 MiB, 13 processes
    limits.check_size(3, 3)  # 3 x (3 + 1) x 150 = 1800 MiB
    with pytest.raises(Exception, match="about 2400 MiB"):
        limits.check_size(4, 3)
