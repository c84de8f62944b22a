"""Rally's JSON report of a task in Rally's database: ``rally task report --json``.

The verdict layer reads reports from a file or a dict (verdicts/results.py);
asking Rally for one is the driver's job.
"""

from __future__ import annotations

import os

from rally_keystone_bench import writer
from rally_keystone_bench.driver import rally
from rally_keystone_bench.driver.rally import RallyHome, last_line
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verdicts import results


def load_task(task_uuid: str, rally_home: str | None = None) -> list[results.Workload]:
    """Workloads of a task in Rally's database, via ``rally task report --json``.

    Uses our RallyHome at ``rally_home`` (default: $KEYSTONE_BENCH_RALLY_HOME)
    when given, else the rally command with its own configuration.
    """
    home = rally_home or os.environ.get("KEYSTONE_BENCH_RALLY_HOME")
    if home and not os.path.isfile(os.path.join(home, "rally.conf")):
        where = "" if rally_home else " (KEYSTONE_BENCH_RALLY_HOME)"
        raise BenchError(
            f"{home}{where} is not a keystone-bench Rally home: no rally.conf there; "
            "it is the rally/ directory of a run, e.g. .keystone-bench/runs/<stamp>/rally"
        )
    with writer.temporary_directory("kb-report-") as tmp:
        out = os.path.join(tmp, "report.json")
        proc = rally.task_report(RallyHome(home) if home else None, task_uuid, out)
        if proc.returncode != 0:
            raise BenchError(f"rally task report {task_uuid} failed: {last_line(proc)}")
        workloads = results.load(out)
    for wl in workloads:
        wl.source = task_uuid
    return workloads


def load_any(result: str) -> list[results.Workload]:
    """A report file, or a task uuid looked up in Rally's database."""
    if not os.path.exists(result) and results.is_task_uuid(result):
        return load_task(result)
    return results.load(result)
