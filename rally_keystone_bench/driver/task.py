"""The one ``rally task start`` driver: a task's log, its uuid, its counts.

Every verb that runs Rally (run, capacity, matrix, gate) starts tasks here
(``driver/task_reports.py`` adds a task's reports; ``driver/interrupts.py``
its signals; ``driver/workspace.py`` where its files go):

    run = start_task(home, env, task_file, task_args, log_path, watch=watcher)

Rally's output goes to LOG_PATH line by line; each line updates the run's
uuid and iteration counts (Rally's ITER lines, or the ``pooled_rps`` runner's
own counts), then goes to WATCH(run, line), which may stop the task
(``run.stop(why)``, as ``rally task abort`` would). Without a watcher,
progress lines go to stderr every few seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.boundary import mask_urls
from rally_keystone_bench.driver import interrupts, workload_progress
from rally_keystone_bench.driver.interrupts import ABORT_WAIT_S, KILL_GRACE_S
from rally_keystone_bench.driver.rally import (
    PRIVATE_UMASK,
    UUID_RE,
    RallyHome,
    last_line,
    rally_executable,
)
from rally_keystone_bench.errors import BenchError, Interrupted
from rally_keystone_bench.plugins.runners.progress import Totals, parse_progress

ENV_NAME = "keystone-bench"  # the Rally env every verb creates in its own Rally home
TASK_UUID_RE = re.compile(r"Task\s+(" + UUID_RE.pattern + ")")
ITER_RE = re.compile(r"ITER: \d+ (START|END: (\S+))")
PROGRESS_EVERY_S = 5.0


def progress(message: str) -> None:
    """A progress line on stderr, as every verb writes them."""
    print(f"keystone-bench: {mask_urls(message)}", file=sys.stderr, flush=True)


def validate_task(home: RallyHome, env: str, task_file: Path, task_args: dict[str, Any]) -> None:
    """``rally task validate``; BenchError with Rally's reason when the task is not valid."""
    args = ["--task-args", json.dumps(task_args)] if task_args else []
    proc = home.rally(
        "task", "validate", str(task_file.resolve()), "--env", env, *args, check=False
    )
    if proc.returncode != 0:
        raise BenchError(f"task {task_file} is not valid: {last_line(proc)}")


@dataclasses.dataclass
class Counts:
    """Iterations started, done and failed so far, from Rally's log lines."""

    started: int = 0
    done: int = 0
    failed: int = 0
    _totals: Totals = dataclasses.field(default_factory=Totals, repr=False)

    def feed(self, line: str) -> bool:
        """Count LINE; True when it changed the counts."""
        counted = parse_progress(line)
        if counted:  # pooled_rps: the latest counts of each runner process
            self.started, self.done, self.failed = self._totals.add(counted)
            return True
        m = ITER_RE.search(line)
        if not m:
            return False
        if m.group(1) == "START":
            self.started += 1
        else:
            self.done += 1
            self.failed += m.group(2) != "OK"
        return True


class TaskRun:
    """One ``rally task start`` while it runs and after: uuid, counts, exit code."""

    def __init__(self, home: RallyHome, task_file: Path, log_path: Path) -> None:
        self.home, self.task_file, self.log_path = home, task_file, log_path
        self.uuid: str | None = None
        self.rc = -1
        self.counts = Counts()
        self.stopped_for: str | None = None  # why the task was stopped early
        self.interrupted_by: int | None = None  # SIGINT or SIGTERM, when one stopped it
        # The log, while Rally runs. Written under the lock, never from a signal
        # handler: a handler runs on the reading thread, maybe inside its write.
        self._log: Any = None
        self._log_lock = threading.Lock()
        self._proc: subprocess.Popen | None = None

    def _note(self, text: str) -> None:
        """A line of ours in Rally's log, in its place among Rally's lines."""
        with self._log_lock:
            if self._log is not None:
                self._log.write(f"keystone-bench: {text}\n")

    def stop(self, why: str) -> None:
        """Abort the task as ``rally task abort`` does (once; needs the uuid).

        Rally stops its runner, then cleans up (a SIGINT to rally cleans up
        while the runner still runs). The task is marked aborting in our
        Rally home's database at once; only where that cannot be done does
        ``rally task abort`` run, whose start-up an overloaded probe spends
        sending more requests that its stop then waits for (seen on an idle
        2-core EPYC: a ramp stopped at 30 rps ran 11 s more, 5 s with the
        mark; a minute more with other tests taking half a core).
        """
        if self.stopped_for is not None or self.uuid is None:
            return
        self.stopped_for = why
        self._note(f"stopping the task: {why}")
        if self._mark_aborting():
            return
        threading.Thread(
            target=self.home.rally, args=("task", "abort", self.uuid), kwargs={"check": False}
        ).start()

    def interrupt(self, signum: int) -> None:
        """Stop the load at a signal; the reading of Rally's output goes on to its end.

        ``rally task abort`` when Rally has named the task (its contexts then
        clean up), else SIGINT to Rally. Bounded: Rally gets SIGINT after
        ABORT_WAIT_S, SIGKILL KILL_GRACE_S later.
        """
        name = signal.Signals(signum).name
        self.interrupted_by = signum
        progress(
            f"{name}: stopping the load; Rally's cleanup may take up to {ABORT_WAIT_S:g} s "
            "(a second Ctrl-C skips it, the Keystone still stops)"
        )
        if self.uuid is not None and self._mark_aborting():
            self.stopped_for = f"interrupted by {name}"
            self._note(f"stopping the task: {self.stopped_for}")
        elif self.uuid is not None:
            self.stop(f"interrupted by {name}")
        else:
            self._signal_rally(signal.SIGINT)
        timer = threading.Timer(ABORT_WAIT_S, self._escalate)
        timer.daemon = True
        timer.start()

    def _mark_aborting(self) -> bool:
        """What ``rally task abort`` does, without its 10 s of start-up on a busy machine.

        Rally's engine polls its task's status every 2 s and stops the runner
        when it reads ``aborting``; in our own Rally home the database is a
        SQLite file. False when the task is not running yet (then Rally cannot
        abort it either) or the database is not ours to write.
        """
        import sqlite3

        db = self.home.path / "rally.sqlite"
        if not db.exists():
            return False
        try:
            with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn, conn:
                cur = conn.execute(
                    "UPDATE tasks SET status = 'aborting' "
                    "WHERE uuid = ? AND status IN ('running', 'soft_aborting')",
                    (self.uuid,),
                )
                return cur.rowcount == 1
        except sqlite3.Error:
            return False

    def workload_uuids(self) -> list[str]:
        """The uuids of the task's workloads, from our Rally home's database (in order).

        Rally records them when the task starts, before any context runs:
        the names of what the contexts create carry them. Empty when unknown.
        """
        import sqlite3

        db = self.home.path / "rally.sqlite"
        if self.uuid is None or not db.exists():
            return []
        try:
            with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
                rows = conn.execute(
                    "SELECT uuid FROM workloads WHERE task_uuid = ? ORDER BY id", (self.uuid,)
                ).fetchall()
        except sqlite3.Error:
            return []
        return [r[0] for r in rows]

    def _escalate(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        progress(f"Rally did not finish within {ABORT_WAIT_S:g} s of the signal: stopping it")
        self._signal_rally(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=KILL_GRACE_S)
            return
        self._signal_rally(signal.SIGKILL)

    def _signal_rally(self, sig: int) -> None:
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, sig)


