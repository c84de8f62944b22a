"""SIGINT and SIGTERM during the load of ``keystone-bench run`` keep what was measured.

A real local Keystone, a long token workload with our own contexts, and a
signal once some iterations are done: the command exits 130 (SIGINT) or 143
(SIGTERM) within SIGNAL_TO_EXIT_S of the signal, Rally's JSON and HTML and our summary
hold the iterations that ran and say they were interrupted, and nothing is
left: no process of the run, no project and no user but Keystone's own.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rally_keystone_bench.deploy import process
from rally_keystone_bench.verdicts import results

# Not serial: the bounds below are wall clock, but generous ones (an exit within
# 120 s that takes 8.5 s idle and at most 83 s measured at load 10; a gate's exit
# within 60 s), so they hold beside the other xdist worker's load (load 2 to 4).
pytestmark = [pytest.mark.functional]

WAIT_FOR_LOAD_S = 900  # a busy 2-core machine: installing nothing, starting Keystone
# From the signal to the exit: Rally's runner stops (it polls every 2 s), the
# contexts clean up, two rally report processes, the Keystone stops. The aim is
# 30 s: 8.5 s on 2 idle cores (2026-11-23); on 2 busy cores (load 10) it took
# 50 to 83 s (2026-11-22), each rally process needing 10-15 s to start, so the
# bound allows for that. The test prints the time (pytest -s).
SIGNAL_TO_EXIT_S = float(os.environ.get("KEYSTONE_BENCH_SIGNAL_TO_EXIT_S", "120"))


def long_task(path: Path) -> Path:
    task = {
        "version": 2,
        "title": "long",
        "subtasks": [
            {
                "title": "rescope tokens for a long time",
                "scenario": {"KeystoneTokens.authenticate": {"method": "token"}},
                "runner": {"constant": {"times": 100000, "concurrency": 2}},
                "contexts": {
                    "keystone_tenants": {"tenants": 2, "resource_management_workers": 1},
                    "keystone_users": {"users_per_tenant": 2, "resource_management_workers": 1},
                },
                "sla": {"failure_rate": {"max": 0}},
            }
        ],
    }
    path.write_text(json.dumps(task))
    return path


def iterations_done(log: Path) -> int:
    try:
        return log.read_text(errors="replace").count(" END: ")
    except OSError:
        return 0


def leftover_processes(root: Path) -> list[str]:
    """Processes whose command line names a file of this run."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(root) in cmd and process.is_alive(int(entry.name)):
                found.append(f"{entry.name}: {cmd[:120]}")
    return found


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_load_keeps_results_and_leaves_nothing(tmp_path, sig, code):
    """The signal is sent once Rally's log shows 10 iterations done: during the load, by
    construction (100000 iterations cannot end first). Slack: SIGNAL_TO_EXIT_S (120 s) from
    the signal to the exit, for 8.5 s idle and up to 83 s measured on a busy machine."""
    task = long_task(tmp_path / "long.json")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rally_keystone_bench.cli", "run", str(task),
         "--reports-dir", "reports"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT_FOR_LOAD_S
        log = None
        while time.monotonic() < deadline and proc.poll() is None:
            logs = list(tmp_path.glob("reports/*/long.rally.log"))
            if logs and iterations_done(logs[0]) >= 10:
                log = logs[0]
                break
            time.sleep(1)
        assert log is not None, "the load never started: " + (
            proc.stderr.read() if proc.poll() else ""
        )
        signalled = time.monotonic()
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)  # Ctrl-C in a terminal: the whole foreground group
        else:
            proc.send_signal(sig)  # kill PID
        out, err = proc.communicate(timeout=SIGNAL_TO_EXIT_S)
        print(f"{signal.Signals(sig).name}: exit {time.monotonic() - signalled:.1f} s after it")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == code, err[-3000:]
    assert f"interrupted by {signal.Signals(sig).name}" in err

    out_dir = log.parent
    workloads = results.load(out_dir / "long.json")
    assert workloads and workloads[0].iterations >= 10
    assert (out_dir / "long.html").stat().st_size > 0
    summary = (out_dir / "long-summary" / "summary.json").read_text()
    assert f"interrupted by {signal.Signals(sig).name}" in summary
    assert "interrupted by" in out and str(out_dir) in out

    assert leftover_processes(tmp_path) == []
    (db,) = tmp_path.glob(".keystone-bench/runs/*/keystone/keystone.db")
    with sqlite3.connect(db) as conn:
        projects = {r[0] for r in conn.execute("SELECT name FROM project WHERE is_domain = 0")}
        users = {r[0] for r in conn.execute("SELECT name FROM local_user")}
    assert projects <= {"admin", "service"} and users == {"admin"}


def test_gate_signalled_while_both_keystones_start_exits_and_leaves_nothing(tmp_path):
    """SIGTERM while the gate's two Keystones start in their threads: both starts give
    up, nothing they spawned survives, and the gate exits 143 at once, not after
    Keystone's start timeout (120 s).

    Slack: the signal goes when a server.log exists (uWSGI spawned), polled every
    0.1 s; Keystone answers only seconds later, once its workers loaded the app,
    so the signal lands in the start with seconds to spare. The exit may take 60 s
    (stopping what started), half of the 120 s the old code sat out; it took 15.9 s
    at load 10 to 17, the whole test 25 s (doc/source/gate-ci.rst)."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rally_keystone_bench.cli", "gate",
         "--baseline", "keystone", "--candidate", "keystone",
         "--task", str(root / "tasks" / "gate.yaml"), "--reports-dir", "reports"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT_FOR_LOAD_S
        while time.monotonic() < deadline and proc.poll() is None:
            # A server spawned, not yet answering: the start threads are waiting on it.
            if list(tmp_path.glob(".keystone-bench/runs/gate-*/*/keystone/server.log")):
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        # Well under the 120 s a start waits for Keystone, which the old code sat out.
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - signalled
        print(f"gate, SIGTERM during start: exit {took:.1f} s after it")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in err
    assert leftover_processes(tmp_path) == []
