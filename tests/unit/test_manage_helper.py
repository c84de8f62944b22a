"""keystone-manage's commands through one helper that imports Keystone once.

A new deployment used to run four keystone-manage processes, each paying
Keystone's imports (about 3 s of CPU each on this project's 2-core
machines). The helper imports ``keystone.cmd.manage`` once and forks a child
per command. These tests run it against a fake ``keystone.cmd.manage`` (the
real one is exercised by every functional test that starts a Keystone):
what a user of the deployment notices is the same exit codes, messages and
logs as keystone-manage's, a password that stays off every command line
and log, and nothing left running when a start is interrupted.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from rally_keystone_bench.deploy import bootstrap, process
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.run_files import RunFiles
from rally_keystone_bench.errors import BenchError

FAKE_MANAGE = """
import os, sys, time

with open(os.environ["FAKE_IMPORTS"], "a") as out:
    out.write(f"{os.getpid()}\\n")


def main():
    command = sys.argv[3]
    print("argv:", " ".join(sys.argv[1:]))
    print("password given:", bool(os.environ.get("OS_BOOTSTRAP_PASSWORD")))
    if command == "fail":
        sys.exit(3)
    if command == "raise":
        raise RuntimeError("the schema is broken")
    if command == "sleep":
        with open(os.environ["FAKE_SLEEPING"], "a") as out:
            out.write(f"{os.getpid()}\\n")
        time.sleep(60)
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A run directory and a 'venv' whose python imports a fake keystone.cmd.manage."""
    lib = tmp_path / "lib" / "keystone" / "cmd"
    lib.mkdir(parents=True)
    (lib.parent / "__init__.py").write_text("")
    (lib / "__init__.py").write_text("")
    (lib / "manage.py").write_text(FAKE_MANAGE)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "lib"} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    monkeypatch.setenv("FAKE_IMPORTS", str(tmp_path / "imports"))
    monkeypatch.setenv("FAKE_SLEEPING", str(tmp_path / "sleeping"))
    return RunFiles(Deployment(), run_dir), venv, tmp_path


def test_four_commands_import_keystone_once_and_log_as_keystone_manage_did(fake):
    run, venv, tmp = fake
    with bootstrap.Manage(run, venv) as manage:
        manage.run(("db_sync",), ("fernet_setup", "--keystone-user", "0"), ("credential_setup",))
        manage.run(
            ("bootstrap", "--bootstrap-username", "admin"),
            env={"OS_BOOTSTRAP_PASSWORD": "s3cret-pw"},
        )
    assert len((tmp / "imports").read_text().split()) == 1
    for name in ("db_sync", "fernet_setup", "credential_setup", "bootstrap"):
        log = run.run_dir / f"keystone-manage-{name}.log"
        assert f"argv: --config-file {run.config_path} {name}" in log.read_text()
        assert os.stat(log).st_mode & 0o077 == 0
    assert "password given: True" in (run.run_dir / "keystone-manage-bootstrap.log").read_text()
    assert "password given: False" in (run.run_dir / "keystone-manage-db_sync.log").read_text()
    for path in run.run_dir.iterdir():
        assert "s3cret-pw" not in path.read_text(errors="replace"), path


@pytest.mark.parametrize(
    "command, said",
    [
        ("fail", "keystone-manage fail failed (exit 3); see "),
        ("raise", "keystone-manage raise failed (exit 1); see "),
    ],
)
def test_a_failed_command_is_named_with_its_exit_code_and_log(fake, command, said):
    run, venv, _ = fake
    with pytest.raises(BenchError) as caught:
        with bootstrap.Manage(run, venv) as manage:
            manage.run(("db_sync",), (command,))
    assert str(caught.value) == said + str(run.run_dir / f"keystone-manage-{command}.log")
    if command == "raise":
        log = (run.run_dir / "keystone-manage-raise.log").read_text()
        assert "RuntimeError: the schema is broken" in log


def test_a_keystone_that_does_not_import_says_where_to_look(fake):
    run, venv, tmp = fake
    (tmp / "lib" / "keystone" / "cmd" / "manage.py").write_text("import no_such_module\n")
    with pytest.raises(
        BenchError,
        match=r"^keystone-manage could not start \(exit 1\); see .*keystone-manage\.log$",
    ):
        with bootstrap.Manage(run, venv) as manage:
            manage.run(("db_sync",))
    assert "No module named 'no_such_module'" in (run.run_dir / "keystone-manage.log").read_text()


def _running(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_an_interrupted_start_leaves_no_keystone_manage_running(fake):
    """A signal while a command runs (as Ctrl-C during a start): the helper and its children go."""
    run, venv, tmp = fake

    class Interrupted(Exception):
        pass

    def interrupt(*_):
        raise Interrupted

    main = threading.get_ident()

    def signal_once_a_command_sleeps() -> None:
        deadline = time.monotonic() + 30
        while not (tmp / "sleeping").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        signal.pthread_kill(main, signal.SIGALRM)

    previous = signal.signal(signal.SIGALRM, interrupt)
    watcher = threading.Thread(target=signal_once_a_command_sleeps)
    group = None
    try:
        with pytest.raises(Interrupted):
            with bootstrap.Manage(run, venv) as manage:
                group = manage.proc.pid
                watcher.start()
                manage.run(("sleep",), ("db_sync",))
    finally:
        watcher.join()
        signal.signal(signal.SIGALRM, previous)
    sleeping = [int(pid) for pid in (tmp / "sleeping").read_text().split()]
    assert len(sleeping) == 1
    assert process.group_members(group) == []
    assert not _running(sleeping[0])
