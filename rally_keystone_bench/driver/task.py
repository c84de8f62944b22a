"""The one ``rally task start`` driver: a task's log, its uuid, its counts, its reports.

Every verb that runs Rally (run, capacity, matrix, gate) starts tasks here:

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
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench import shipped
from rally_keystone_bench.boundary import mask_urls
from rally_keystone_bench.driver import machine as machine_record
from rally_keystone_bench.driver import workload_progress
from rally_keystone_bench.driver.rally import (
    PRIVATE_UMASK,
    UUID_RE,
    RallyHome,
    last_line,
    rally_executable,
)
from rally_keystone_bench.errors import BenchError, Interrupted
from rally_keystone_bench.plugins.runners.progress import Totals, parse_progress
from rally_keystone_bench.report.render import write_summary
from rally_keystone_bench.verdicts import results

RUNS_DIR = ".keystone-bench/runs"  # each run's Keystone, Rally home and logs, below the cwd
ENV_NAME = "keystone-bench"  # the Rally env every verb creates in its own Rally home
TASK_UUID_RE = re.compile(r"Task\s+(" + UUID_RE.pattern + ")")
ITER_RE = re.compile(r"ITER: \d+ (START|END: (\S+))")
PROGRESS_EVERY_S = 5.0


def progress(message: str) -> None:
    """A progress line on stderr, as every verb writes them."""
    print(f"keystone-bench: {mask_urls(message)}", file=sys.stderr, flush=True)


def utc_stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def new_run_dirs(reports_dir: str | Path, runs_dir: str | Path = RUNS_DIR) -> tuple[Path, Path]:
    """Fresh ``REPORTS_DIR/<stamp>`` (absolute) and ``RUNS_DIR/<stamp>`` (0700) directories.

    Two runs started in the same second never share one: the second gets
    ``<stamp>-2``. Remove them with :func:`remove_if_empty` when nothing ran.
    """
    base = utc_stamp()
    reports, runs = Path(reports_dir), Path(runs_dir)
    private_dirs(runs)
    reports.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        stamp = base if n == 1 else f"{base}-{n}"
        try:
            (runs / stamp).mkdir(mode=0o700)
        except FileExistsError:
            continue
        try:
            (reports / stamp).mkdir()
        except FileExistsError:
            (runs / stamp).rmdir()
            continue
        # Absolute: the rally CLI runs with its home as working directory.
        return (reports / stamp).resolve(), runs / stamp
    raise BenchError(f"no free run directory for {base} under {runs} and {reports}")


def private_dirs(path: Path) -> None:
    """Make PATH and the parents it needs, each new one 0700 (mkdir -p -m 0700)."""
    missing = [p for p in [path, *path.parents] if not p.exists()]
    for p in reversed(missing):
        p.mkdir(mode=0o700, exist_ok=True)


def remove_if_empty(*dirs: Path) -> None:
    """Remove each directory that nothing was written to."""
    for d in dirs:
        with contextlib.suppress(OSError):
            d.rmdir()


def run_dir(name: str) -> Path:
    """A fresh directory below RUNS_DIR for one run's Keystone, Rally home and logs."""
    path = Path(RUNS_DIR) / name
    private_dirs(path)
    return path


def task_file(name: str) -> Path:
    """A task file as a path (else the one shipped in the package); BenchError when neither."""
    path = shipped.resolve(name, "tasks")
    if not path.is_file():
        raise BenchError(f"task file {path} does not exist")
    return path


