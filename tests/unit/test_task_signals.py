"""The task driver at a signal: abort, read Rally's output to its end, then Interrupted.

A stand-in for the rally command prints a task uuid and ITER lines until
``rally task abort`` names its task, then prints its cleanup and exits, as
Rally does. No Keystone, no Rally: the driver's side only.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from rally_keystone_bench import writer
from rally_keystone_bench.driver import interrupts, task_reports
from rally_keystone_bench.driver import outcome as task_outcome
from rally_keystone_bench.driver import rally as rally_driver
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.rally import RallyHome
from rally_keystone_bench.errors import Interrupted

UUID = "0badc0de-0000-4000-8000-000000000001"
FAKE_RALLY = f"""#!{sys.executable}
import os, sys, time
home = os.environ["HOME"]
args = sys.argv[1:]
if "abort" in args:
    open(os.path.join(home, "aborted"), "w").close()
    sys.exit(0)
print("Task {UUID}: started", flush=True)
n = 0
while not os.path.exists(os.path.join(home, "aborted")):
    n += 1
    print(f"ITER: {{n}} END: OK", flush=True)
    time.sleep(0.02)
time.sleep(0.3)  # the contexts' cleanup
print("cleanup done: 0 projects left", flush=True)
sys.exit(1)
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    fake = tmp_path / "rally"
    fake.write_text(FAKE_RALLY)
    fake.chmod(0o755)
    monkeypatch.setattr(rally_driver, "rally_executable", lambda: str(fake))
    monkeypatch.setattr(rally_task, "rally_executable", lambda: str(fake))
    h = object.__new__(RallyHome)
    h.path = tmp_path / "home"
    h.path.mkdir()
    h.config_path = h.path / "rally.conf"
    return h


def signal_after(lines: int, log: Path, sig: int, times: int = 1) -> threading.Thread:
    def send() -> None:
        while log.exists() is False or log.read_text().count("END: OK") < lines:
            threading.Event().wait(0.02)
        for _ in range(times):
            os.kill(os.getpid(), sig)
            threading.Event().wait(0.05)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_aborts_the_task_and_rally_is_read_to_its_end(home, tmp_path, sig):
    """A signal after 5 ITER lines: rally task abort, Rally read to its cleanup line.
    Slack: the fake Rally's cleanup takes 0.3 s, against the 120 s the driver waits
    before it stops Rally (ABORT_WAIT_S); the file passed 20 looped runs at load 18
    (doc/source/gate-ci.rst)."""
    log = tmp_path / "t.rally.log"
    signal_after(5, log, sig)
    with interrupts.sigterm_as_interrupt(), pytest.raises(Interrupted) as caught:
        rally_task.start_task(home, "env", tmp_path / "t.json", {}, log)
    assert caught.value.signum == sig and caught.value.exit_code == 128 + sig
    assert caught.value.run.uuid == UUID
    assert (home.path / "aborted").exists()  # rally task abort, not a kill
    assert log.read_text().rstrip().endswith("cleanup done: 0 projects left")


class ReentrantLog:
    """A log whose write() takes a signal halfway, as a BufferedWriter can in C.

    A second write while one is under way is the RuntimeError CPython raises
    ("reentrant call inside <_io.BufferedWriter>").
    """

    def __init__(self, path: Path, sig: int) -> None:
        self._file, self._sig, self._busy, self._lines = open(path, "w"), sig, False, 0

    def write(self, text: str) -> int:
        if self._busy:
            raise RuntimeError("reentrant call inside the log")
        self._busy = True
        try:
            self._lines += 1
            if self._lines == 5:
                os.kill(os.getpid(), self._sig)  # its handler runs before kill returns
            return self._file.write(text)
        finally:
            self._busy = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_in_the_middle_of_a_log_write_still_stops_the_task(
    home, tmp_path, monkeypatch, sig
):
    """The signal comes from inside the 5th log write, synchronously (no race); Rally's
    cleanup then takes 0.3 s of the driver's 120 s, as in the first test."""
    log = tmp_path / "t.rally.log"
    monkeypatch.setattr(writer, "open_stream", lambda p, *a, **k: ReentrantLog(p, sig))
    with interrupts.sigterm_as_interrupt(), pytest.raises(Interrupted) as caught:
        rally_task.start_task(home, "env", tmp_path / "t.json", {}, log)
    assert caught.value.signum == sig
    lines = log.read_text().splitlines()
    note = f"keystone-bench: stopping the task: interrupted by {signal.Signals(sig).name}"
    assert lines[-1] == "cleanup done: 0 projects left"
    assert note in lines[:-1]  # in its place: before Rally's cleanup


