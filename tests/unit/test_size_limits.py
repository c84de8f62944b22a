"""Sizes this machine cannot hold are refused with the limit (issue 27, item 6)."""

import os

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


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["--high", "1e12"],
            "--high 1e+12 rps is above what Rally's pooled_rps runner sends from this host "
            "(1171 requests/s, measured): lower it, or add --force to try anyway",
        ),
        (["--high", "600", "--runner", "rps", "--no-ramp"], "Rally's rps runner sends"),
        (["--high", "5000", "--engine", "locust"], "Locust engine's workers send"),
        (
            ["--high", "2000", "--engine", "locust", "--window", "3000"],
            "plans 6.12e+06 requests in a probe",
        ),
    ],
)
def test_a_capacity_rate_beyond_the_generator_is_refused(tmp_path, capsys, argv, said):
    base = ["capacity", "--scenario", "validate", "--target", "mock"]
    assert cli.main([*base, *argv, "--reports-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["capacity", "--scenario", "validate", "--target", "mock", "--high", "1e12"],
        ["load", "--scenario", "validate", "--rate", "3000", "--duration", "1"],
        [
            "load",
            "--scenario",
            "validate",
            "--rate",
            "3000",
            "--duration",
            "1",
            "--engine",
            "rally",
        ],
    ],
)
def test_force_gets_past_the_generator_bound_and_says_so(tmp_path, capsys, monkeypatch, argv):
    # A later check refuses (too few points; no cloud credentials): nothing starts,
    # but only after the bound let the rate through.
    for k in [k for k in os.environ if k.startswith("OS_")]:
        monkeypatch.delenv(k)
    later = ["--low", "0.001", "--window", "1"] if argv[0] == "capacity" else ["--target", "cloud"]
    assert cli.main([*argv, "--force", *later, "--reports-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2, err
    assert err[0].startswith("keystone-bench: --force: ") and "measured" in err[0]
    assert "3 points" in err[1] or "OS_" in err[1]
    assert not (tmp_path / "r").exists()
