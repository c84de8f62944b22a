"""What one run records: its context (Keystone, deployment, machine, tool) and a row per
workload and action, from the summaries the verb hands over.

Nothing is measured again: the percentiles, rates and success % are the
summary's, the counters are the ones the summary kept. The Keystone is a
value the verb gives (deploy/identity.py says which one ran).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rally_keystone_bench.version import version as installed_version

TOTAL = "total"


@dataclasses.dataclass(frozen=True)
class ActionRow:
    """One action of one workload of a run: seconds, iterations per second, percent."""

    workload: str
    action: str
    p50: float | None
    p95: float | None
    p99: float | None
    rate: float | None
    success_percent: float | None
    count: int | None
    cpu_per_request: float | None = None
    counters: Mapping[str, Any] | None = None

    def columns(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["counters"] = json.dumps(self.counters, sort_keys=True) if self.counters else None
        return out


@dataclasses.dataclass(frozen=True)
class Keystone:
    """The Keystone under test: a release (spec) or a checkout's commit and git describe."""

    spec: str
    commit: str | None = None
    describe: str | None = None
    repo: str | None = None


@dataclasses.dataclass(frozen=True)
class RunRecord:
    recorded_at: str
    verb: str
    keystone: Keystone
    deployment: str | None
    settings: Mapping[str, str]
    machine: str
    cpu_model: str
    cores: int
    tool_version: str
    source: str
    rows: tuple[ActionRow, ...]
    interference: Mapping[str, Any] | None = None

    def columns(self) -> dict[str, Any]:
        return {
            "recorded_at": self.recorded_at,
            "verb": self.verb,
            "keystone": self.keystone.spec,
            "keystone_commit": self.keystone.commit,
            "keystone_describe": self.keystone.describe,
            "keystone_repo": self.keystone.repo,
            "deployment": self.deployment,
            "settings": json.dumps(dict(self.settings), sort_keys=True),
            "machine": self.machine,
            "cpu_model": self.cpu_model,
            "cores": self.cores,
            "tool_version": self.tool_version,
            "source": self.source,
            "interference": json.dumps(self.interference) if self.interference else None,
        }


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _git(repo: Path, *args: str) -> str | None:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def commits_between(
    older: Mapping[str, Any], newer: Mapping[str, Any], limit: int = 20
) -> list[str]:
    """``sha subject`` of the Keystone commits after run OLDER's up to run NEWER's (store rows);
    [] when either run names no commit or git cannot tell."""
    repo, old, new = (
        newer.get("keystone_repo"),
        older.get("keystone_commit"),
        newer.get("keystone_commit"),
    )
    if not repo or not old or not new or old == new or not Path(repo).is_dir():
        return []
    out = _git(Path(repo), "log", "--format=%h %s", f"-{limit}", f"{old}..{new}")
    return out.splitlines() if out else []


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    try:
        for line in Path(cpuinfo).read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def machine_line() -> tuple[str, str, int]:
    """(machine, cpu_model, cores): the machine line names the CPU and its core count."""
    model, cores = cpu_model(), os.cpu_count() or 1
    return f"{model}, {cores} cores", model, cores


def tool_version() -> str:
    """The installed version, and the checkout's ``git describe`` when run from one."""
    version = installed_version()
    described = _git(Path(__file__).resolve().parent, "describe", "--tags", "--always", "--dirty")
    return f"{version} ({described})" if described else version


def _rate(workload: Mapping[str, Any], name: str, action: Mapping[str, Any]) -> float | None:
    """Successful iterations (or actions) per second, as the run's table shows it."""
    if name == TOTAL:
        return workload.get("throughput")
    duration = workload.get("load_duration") or 0
    if not duration or action.get("count") is None:
        return None
    return action["count"] * (action.get("success_percent") or 0) / 100 / duration


def rows_from_summary(summary: Mapping[str, Any], task: str) -> list[ActionRow]:
    """A row per workload and action of one summary.json (render.build_summary's shape)."""
    rows = []
    for wl in summary.get("workloads", []):
        key = f"{task}#{int(wl.get('index', 0)) + 1} {wl.get('scenario')}"
        counters = wl.get("counters") or {}
        for name, action in (wl.get("actions") or {}).items():
            found = counters.get(name)
            rows.append(
                ActionRow(
                    workload=key,
                    action=name,
                    p50=action.get("p50"),
                    p95=action.get("p95"),
                    p99=action.get("p99"),
                    rate=_rate(wl, name, action),
                    success_percent=action.get("success_percent"),
                    count=action.get("count"),
                    cpu_per_request=(found or {}).get("cpu_ms_per_request"),
                    counters=_counter_figures(found),
                )
            )
    return rows


def _counter_figures(found: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The per-request counters worth a series: SQL statements and DB time."""
    if not found:
        return None
    keep = ("traced_requests", "sql_statements_median", "sql_statements_max", "db_ms_median")
    return {k: found[k] for k in keep if k in found}


def rows_from_summaries(summaries: Iterable[tuple[str, Mapping[str, Any]]]) -> list[ActionRow]:
    """The rows of (task name, summary) pairs, as a verb hands them over."""
    return [row for task, summary in summaries for row in rows_from_summary(summary, task)]


def build_record(
    verb: str,
    keystone: Keystone,
    deployment: str | None,
    settings: Mapping[str, str],
    rows: Iterable[ActionRow],
    source: str,
    interference: Mapping[str, Any] | None = None,
) -> RunRecord:
    machine, model, cores = machine_line()
    return RunRecord(
        recorded_at=now(),
        verb=verb,
        keystone=keystone,
        deployment=deployment,
        settings=dict(settings),
        machine=machine,
        cpu_model=model,
        cores=cores,
        tool_version=tool_version(),
        source=source,
        rows=tuple(rows),
        interference=interference,
    )