Watcher = Callable[[TaskRun, str], None]


def progress_lines(
    say: Callable[[str], None] = progress,
    every: float = PROGRESS_EVERY_S,
    planned: list[workload_progress.Planned] | None = None,
) -> Watcher:
    """The default watcher: the task's uuid when Rally names it, then each workload's
    start, progress (iterations of the total, ETA) and end (workload_progress.Board)."""
    seen: dict[str, Any] = {"uuid": None}
    board = workload_progress.Board(planned or [], say, every=every)

    def watch(run: TaskRun, line: str) -> None:
        if run.uuid is not None and seen["uuid"] is None:
            seen["uuid"] = run.uuid
            say(f"{run.task_file.name}: task {run.uuid} started (log: {run.log_path})")
        board.feed(line, run.counts.done, run.counts.failed, run.counts.started)

    watch.close = board.close  # type: ignore[attr-defined]  # the task ended
    return watch


def start_task(
    home: RallyHome,
    env: str,
    task_file: Path,
    task_args: dict[str, Any],
    log_path: Path,
    *,
    extra: Sequence[str] = (),
    config: Path | None = None,
    watch: Watcher | None = None,
) -> TaskRun:
    """``rally task start`` with its output in LOG_PATH and each line shown to WATCH.

    Rally runs in its own process group: the runner's worker processes go
    with it at the end. Ctrl-C (or SIGTERM under ``sigterm_as_interrupt``)
    is passed on to Rally, which aborts the task and runs its cleanup.
    """
    watch = watch or progress_lines(planned=workload_progress.plan(task_file, task_args))
    cmd = [rally_executable(), "--config-file", str(config or home.config_path), "task", "start"]
    cmd += [str(task_file.resolve()), "--env", env, *extra]
    if task_args:
        cmd += ["--task-args", json.dumps(task_args)]
    run = TaskRun(home, task_file, log_path)
    with writer.open_stream(log_path, "w", buffering=1) as log:  # line by line: tail -f works
        run._log = log
        run._proc = proc = subprocess.Popen(
            cmd,
            env=home.environ(),
            cwd=home.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            umask=PRIVATE_UMASK,
        )
        interrupts.running.append(run)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                with run._log_lock:
                    log.write(mask_urls(line))
                if run.uuid is None:
                    found = TASK_UUID_RE.search(line)
                    if found:
                        run.uuid = found.group(1)
                run.counts.feed(line)
                watch(run, line)
            run.rc = proc.wait()
            getattr(watch, "close", lambda: None)()
        except KeyboardInterrupt as exc:
            # A second signal, or one outside sigterm_as_interrupt: no more waiting.
            run.interrupted_by = getattr(exc, "signum", signal.SIGINT)
            run._note(f"interrupted again: {task_file.name} stopped at once")
            stop = Interrupted(run.interrupted_by)
            stop.run = run  # type: ignore[attr-defined]
            stop.twice = True  # type: ignore[attr-defined]  # Rally's cleanup was cut short
            raise stop from None
        finally:
            interrupts.running.remove(run)
            with run._log_lock:
                run._log = None
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # worker processes left behind
    if run.interrupted_by is not None:  # Rally finished after the signal: results kept
        stop = Interrupted(run.interrupted_by)
        stop.run = run  # type: ignore[attr-defined]
        raise stop
    return run