def test_run_task_writes_the_reports_of_what_ran(home, tmp_path, monkeypatch):
    """SIGTERM after 5 ITER lines: run_task writes the reports of what ran, and the
    Interrupted carries them. Timing: 0.3 s of cleanup against 120 s, as above."""
    written = []
    monkeypatch.setattr(
        task_reports, "write_reports", lambda h, outcome, *out: written.append(outcome)
    )
    signal_after(5, tmp_path / "out" / "t.rally.log", signal.SIGTERM)
    with interrupts.sigterm_as_interrupt(), pytest.raises(Interrupted) as caught:
        task_reports.run_task(home, "env", Path("t.json"), {}, tmp_path / "out")
    (outcome,) = written
    assert outcome.uuid == UUID and outcome.interrupted == "interrupted by SIGTERM"
    assert caught.value.outcome is outcome


def test_a_second_signal_skips_the_wait(home, tmp_path, monkeypatch):
    """Two SIGINTs 50 ms apart while Rally never stops: the second ends the wait. No
    race: with stop() a no-op the driver would wait 120 s (ABORT_WAIT_S), so the
    second signal always finds it waiting."""
    monkeypatch.setattr(rally_task.TaskRun, "stop", lambda self, why: None)  # Rally never stops
    log = tmp_path / "t.rally.log"
    signal_after(5, log, signal.SIGINT, times=2)
    with interrupts.sigterm_as_interrupt(), pytest.raises(Interrupted) as caught:
        rally_task.start_task(home, "env", tmp_path / "t.json", {}, log)
    assert caught.value.signum == signal.SIGINT
    assert "interrupted again" in log.read_text()
    assert "cleanup done" not in log.read_text()


def test_handlers_are_restored(home):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with interrupts.sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not before[1]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_matrix_keeps_the_interrupted_deployment_in_its_table(tmp_path, monkeypatch, capsys):
    import contextlib
    import json as _json
    import types

    from rally_keystone_bench import cli
    from rally_keystone_bench.driver import targets
    from rally_keystone_bench.verdicts import results as _results

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
    import synthetic

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.yaml").write_text("a: {workers: 1}\n")
    (tmp_path / "t.yaml").write_text(
        "version: 2\ntitle: t\nsubtasks: [{title: s, scenario: {Dummy.dummy: {}}}]\n"
    )
    wls = _results.from_report(synthetic.report([synthetic.workload(synthetic.iterations(20))]))

    @contextlib.contextmanager
    def env(*a, **k):
        yield types.SimpleNamespace(home=None, name="env")

    def interrupted(*a, **k):
        outcome = task_outcome.TaskOutcome(
            Path("t.yaml"), UUID, 1, workloads=wls, interrupted_by=15
        )
        raise Interrupted(15, outcome)

    monkeypatch.setattr(targets, "build_envs", lambda *a, **k: None)
    monkeypatch.setattr(targets, "prepared_env", env)
    monkeypatch.setattr(task_reports, "run_task", interrupted)
    argv = ["matrix", "--deployments", "d.yaml", "--task", "t.yaml", "--reports-dir", "r"]
    assert cli.main(argv) == 143
    (js,) = tmp_path.glob("r/*/matrix.json")
    assert "a (interrupted by SIGTERM)" in _json.dumps(_json.loads(js.read_text()))


def test_a_watcher_stop_marks_the_task_aborting_without_starting_rally_task_abort(home, tmp_path):
    """A probe's watcher stops the task (an overloaded probe): Rally's engine reads the
    status from our Rally home's database, so it is set there at once; ``rally task
    abort`` is started only where it cannot be (seen: during its start-up a ramp at
    30 rps queued 55 more requests a runner process, which its stop then waited for)."""
    import sqlite3

    db = home.path / "rally.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE tasks (uuid TEXT, status TEXT)")
        conn.execute("INSERT INTO tasks VALUES (?, 'running')", (UUID,))
    started: list[tuple] = []
    home.rally = lambda *args, **kw: started.append(args)
    run = rally_task.TaskRun(home, tmp_path / "t.json", tmp_path / "t.log")
    run.uuid = UUID
    run.stop("every iteration slot in flight")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM tasks").fetchall() == [("aborting",)]
    assert run.stopped_for == "every iteration slot in flight" and started == []
    # a task the database does not show running: rally task abort, as before
    other = rally_task.TaskRun(home, tmp_path / "t.json", tmp_path / "t.log")
    other.uuid = "0badc0de-0000-4000-8000-000000000002"
    other.stop("an iteration failed")
    for _ in range(100):
        if started:
            break
        threading.Event().wait(0.01)
    assert started == [("task", "abort", other.uuid)]