def parse_task_args(text: str | None) -> dict[str, Any]:
    """--task-args as a JSON object."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise BenchError(f"--task-args is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BenchError("--task-args must be a JSON object, like '{\"times\": 10}'")
    return value


ABORT_WAIT_S = 120.0  # after a signal: Rally's runner stops, then its contexts clean up
KILL_GRACE_S = 10.0  # then SIGINT to Rally, and SIGKILL this long after

# The task running now (start_task registers it) and the signals received.
_running: list[TaskRun] = []
_signals: list[int] = []
_mode = {"later_noted": False}  # sigterm_as_interrupt(later_noted=True): see there


def _on_signal(signum: int, frame: Any) -> None:
    """SIGINT and SIGTERM alike: the first stops the running task and keeps its results.

    With a task running, Rally is told to abort (``rally task abort``) and its
    output is read to the end while its contexts clean up (bounded by
    ABORT_WAIT_S); start_task then raises Interrupted, and the reports of
    what ran are written before the Keystone stops. Without one, or at a
    second signal, Interrupted is raised at once (the Keystone still stops).
    """
    _signals.append(signum)
    run = _running[-1] if _running else None
    if run is not None and len(_signals) == 1:
        # The handler runs between two bytecodes of the main thread, which
        # may be inside a write to the log or to stderr: a write from here
        # would be reentrant. The stopping (and its messages) is a thread's.
        run.interrupted_by = signum
        threading.Thread(target=run.interrupt, args=(signum,), daemon=True).start()
        return
    if len(_signals) > 1 and _mode["later_noted"]:
        # os.write: no buffered stream, which the main thread may be writing to.
        name = signal.Signals(signum).name
        note = f"keystone-bench: {name} again: still writing what was gathered, which is kept\n"
        with contextlib.suppress(OSError):
            os.write(2, note.encode())
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def sigterm_as_interrupt(later_noted: bool = False) -> Iterator[None]:
    """SIGINT and SIGTERM stop the load, keep what was measured and clean up (see _on_signal).

    With LATER_NOTED, a signal after the first is only noted on stderr: what
    the first one set going (collecting and writing the results gathered)
    runs to its end, bounded by its own timeouts, and the exit code is the
    first signal's.
    """
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    _signals.clear()
    _mode["later_noted"] = later_noted
    try:
        yield
    finally:
        _mode["later_noted"] = False
        for s, handler in previous.items():
            signal.signal(s, handler)


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
        """Abort the task as a user would with ``rally task abort`` (once; needs the uuid).

        Rally stops its runner, then cleans up (a SIGINT to rally cleans up
        while the runner still runs).
        """
        if self.stopped_for is not None or self.uuid is None:
            return
        self.stopped_for = why
        self._note(f"stopping the task: {why}")
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
    with open(log_path, "w", buffering=1) as log:  # line by line: tail -f works
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
        _running.append(run)
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
            _running.remove(run)
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


# -- a task and its reports ------------------------------------------------------
@dataclasses.dataclass
class TaskOutcome:
    task_file: Path
    uuid: str | None
    rally_exit: int
    json_report: Path | None = None
    html_report: Path | None = None
    summary: Path | None = None
    workloads: list = dataclasses.field(default_factory=list)
    interrupted_by: int | None = None  # the signal that stopped the task, if one did
    cleanup_cut_short: bool = False  # a second signal stopped Rally before its cleanup ended
    workload_uuids: list = dataclasses.field(default_factory=list)  # names of what it created
    contexts_failed: bool = False  # a context's cleanup said something was left behind
    counters: list = dataclasses.field(default_factory=list)  # per workload: Keystone's costs
    checked_out: int | None = None  # Keystone's DB connections checked out after the load
    sampler: Any = None  # procstat.Sampler of the task (driver/machine.py)
    machine: Any = None  # verdicts.machine.MachineState of its load windows

    @property
    def interrupted(self) -> str | None:
        """``interrupted by SIGTERM`` when a signal stopped the task."""
        if self.interrupted_by is None:
            return None
        return f"interrupted by {signal.Signals(self.interrupted_by).name}"

    @property
    def no_verdict(self) -> str | None:
        """Why the task gets no SLA verdict: a signal stopped it, or Rally was killed."""
        if self.interrupted:
            return self.interrupted
        if self.uuid is not None and self.rally_exit < 0:
            return f"rally task start exited {self.rally_exit}"
        return None

    @property
    def may_have_left(self) -> bool:
        """Whether the task's contexts may have left what they created.

        A second signal cut Rally's cleanup short, Rally was killed (a
        negative exit code: no cleanup ran), or a context's cleanup said so.
        """
        if not self.workload_uuids:
            return False  # no workload started: no context created anything
        return self.cleanup_cut_short or self.rally_exit < 0 or self.contexts_failed

    @property
    def sla_passed(self) -> bool:
        """Never for an interrupted or killed task: Rally judged only what ran before."""
        return (
            self.no_verdict is None
            and bool(self.workloads)
            and all(wl.pass_sla for wl in self.workloads)
        )


def json_report(home: RallyHome, uuid: str, path: Path) -> bool:
    """Rally's JSON report of task UUID at PATH; False when Rally could not write it."""
    proc = home.rally("task", "report", uuid, "--json", "--out", str(path), check=False)
    return proc.returncode == 0


