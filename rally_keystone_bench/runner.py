"""The ``keystone-bench run`` verb: tasks through the real ``rally task start``.

Without ``--existing-cloud`` it starts a local Keystone and always stops it,
on failure and on Ctrl-C too. Every input is checked before any load is sent.
Each task's Rally HTML and JSON reports and our summary go to
``reports/<UTC timestamp>/``; a task that fails half-way still gets its
reports written.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench.errors import BenchError

DEFAULT_TASK = "tasks/token-suite.yaml"
RUNS_DIR = ".keystone-bench/runs"
ENV_NAME = "keystone-bench"
ITER_END_RE = re.compile(r"ITER: (\d+) END: (\S+)")
TASK_UUID_RE = re.compile(r"Task\s+([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


def progress(message: str) -> None:
    print(f"keystone-bench: {message}", file=sys.stderr, flush=True)


def utc_stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def resolve_tasks(tasks: Sequence[str]) -> list[Path]:
    """Task files as paths; BenchError for one that does not exist."""
    paths = [Path(t) for t in (tasks or [DEFAULT_TASK])]
    for p in paths:
        if not p.is_file():
            raise BenchError(f"task file {p} does not exist")
    return paths


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


def check_reachable(auth_url: str, timeout: float = 10.0) -> None:
    """BenchError unless AUTH_URL answers HTTP at all (any status)."""
    try:
        with urllib.request.urlopen(auth_url, timeout=timeout):
            return
    except urllib.error.HTTPError:
        return
    except (OSError, urllib.error.URLError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BenchError(f"auth URL {auth_url} is unreachable: {reason}") from None


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C, so that cleanup runs."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def build_envs(deps: Mapping[str, Any], run_root: Path) -> None:
    """Build (or find cached) each deployment's Keystone environment before any load.

    gate and matrix call it first, so a SPEC pip cannot install exits 2
    before a deployment has started.
    """
    from rally_keystone_bench.deploy import venv
    from rally_keystone_bench.deploy.keystone import LocalKeystone

    for name, dep in deps.items():
        extras = LocalKeystone(dep, run_root / name / "keystone")._extra_packages()
        progress(f"{name}: Keystone environment for {dep.keystone}")
        venv.ensure_keystone_env(dep.keystone, extras=extras, progress=progress)


@contextlib.contextmanager
def prepared_env(
    run_dir: Path,
    *,
    existing_cloud: bool = False,
    spec_file: str | None = None,
    deployment: Any = None,
    say: Callable[[str], None] = progress,
) -> Iterator[tuple[Any, str]]:
    """A RallyHome with a checked env named ENV_NAME; yields (rally_home, env name).

    On a local Keystone (the default) the Keystone is started first and
    stopped when the block ends, however it ends.
    """
    from rally_keystone_bench import rallyenv
    from rally_keystone_bench.deploy.commands import start_or_explain
    from rally_keystone_bench.deploy.keystone import Deployment, LocalKeystone

    keystone = None
    if existing_cloud or spec_file:
        spec = (
            rallyenv.load_spec_file(spec_file)
            if spec_file
            else rallyenv.spec_from_environ(os.environ)
        )
        check_reachable(rallyenv.auth_url_of(spec))
    else:
        deployment = deployment or Deployment()
        deployment.validate()
        keystone = LocalKeystone(deployment, run_dir / "keystone", progress=say)
    try:
        if keystone is not None:
            start_or_explain(keystone)
            spec = rallyenv.keystone_spec(keystone.admin_credentials)
            say(f"Keystone is up at {keystone.auth_url} (logs in {keystone.run_dir})")
        home = rallyenv.RallyHome(run_dir / "rally")
        home.create_env(ENV_NAME, spec)
        home.check_env(ENV_NAME)
        yield home, ENV_NAME
    finally:
        if keystone is not None:
            keystone.stop()
            say("Keystone stopped")


@dataclasses.dataclass
class TaskOutcome:
    task_file: Path
    uuid: str | None
    rally_exit: int
    json_report: Path | None = None
    html_report: Path | None = None
    summary: Path | None = None
    workloads: list = dataclasses.field(default_factory=list)

    @property
    def sla_passed(self) -> bool:
        return bool(self.workloads) and all(wl.pass_sla for wl in self.workloads)


def start_task(
    home: Any,
    env: str,
    task_file: Path,
    task_args: dict[str, Any],
    log_path: Path,
    extra: Sequence[str] = (),
) -> tuple[int, str | None]:
    """``rally task start`` with its output in LOG_PATH and a progress line on stderr.

    Returns Rally's exit code and the task uuid (None if Rally never made one).
    """
    from rally_keystone_bench.rallyenv import rally_executable

    cmd = [rally_executable(), "--config-file", str(home.config_path), "task", "start"]
    cmd += [str(task_file.resolve()), "--env", env, *extra]
    if task_args:
        cmd += ["--task-args", json.dumps(task_args)]
    uuid: str | None = None
    done = failed = 0
    last_print = 0.0
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd,
            env=home.environ(),
            cwd=home.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                if uuid is None:
                    found = TASK_UUID_RE.search(line)
                    if found:
                        uuid = found.group(1)
                        progress(f"{task_file.name}: task {uuid} started (log: {log_path})")
                end = ITER_END_RE.search(line)
                if end:
                    done += 1
                    failed += end.group(2) != "OK"
                    now = time.monotonic()
                    if now - last_print >= 5.0:
                        last_print = now
                        progress(f"{task_file.name}: {done} iterations done, {failed} failed")
            rc = proc.wait()
        except KeyboardInterrupt:
            # Rally got the same SIGINT: let it abort the task and run its cleanup.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=600)
            raise
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return rc, uuid


def write_reports(home: Any, outcome: TaskOutcome, out_dir: Path) -> None:
    """Rally's JSON and static HTML reports, then our summary, for one task."""
    from rally_keystone_bench import results
    from rally_keystone_bench.report.render import write_summary

    if outcome.uuid is None:
        return
    # Rally runs in its own home directory: a relative path would land there.
    out_dir = out_dir.resolve()
    stem = outcome.task_file.stem
    json_path, html_path = out_dir / f"{stem}.json", out_dir / f"{stem}.html"
    proc = home.rally(
        "task", "report", outcome.uuid, "--json", "--out", str(json_path), check=False
    )
    if proc.returncode == 0:
        outcome.json_report = json_path
    proc = home.rally(
        "task", "report", outcome.uuid, "--html-static", "--out", str(html_path), check=False
    )
    if proc.returncode == 0:
        outcome.html_report = html_path
    if outcome.json_report is not None:
        outcome.workloads = results.load(json_path)
        if outcome.workloads:
            outcome.summary = write_summary(outcome.workloads, out_dir / f"{stem}-summary", stem)


