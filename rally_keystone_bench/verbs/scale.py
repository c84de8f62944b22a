"""The ``keystone-bench scale`` verb: how a token path's latency grows with a data size.

One point per size: a fresh local Keystone, the data-size context at that
size (tasks/data-sizes.yaml), or for a size the Keystone host holds (its
Fernet keys) a Keystone started with it, the workload measured as ``run`` measures it,
the Keystone stopped. Each point's p50/p95 and setup time are printed as it
ends; then the cost per unit of size with its interval, and whether growth
is flat, linear or faster (verdicts/growth.py). A point that saturates (too
slow at p95, or failing) ends the sweep early, and the output says so.

The points run one after another, so the machine's speed moves between them
as it moves over minutes. Unless ``--drift-check off``, the first point is
measured again after the last, on a fresh Keystone as before: how far its
median moved is the change the machine made in the sweep's time, and a
change of the median over the sweep within it is flat, not growth.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from rally_keystone_bench import boundary
from rally_keystone_bench.deploy import limits as machine_limits
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.driver import interrupts, targets, task_files, task_reports, workspace
from rally_keystone_bench.errors import BenchError, Interrupted
from rally_keystone_bench.report import scale as report
from rally_keystone_bench.verbs import groups, options, recording
from rally_keystone_bench.verdicts import growth

TASK = "data-sizes.yaml"
DEPLOYMENT = groups.Deployment()  # the local Keystone each point starts
ACTIONS = {
    "validate": "keystone.validate_token",
    "validate-catalog": "keystone.validate_token",
    "authenticate": "keystone.issue_token",
}
EXIT_INCONCLUSIVE = 3


@dataclasses.dataclass(frozen=True)
class ScaleSettings:
    """scale's own options, as given (the local Keystone's: the Deployment group's)."""

    dimension: str
    values: str  # N,N,...
    request: str
    times: int
    concurrency: int
    max_p95_ms: float
    drift_check: str  # on or off
    force: bool
    reports_dir: str
    history: str | None  # the results store (None: the environment's, if any)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench scale``."""
    p.add_argument(
        "--dimension",
        required=True,
        metavar="NAME",
        help=f"the size swept: {', '.join(sorted(growth.DIMENSIONS))}",
    )
    p.add_argument(
        "--values", required=True, metavar="N,N,...", help="the sizes, e.g. 0,1000,10000"
    )
    p.add_argument(
        "--request",
        choices=sorted(ACTIONS),
        default="validate",
        help="the request each point measures (default validate: GET /v3/auth/tokens of "
        "pooled tokens)",
    )
    # the former spelling: --workload names a workload (cleanup --workload-id, history)
    options.add_deprecated_alias(p, "--workload", "--request", dest="request")
    p.add_argument("--times", type=boundary.positive_int, default=200, help="requests per point")
    p.add_argument(
        "--concurrency",
        type=boundary.positive_int,
        default=2,
        help="parallel requests at each point (default 2)",
    )
    p.add_argument(
        "--max-p95-ms",
        type=boundary.number_in(1.0),
        default=2000.0,
        help="a point slower than this at p95 (or under 99%% success) ends the sweep "
        "(default 2000)",
    )
    p.add_argument(
        "--drift-check",
        choices=("on", "off"),
        default="on",
        help="measure the first point again after the last, and read a change within "
        "what it moved as the machine's (default on: one point more)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="make data of a size above what this machine can hold (deploy/limits.py)",
    )
    options.add_reports_dir_option(p)
    DEPLOYMENT.add(p)
    options.add_history_option(p)


def main(args: argparse.Namespace) -> int:
    settings = options.read(ScaleSettings, args)
    deployment = DEPLOYMENT.unchecked(args)  # validated below, once the sizes are
    plan = growth.plan_sweep(settings.dimension, settings.values)
    if not settings.force:
        machine_limits.check_data_size(plan.values[-1], plan.dimension.unit)
    deployment.validate()
    point_deployment(deployment, plan.dimension, plan.values[0])  # a clash is bad input
    task = task_files.checked(TASK, {})
    limits = growth.Limits(max_p95=settings.max_p95_ms / 1000)
    action = ACTIONS[settings.request]
    # Keystone's environment before the first point: a SPEC that does not
    # install is bad input, said once, before any Keystone starts.
    targets.check_deployment(deployment)
    history = options.check_store(options.history_url(settings.history))
    out_dir, run_dir = workspace.new_run_dirs(settings.reports_dir)
    print(f"scale: {plan.describe()}; {settings.request}, {settings.times} requests per point")
    sweep = Sweep(plan.dimension, action, deployment.describe())
    outcomes = []  # each point's, for the results store

    def measure(size: int, name: str) -> Any:
        task_args = targets.identity_task_args(
            deployment,
            {
                "workload": settings.request,
                "times": settings.times,
                "concurrency": settings.concurrency,
                "sizes": plan.dimension.contexts(size),
            },
        )
        dep = point_deployment(deployment, plan.dimension, size)
        with targets.prepared_env(run_dir / name, deployment=dep) as env:
            outcomes.append(
                task_reports.run_task(env.home, env.name, task, task_args, out_dir / name)
            )
            return outcomes[-1]

    try:
        with interrupts.sigterm_as_interrupt():
            for size in plan.values:
                outcome = measure(size, f"point-{size}")
                if not sweep.add(size, outcome, limits, out_dir / f"point-{size}"):
                    break
            if settings.drift_check == "on" and sweep.whole(len(plan.values)):
                first = plan.values[0]
                sweep.add_again(measure(first, f"point-{first}-again"))
    except Interrupted:
        sweep.finish(out_dir, interrupted=True)
        raise
    finally:
        workspace.remove_if_empty(out_dir, run_dir)
    rc = sweep.finish(out_dir)
    summaries = recording.summaries_of_outcomes(outcomes, out_dir, "scale")
    options.record_history(history, "scale", out_dir, deployment, summaries)
    return rc


