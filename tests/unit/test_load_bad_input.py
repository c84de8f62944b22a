"""keystone-bench load: bad input is one line on stderr, exit 2, before any load."""

from __future__ import annotations

import socket

import pytest

from rally_keystone_bench import cli


@pytest.mark.parametrize(
    "argv, reason",
    [
        (["--rate", "0"], "--rate must be above 0"),
        (["--rate", "-3"], "--rate must be above 0"),
        (["--rate", "nan"], "--rate must be above 0"),
        (["--locust-workers", "0"], "must be at least 1"),
        (["--duration", "0"], "--duration must be above 0"),
        (["--expect-timeout", "0"], "--expect-timeout must be above 0"),
        (["--users", "1", "--locust-workers", "2"], "fewer than the 2 workers"),
        (["--master-bind", "192.0.2.7:5557"], "cannot listen on 192.0.2.7:5557"),
        (["--master-bind", "127.0.0.1:port"], "not a number"),
        (["--engine", "rally", "--locust-workers", "2"], "runs on this host only"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, reason):
    base = ["load", "--scenario", "validate", "--reports-dir", str(tmp_path / "r")]
    rc = cli.main(base + argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and reason in err[0], err
    assert not (tmp_path / "r").exists()  # nothing started, nothing written


def test_a_port_in_use_is_refused(tmp_path, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        rc = cli.main(
            [
                "load",
                "--scenario",
                "validate",
                "--master-bind",
                f"127.0.0.1:{port}",
                "--reports-dir",
                str(tmp_path / "r"),
            ]
        )
    assert rc == 2 and "cannot listen" in capsys.readouterr().err


def test_locustfile_prints_its_path(capsys):
    assert cli.main(["load", "--locustfile"]) == 0
    path = capsys.readouterr().out.strip()
    assert path.endswith("engines/locust/locustfile.py")
