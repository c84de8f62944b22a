"""keystone down signals only the processes it started, never a reused pid."""

import json
import subprocess
import sys

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import process


@pytest.fixture
def bystander():
    """A process that keystone-bench did not start."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    process.identity(proc.pid)  # waits until it runs its own command line
    yield proc
    proc.kill()
    proc.wait()


def write_state(run_dir, pid: int, record: dict | None) -> None:
    state = {"port": 1, "pids": {"server": pid}}
    if record is not None:
        state["processes"] = {"server": record}
    (run_dir / "state.json").write_text(json.dumps(state))


def down(run_dir, capsys) -> str:
    assert cli.main(["keystone", "down", "--run-dir", str(run_dir)]) == 0
    return capsys.readouterr().err


def test_a_pid_with_another_start_time_is_not_signalled(tmp_path, bystander, capsys):
    record = process.identity(bystander.pid)
    record["start_time"] -= 1  # what a recycled pid looks like
    write_state(tmp_path, bystander.pid, record)
    assert "no longer the process" in down(tmp_path, capsys)
    assert bystander.poll() is None


def test_a_pid_without_a_recorded_start_time_is_not_signalled(tmp_path, bystander, capsys):
    write_state(tmp_path, bystander.pid, None)
    assert "no full record" in down(tmp_path, capsys)
    assert bystander.poll() is None


def test_a_pid_running_another_program_is_not_signalled(tmp_path, bystander, capsys):
    record = process.identity(bystander.pid)
    record["cmdline"] = ["/usr/bin/uwsgi", "--ini", "keystone.ini"]
    write_state(tmp_path, bystander.pid, record)
    down(tmp_path, capsys)
    assert bystander.poll() is None


def test_the_recorded_process_is_stopped(tmp_path, capsys):
    pid = process.spawn([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "log")
    record = process.identity(pid)
    assert record["cmdline"][1:] == ["-c", "import time; time.sleep(60)"]
    write_state(tmp_path, pid, record)
    down(tmp_path, capsys)
    assert not process.is_alive(pid)