def write_reports(home: RallyHome, outcome: TaskOutcome, out_dir: Path) -> None:
    """Rally's JSON and static HTML reports, then our summary, for one task."""
    if outcome.uuid is None:
        return
    started = time.monotonic()
    progress(f"{outcome.task_file.name}: writing reports (Rally's JSON and HTML, our summary)")
    # Rally runs in its own home directory: a relative path would land there.
    out_dir = out_dir.resolve()
    stem = outcome.task_file.stem
    json_path, html_path = out_dir / f"{stem}.json", out_dir / f"{stem}.html"

    def html_report() -> None:
        args = ("task", "report", outcome.uuid, "--html-static", "--out", str(html_path))
        if home.rally(*args, check=False).returncode == 0:
            outcome.html_report = html_path

    # Both at once: each rally process takes seconds to start on a busy machine.
    html = threading.Thread(target=html_report)
    html.start()
    if json_report(home, outcome.uuid, json_path):
        outcome.json_report = json_path
    html.join()
    if outcome.json_report is not None:
        outcome.workloads = results.load(json_path)
        if outcome.workloads:
            label = f"{stem} ({outcome.interrupted}: what ran)" if outcome.interrupted else stem
            outcome.machine = machine_record.state_of(outcome.sampler, outcome.workloads)
            outcome.summary = write_summary(
                outcome.workloads, out_dir / f"{stem}-summary", label, machine=outcome.machine
            )
    progress(f"{outcome.task_file.name}: reports written in {time.monotonic() - started:.1f} s")


def run_task(
    home: RallyHome,
    env: str,
    task_file: Path,
    task_args: dict[str, Any],
    out_dir: Path,
    trees: dict[str, list[int]] | None = None,
    interval: float = 1.0,
) -> TaskOutcome:
    """Start TASK_FILE and write its reports into OUT_DIR, even when it fails half-way.

    /proc is sampled every INTERVAL seconds meanwhile (TREES: name -> root
    pids of the processes to tell apart): the machine's record of the run.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    outcome = TaskOutcome(task_file, None, -1)
    log_path = out_dir / f"{task_file.stem}.rally.log"
    with machine_record.sampled(trees, interval) as outcome.sampler:
        _run_and_report(home, env, task_file, task_args, out_dir, outcome, log_path)
    return outcome


def _run_and_report(
    home: RallyHome,
    env: str,
    task_file: Path,
    task_args: dict[str, Any],
    out_dir: Path,
    outcome: TaskOutcome,
    log_path: Path,
) -> None:
    try:
        run = start_task(home, env, task_file, task_args, log_path)
        describe_run(outcome, run, log_path)
    except Interrupted as exc:
        # Reports of what ran are written (finally) before the Keystone stops.
        run = getattr(exc, "run", None)
        if run is not None:
            describe_run(outcome, run, log_path)
        outcome.interrupted_by = exc.signum
        outcome.cleanup_cut_short = getattr(exc, "twice", False)
        exc.outcome = outcome
        raise
    finally:
        write_reports(home, outcome, out_dir)


# What our contexts' cleanup says when it could not delete everything (_base.py).
LEFT_BEHIND_RE = re.compile(r"cleanup: .* left behind")


def describe_run(outcome: TaskOutcome, run: TaskRun, log_path: Path) -> None:
    """OUTCOME's exit code, uuid, workloads and whether a context said it left something."""
    outcome.rally_exit, outcome.uuid = run.rc, run.uuid
    outcome.workload_uuids = run.workload_uuids()
    with contextlib.suppress(OSError):
        outcome.contexts_failed = bool(LEFT_BEHIND_RE.search(log_path.read_text(errors="replace")))
