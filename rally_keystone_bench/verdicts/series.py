"""Series over the store's runs: one per workload, action, deployment and machine, and
the change points found in each. Numbers only: the store's runs come in as
dicts, and the commits between two runs through a function the caller gives.

A series holds one metric (p50, p95, p99, rate, ...) of one action, run after
run in the order they were recorded. Runs of a different deployment line or
machine are a different series: a faster machine is not a Keystone change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rally_keystone_bench.verdicts.changepoints import (
    ChangePoint,
    ChangePointSettings,
    find_change_points,
)

METRICS = ("p50", "p95", "p99", "rate", "success_percent", "cpu_per_request")


@dataclasses.dataclass(frozen=True)
class Point:
    run_id: int
    recorded_at: str
    keystone: str
    value: float
    deployment: str = ""


@dataclasses.dataclass(frozen=True)
class Series:
    workload: str
    action: str
    deployment: str
    machine: str
    metric: str
    points: tuple[Point, ...]

    @property
    def key(self) -> str:
        return f"{self.workload} / {self.action} [{self.metric}] on {self.deployment}"


@dataclasses.dataclass(frozen=True)
class Found:
    """A change point placed in its series: the runs either side and the commits between."""

    series: Series
    change: ChangePoint
    run_before: Point
    run_after: Point
    commits: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "workload": self.series.workload,
            "action": self.series.action,
            "metric": self.series.metric,
            "deployment": self.series.deployment,
            "machine": self.series.machine,
            "run": self.run_after.run_id,
            "run_before": self.run_before.run_id,
            "position": self.change.index,
            "mean_before": self.change.mean_before,
            "mean_after": self.change.mean_after,
            "relative_change": self.change.relative_change,
            "p_value": self.change.p_value,
            "keystone_before": self.run_before.keystone,
            "keystone_after": self.run_after.keystone,
            "commits": list(self.commits),
        }


def _keystone_label(run: Mapping[str, Any]) -> str:
    return run.get("keystone_describe") or run.get("keystone") or "?"


ANY_DEPLOYMENT = "any deployment"


def build_series(
    runs: Sequence[Mapping[str, Any]], metric: str = "p50", across_deployments: bool = False
) -> list[Series]:
    """Every series of METRIC in RUNS (store.runs() order: oldest first); ACROSS_DEPLOYMENTS:
    one series over every deployment line (an experiment that changes a setting)."""
    if metric not in METRICS:
        raise ValueError(metric)
    grouped: dict[tuple[str, str, str, str], list[Point]] = {}
    for run in runs:
        for row in run["rows"]:
            value = row.get(metric)
            if value is None:
                continue
            line = ANY_DEPLOYMENT if across_deployments else run.get("deployment") or ""
            key = (row["workload"], row["action"], line, run["machine"])
            grouped.setdefault(key, []).append(
                Point(
                    run["id"],
                    run["recorded_at"],
                    _keystone_label(run),
                    float(value),
                    run.get("deployment") or "",
                )
            )
    return [Series(*key, metric, tuple(points)) for key, points in grouped.items()]


# (older run, newer run) -> "sha subject" lines of the Keystone commits between them
CommitsBetween = Callable[[Mapping[str, Any], Mapping[str, Any]], Sequence[str]]


def change_points(
    series: Series,
    runs_by_id: Mapping[int, Mapping[str, Any]],
    settings: ChangePointSettings | None = None,
    commits_between: CommitsBetween | None = None,
) -> list[Found]:
    """The change points of SERIES, each with the Keystone commits between its two runs."""
    found = []
    values = [p.value for p in series.points]
    for cp in find_change_points(values, settings):
        before, after = series.points[cp.index - 1], series.points[cp.index]
        commits: Sequence[str] = ()
        if commits_between is not None:
            old, new = runs_by_id.get(before.run_id, {}), runs_by_id.get(after.run_id, {})
            commits = commits_between(old, new)
        found.append(Found(series, cp, before, after, tuple(commits)))
    return found