def point_deployment(deployment: Deployment, dim: growth.Dimension, size: int) -> Deployment:
    """The deployment of one point: DEPLOYMENT, plus the keystone.conf size DIM sets there."""
    settings = dim.settings(size)
    clash = sorted(set(settings) & set(deployment.conf))
    if clash:
        raise BenchError(f"--set {clash[0]}: --dimension {dim.name} sets it at each point")
    if not settings:
        return deployment
    return dataclasses.replace(deployment, conf={**deployment.conf, **settings})


class Sweep:
    """The points measured so far, printed as they come, and the verdict at the end."""

    def __init__(self, dim: growth.Dimension, action: str, deployment: str) -> None:
        self.dim, self.action, self.deployment = dim, action, deployment
        self.points: list[growth.Point] = []
        self.setups: list[float | None] = []
        self.stopped: str | None = None
        self.failed: str | None = None
        self.again: growth.Point | None = None

    @property
    def drift(self) -> float | None:
        """How far the first point moved when measured again (None: not measured again)."""
        return None if self.again is None else growth.machine_drift(self.points[0], self.again)

    def _point(self, size: int, outcome: Any) -> growth.Point:
        """The timed action's successful durations in OUTCOME, as the point at SIZE."""
        wl = outcome.workloads[0] if outcome.workloads else None
        samples = wl.actions.get(self.action) if wl else None
        if not samples:
            return growth.Point(size, (), 0.0)
        durations = tuple(float(v) for v in samples.ok_durations())
        return growth.Point(size, durations, samples.success_percent)

    def whole(self, planned: int) -> bool:
        """Every planned point measured, none stopped or failed: worth a drift check."""
        return len(self.points) == planned and not (self.stopped or self.failed)

    def add_again(self, outcome: Any) -> None:
        """The first point measured again: how far the machine moved its median."""
        first = self.points[0]
        again = self._point(first.size, outcome)
        if not again.latencies:
            print("    the first point again gave no result: no drift check")
            return
        self.again = again
        print(report.point_line(self.dim, again, None, " (first point again)"), flush=True)
        print(
            f"machine: the first point moved {self.drift:.1%} between the start and the end "
            f"(p50 {first.percentile(50) * 1000:.1f} -> {again.percentile(50) * 1000:.1f} ms)"
        )

    def add(self, size: int, outcome: Any, limits: growth.Limits, where: Path) -> bool:
        """Record one point (its reports in WHERE); False when the sweep must stop here."""
        wl = outcome.workloads[0] if outcome.workloads else None
        if wl is None or wl.iterations == 0:
            self.failed = (
                f"the point at {size:,} {self.dim.unit} gave no result "
                f"(rally task start exited {outcome.rally_exit}; see {where})"
            )
            print(f"    {self.failed}")
            return False
        point = self._point(size, outcome)
        setup = context_setup_seconds(outcome.json_report, self.dim.context)
        self.points.append(point)
        self.setups.append(setup)
        print(report.point_line(self.dim, point, setup, counters_of(outcome)), flush=True)
        why = growth.saturated(point, limits)
        if why:
            self.stopped = f"saturated at {size:,} {self.dim.unit}: {why}"
            return False
        return True

    def finish(self, out_dir: Path, interrupted: bool = False) -> int:
        """Print the verdict and write scale.json/html; the exit code."""
        fit = None
        measured = [p for p in self.points if p.latencies]
        if len(measured) >= 2:
            fit = growth.fit_growth(measured, drift=self.drift or 0.0)
        if self.stopped:
            print(f"stopped early: {self.stopped}; the larger sizes were not run")
        if fit is not None:
            print(f"growth: {fit.sentence(self.dim)}")
            print(f"    {fit.reason}")
        else:
            print("growth: not fitted: fewer than two points measured")
        if self.points and out_dir.is_dir():
            doc = report.summary(
                self.dim, self.action, self.points, self.setups, fit, self.stopped, self.deployment,
                again=self.again, drift=self.drift,
            )  # fmt: skip
            json_path, html_path = report.write(
                out_dir, doc, report.chart(self.dim, self.action, self.points, fit)
            )
            print(f"reports: {html_path} {json_path}")
        if interrupted:
            return 0
        if self.failed and fit is None:
            raise BenchError(self.failed)
        return 0 if fit is not None else EXIT_INCONCLUSIVE


def context_setup_seconds(json_report: Path | None, context: str) -> float | None:
    """How long CONTEXT's setup took, from Rally's JSON report (its contexts_results)."""
    if json_report is None or not json_report.exists():
        return None
    try:
        doc = json.loads(json_report.read_text())
        results = doc["tasks"][0]["subtasks"][0]["workloads"][0]["contexts_results"]
    except (ValueError, KeyError, IndexError):
        return None
    for ctx in results:
        if ctx.get("plugin_name", "").split("@")[0] == context:
            setup = ctx.get("setup") or {}
            if setup.get("started_at") and setup.get("finished_at"):
                return float(setup["finished_at"]) - float(setup["started_at"])
    return None


def counters_of(outcome: Any) -> str:
    """Keystone-side counters of a point (SQL statements per request...), as a suffix.

    The seam for the counters work (issue: counts from Keystone's side):
    once it records them with a run's outcome, they are printed here, beside
    each point's percentiles. Empty until then.
    """
    return ""
