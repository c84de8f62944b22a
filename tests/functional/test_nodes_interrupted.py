"""An interrupt while nodes start leaves no node running (issue 27, item 1).

``keystone up --nodes N`` records each process in state.json as it starts
it: Ctrl-C stops every node already started, and after a SIGKILL of the CLI
itself ``keystone down`` still finds and stops them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.functional, pytest.mark.slow]

UP = ["keystone", "up", "--nodes", "4", "--db", "postgresql", "--workers", "1"]
UP += ["--password-hash-rounds", "4"]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rally_keystone_bench.cli", *args]


def processes_of(run_dir: Path) -> list[str]:
    """Command lines of live processes that name RUN_DIR."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(run_dir) in argv and state not in ("Z", "X"):
            found.append(argv)
    return found


def up_until(run_dir: Path, line: str, up: list[str] = UP) -> subprocess.Popen:
    """Start ``keystone up`` (UP: its command line) and return once it printed LINE."""
    proc = subprocess.Popen(cli(*up, "--run-dir", str(run_dir)), stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    for got in proc.stderr:
        seen.append(got)
        if line in got:
            return proc
    proc.wait()
    pytest.fail(f"keystone up ended before {line!r}: {''.join(seen)[-2000:]}")


def test_sigint_while_nodes_start_stops_every_node(tmp_path):
    """SIGINT once keystone up says it starts node2: exit 130 within 120 s, no process
    left. The signal lands in the start by construction (node2's start line). The
    120 s equals one Keystone start's own timeout (START_TIMEOUT); no time from such
    a signal to the exit was measured."""
    run_dir = tmp_path / "ks"
    proc = up_until(run_dir, "starting Keystone node2")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    assert processes_of(run_dir) == []


def test_keystone_down_after_sigkill_stops_the_nodes_started(tmp_path):
    """The nodes recorded before the kill (node1, node2) are stopped by `down`.

    A SIGKILL between a spawn and its record cannot be caught: whatever the
    CLI started after node2 is this test's to clean up, by pid.
    """
    run_dir = tmp_path / "ks"
    proc = up_until(run_dir, "starting Keystone node3")
    proc.kill()  # no cleanup at all: only state.json knows
    proc.wait()
    early = [run_dir / "node1", run_dir / "node2"]
    try:
        assert any(processes_of(d) for d in early), "no node was running: nothing tested"
        down = subprocess.run(
            cli("keystone", "down", "--run-dir", str(run_dir)), capture_output=True, text=True
        )
        assert down.returncode == 0, down.stderr
        assert [p for d in early for p in processes_of(d)] == []
    finally:
        kill_all(run_dir)
        subprocess.run(cli("keystone", "down", "--run-dir", str(run_dir)), capture_output=True)


def kill_all(run_dir: Path) -> None:
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace")
            if entry.name.isdigit() and str(run_dir) in argv:
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue
