"""keystone down never signals a process whose record lacks part of its identity.

A pid with only its correct start time, or without its boot id or command
line, may name a process keystone-bench did not start (issue 27, item 14).
"""

import json
import subprocess
import sys

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import process


@pytest.fixture
def bystander():
    """A `sleep` keystone-bench did not start."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    process.identity(proc.pid)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize(
    "keep",
    [("pid", "start_time"), ("pid", "start_time", "cmdline"), ("pid", "start_time", "boot_id")],
    ids=["pid-and-start-time", "no-boot-id", "no-command-line"],
)
def test_a_thin_record_is_not_signalled(tmp_path, bystander, capsys, keep):
    full = process.identity(bystander.pid)
    record = {k: full[k] for k in keep}
    state = {"port": 1, "pids": {"server": bystander.pid}, "processes": {"server": record}}
    (tmp_path / "state.json").write_text(json.dumps(state))
    assert cli.main(["keystone", "down", "--run-dir", str(tmp_path)]) == 0
    assert "no full record" in capsys.readouterr().err
    assert bystander.poll() is None  # still running: never signalled


def test_a_full_record_still_names_its_process(bystander):
    assert process.is_same_process(process.identity(bystander.pid))
