"""Where a run's files go, and what a task is given: run directories, task files, --task-args.

Each run gets a reports directory (``REPORTS_DIR/<stamp>``) and a private
run directory (``.keystone-bench/runs/<stamp>``, 0700: its Keystone, Rally
home and logs); tasks are named by a path or by the name of one shipped
in the package.
"""

from __future__ import annotations

import contextlib
import datetime
import json
from pathlib import Path
from typing import Any

from rally_keystone_bench import shipped
from rally_keystone_bench.errors import BenchError

RUNS_DIR = ".keystone-bench/runs"  # each run's Keystone, Rally home and logs, below the cwd


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