def run_task(
    home: Any, env: str, task_file: Path, task_args: dict[str, Any], out_dir: Path
) -> TaskOutcome:
    """Start TASK_FILE and write its reports into OUT_DIR, even when it fails half-way."""
    out_dir.mkdir(parents=True, exist_ok=True)
    outcome = TaskOutcome(task_file, None, -1)
    try:
        outcome.rally_exit, outcome.uuid = start_task(
            home, env, task_file, task_args, out_dir / f"{task_file.stem}.rally.log"
        )
    finally:
        write_reports(home, outcome, out_dir)
    return outcome


def format_table(workloads: Sequence[Any]) -> str:
    """A short table per workload and action: p50, p95, p99, max, ok it/s, success %."""
    from rally_keystone_bench import stats

    lines = []
    for i, wl in enumerate(workloads, 1):
        verdict = "SLA passed" if wl.pass_sla else "SLA FAILED"
        lines.append(f"[{i}] {wl.label()}  -- {verdict}")
        lines.append(
            f"    {'action':<24} {'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} {'max ms':>9}"
            f" {'ok it/s':>8} {'success':>8} {'count':>6}"
        )
        names = [n for n in wl.actions if n != "total"] + ["total"]
        for name in names:
            a = wl.actions.get(name)
            if a is None:
                continue
            s = stats.summarize(a.ok_durations())

            def ms(v: float | None) -> str:
                return "-" if v is None else f"{v * 1000:.1f}"

            rate = (
                wl.throughput
                if name == "total"
                else a.count * (a.success_percent / 100) / (wl.load_duration or float("inf"))
            )
            lines.append(
                f"    {name:<24} {ms(s['p50']):>9} {ms(s['p95']):>9} {ms(s['p99']):>9}"
                f" {ms(s['max']):>9} {rate:>8.2f} {a.success_percent:>7.1f}% {a.count:>6}"
            )
        for sla in wl.sla:
            if not sla.get("success", True):
                lines.append(f"    SLA {sla.get('criterion')}: {sla.get('detail')}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from rally_keystone_bench.deploy.commands import deployment_from_args

    # Everything that can be checked is checked before any load is sent.
    tasks = resolve_tasks(args.tasks)
    task_args = parse_task_args(args.task_args)
    deployment = None
    if not (args.existing_cloud or args.spec):
        deployment = deployment_from_args(args)
        deployment.validate()
    stamp = utc_stamp()
    # Absolute: the rally CLI runs with its home as working directory.
    out_dir = (Path(args.reports_dir) / stamp).resolve()
    run_dir = Path(RUNS_DIR) / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)

    outcomes: list[TaskOutcome] = []
    with (
        sigterm_as_interrupt(),
        prepared_env(
            run_dir, existing_cloud=args.existing_cloud, spec_file=args.spec, deployment=deployment
        ) as (home, env),
    ):
        for task_file in tasks:
            proc = home.rally(
                "task",
                "validate",
                str(task_file.resolve()),
                "--env",
                env,
                *(["--task-args", json.dumps(task_args)] if task_args else []),
                check=False,
            )
            if proc.returncode != 0:
                from rally_keystone_bench.rallyenv import last_line

                raise BenchError(f"task {task_file} is not valid: {last_line(proc)}")
        for n, task_file in enumerate(tasks, 1):
            progress(f"task {n} of {len(tasks)}: {task_file}")
            outcomes.append(run_task(home, env, task_file, task_args, out_dir))
    return summarize_outcomes(outcomes, out_dir)


def summarize_outcomes(outcomes: Sequence[TaskOutcome], out_dir: Path) -> int:
    """Print each task's table and report paths; the verb's exit code."""
    rc = 0
    for o in outcomes:
        print(f"== {o.task_file} (task {o.uuid or 'not started'})")
        if o.workloads:
            print(format_table(o.workloads))
        for label, path in (
            ("Rally HTML", o.html_report),
            ("Rally JSON", o.json_report),
            ("summary", o.summary),
        ):
            if path is not None:
                print(f"    {label}: {path}")
        if o.uuid is None or not o.workloads:
            print(f"    rally task start exited {o.rally_exit}; see {out_dir}")
            rc = max(rc, 2)
        elif not o.sla_passed:
            rc = max(rc, 1)
    print(f"reports: {out_dir}")
    return rc
