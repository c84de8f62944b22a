"""A task and its reports: run it, then Rally's JSON and HTML reports and our summary.

``run_task`` is what run, matrix, gate and scale call: the task is started
(``driver/task.py``), the machine sampled meanwhile, and the reports of what
ran are written even when a signal or a failure cut it short.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from typing import Any

from rally_keystone_bench.driver import machine as machine_record
from rally_keystone_bench.driver import rally
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.outcome import TaskOutcome
from rally_keystone_bench.driver.rally import RallyHome
from rally_keystone_bench.driver.task import TaskRun, progress
from rally_keystone_bench.errors import Interrupted
from rally_keystone_bench.report import render
from rally_keystone_bench.verdicts import results


def json_report(home: RallyHome, uuid: str, path: Path) -> bool:
    """Rally's JSON report of task UUID at PATH; False when Rally could not write it."""
    return rally.task_report(home, uuid, path).returncode == 0


def write_reports(
    home: RallyHome, outcome: TaskOutcome, out_dir: Path, summary: bool = True
) -> None:
    """Rally's JSON and static HTML reports, then (with SUMMARY) our summary, for one task.

    Without SUMMARY the caller adds Keystone's side first (driver/counters.gather), then
    writes the summary once with ``write_summary``.
    """
    if outcome.uuid is None:
        return
    started = time.monotonic()
    progress(f"{outcome.task_file.name}: writing reports (Rally's JSON and HTML, our summary)")
    # Rally runs in its own home directory: a relative path would land there.
    out_dir = out_dir.resolve()
    stem = outcome.task_file.stem
    outcome.summary_dir = out_dir / f"{stem}-summary"
    json_path, html_path = out_dir / f"{stem}.json", out_dir / f"{stem}.html"

    def html_report() -> None:
        assert outcome.uuid is not None
        if rally.task_report(home, outcome.uuid, html_path, html=True).returncode == 0:
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
            outcome.machine = machine_record.state_of(outcome.sampler, outcome.workloads)
            if summary:
                write_summary(outcome)
    progress(f"{outcome.task_file.name}: reports written in {time.monotonic() - started:.1f} s")


def write_summary(outcome: TaskOutcome) -> None:
    """OUTCOME's summary.html and summary.json, written once with everything it has (the
    machine, and Keystone's counters and profile when they were gathered)."""
    if not outcome.workloads or outcome.summary_dir is None:
        return
    stem = outcome.task_file.stem
    label = f"{stem} ({outcome.interrupted}: what ran)" if outcome.interrupted else stem
    written = render.write_summary(
        outcome.workloads, outcome.summary_dir, label, outcome.counters, outcome.flames,
        outcome.keystone, outcome.machine, outcome.profile,
    )  # fmt: skip
    outcome.summary, outcome.summary_doc = written.html, written.doc


def run_task(
    home: RallyHome,
    env: str,
    task_file: Path,
    task_args: dict[str, Any],
    out_dir: Path,
    trees: dict[str, list[int]] | None = None,
    interval: float = 1.0,
    summary: bool = True,
) -> TaskOutcome:
    """Start TASK_FILE and write its reports into OUT_DIR, even when it fails half-way.

    /proc is sampled every INTERVAL seconds meanwhile (TREES: name -> root
    pids of the processes to tell apart): the machine's record of the run.
    Without SUMMARY, the caller writes the summary (``write_summary``), once
    it added Keystone's side.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    outcome = TaskOutcome(task_file, None, -1)
    log_path = out_dir / f"{task_file.stem}.rally.log"
    with machine_record.sampled(trees, interval) as outcome.sampler:
        _run_and_report(home, env, task_file, task_args, out_dir, outcome, log_path, summary)
    return outcome


def _run_and_report(
    home: RallyHome,
    env: str,
    task_file: Path,
    task_args: dict[str, Any],
    out_dir: Path,
    outcome: TaskOutcome,
    log_path: Path,
    summary: bool = True,
) -> None:
    try:
        run = rally_task.start_task(home, env, task_file, task_args, log_path)
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
        write_reports(home, outcome, out_dir, summary)


# What our contexts' cleanup says when it could not delete everything (_base.py).
LEFT_BEHIND_RE = re.compile(r"cleanup: .* left behind")


def describe_run(outcome: TaskOutcome, run: TaskRun, log_path: Path) -> None:
    """OUTCOME's exit code, uuid, workloads and whether a context said it left something."""
    outcome.rally_exit, outcome.uuid = run.rc, run.uuid
    outcome.workload_uuids = run.workload_uuids()
    with contextlib.suppress(OSError):
        outcome.contexts_failed = bool(LEFT_BEHIND_RE.search(log_path.read_text(errors="replace")))
