"""``keystone-bench capacity``: search N, the highest rate Keystone serves without degrading.

capacity.py holds the settings, the search and the verdicts; here each probe
is a real ``rally task start`` through the driver, watched line by line so
that an overloaded probe is stopped early.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rally_keystone_bench import boundary, shipped
from rally_keystone_bench.driver import left_behind, targets
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.probe_evidence import ProbeEvidence
from rally_keystone_bench.driver.rally import RallyHome, auth_url_of
from rally_keystone_bench.engines.locust import setup as locust_setup
from rally_keystone_bench.engines.locust.engine import MAX_PLANNED_REQUESTS
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.history.records import ActionRow
from rally_keystone_bench.report import capacity as capacity_report
from rally_keystone_bench.verbs import options
from rally_keystone_bench.verdicts import capacity, keystone_side, results
from rally_keystone_bench.verdicts.capacity import fmt

SLOTS_FULL = "every iteration slot in flight"
TICK_S = 10.0
say = rally_task.progress  # the search's progress lines


def _finite(name: str, value: float) -> float:
    if value is None or not math.isfinite(value):
        raise BenchError(f"{name} must be a finite number, not {value}")
    return float(value)


def check_settings(args: argparse.Namespace) -> capacity.Settings:
    """The search's settings from the command line; BenchError for any bad one."""
    if args.scenario not in capacity.SCENARIOS:
        raise BenchError(
            f"unknown scenario {args.scenario!r}: choose one of {', '.join(capacity.SCENARIOS)}"
        )
    low, high = _finite("--low", args.low), _finite("--high", args.high)
    warmup, window = _finite("--warmup", args.warmup), _finite("--window", args.window)
    max_slope = _finite("--max-slope", args.max_slope)
    precision = _finite("--precision", args.precision)
    if low <= 0:
        raise BenchError(f"--low must be above 0 rps, not {low:g}")
    if low > high:
        raise BenchError(f"--low ({low:g}) is above --high ({high:g})")
    if max_slope < 0:
        raise BenchError(f"--max-slope must not be negative, not {max_slope:g}")
    if precision <= 0:
        raise BenchError(f"--precision must be above 0 rps, not {precision:g}")
    if warmup < 0:
        raise BenchError(f"--warmup must not be negative, not {warmup:g}")
    if window <= 0:
        raise BenchError(f"--window must be above 0 s, not {window:g}")
    engine = getattr(args, "engine", None) or "rally"
    locust_workers = getattr(args, "locust_workers", None) or 1
    if getattr(args, "locust_workers", None) is not None and args.locust_workers < 1:
        raise BenchError(f"--locust-workers must be at least 1, not {args.locust_workers}")
    if getattr(args, "workers", None) is not None and getattr(args, "target", "local") != "local":
        # --workers is the local Keystone's; a Locust user may read it as load.py's
        hint = ": the Locust engine's worker processes are --locust-workers K"
        raise BenchError(
            f"--workers is the local Keystone's server processes (--target local), "
            f"not --target {args.target}" + (hint if engine == "locust" else "")
        )
    runner = getattr(args, "runner", None) or "pooled_rps"
    ramp = getattr(args, "ramp", None)
    if engine == "rally" and runner != "pooled_rps" and ramp:
        raise BenchError(f"--ramp runs on the pooled_rps runner, not --runner {runner}")
    if ramp is None:  # default: bracket first, wherever the runner can ramp
        ramp = engine == "locust" or runner == "pooled_rps"
    forced = options.check_rate("--high", high, engine, runner, getattr(args, "force", False))
    if forced:
        say(forced)
    planned = high * (warmup + window)
    if engine == "locust" and planned > MAX_PLANNED_REQUESTS:
        raise BenchError(
            f"--high {high:g} rps for {warmup + window:g} s plans {planned:.3g} requests in a "
            f"probe, more than the {MAX_PLANNED_REQUESTS:,} samples one run keeps in memory"
        )
    if low * window < 3:
        raise BenchError(
            f"--low {low:g} rps over a {window:g} s window gives fewer than 3 points "
            "to fit a slope: raise --low or --window"
        )
    return capacity.Settings(
        scenario=args.scenario,
        low=low,
        high=high,
        warmup=warmup,
        window=window,
        max_slope=max_slope,
        precision=precision,
        abort_on_sla_failure=getattr(args, "abort_on_sla_failure", True),
        runner=runner,
        engine=engine,
        locust_workers=locust_workers,
        ramp=ramp,
    )


class ProbeWatcher:
    """Stops a probe that cannot pass, and says how far it got every TICK_S seconds.

    With ABORT the probe is aborted (``rally task abort``: Rally stops the
    runner, then cleans up) at the first failed iteration, when every
    iteration slot is in flight, or when the starts fall behind the target
    rate (below 80 % of it after the warm-up, 5 s at least): Rally's own SLA
    abort sees results late on a busy machine, and once the runner waits for
    slots the latency stops growing, so an overloaded probe would otherwise
    run several times its length. A ramp (STEPS, its rates one after the
    other) is held to each step's rate and slots: it stops in the first step
    that has failed, and spends no time on the steps above it.
    """

    def __init__(
        self,
        task_args: dict[str, Any],
        abort: bool,
        say: Callable[[str], None],
        number: int,
        planned: int,
        steps: list[tuple[float, float]] | None = None,
        slots_for: Callable[[float], int] | None = None,
    ) -> None:
        rps, slots = float(task_args["rps"]), int(task_args["max_concurrency"])
        self.steps = steps or [(rps, float(task_args["warmup"]) + float(task_args["window"]))]
        self.slots_for = slots_for or (lambda _rate: slots)
        self.warmup = max(5.0, float(task_args["warmup"]))
        self.planned_s = sum(seconds for _, seconds in self.steps)
        self.abort, self.say, self.number, self.planned = abort, say, number, planned
        self.t0 = self.last = time.monotonic()
        self.first: float | None = None  # when the first iteration started

    def rate_at(self, since: float) -> float:
        """The schedule's rate SINCE seconds after the first start."""
        begin = 0.0
        for rate, seconds in self.steps:
            begin += seconds
            if since < begin:
                return rate
        return self.steps[-1][0]

    def due_by(self, since: float) -> float:
        """Iterations the schedule has started SINCE seconds after the first (at most all)."""
        due = begin = 0.0
        for rate, seconds in self.steps:
            due += rate * max(0.0, min(seconds, since - begin))
            begin += seconds
        return min(due, float(self.planned))

    def __call__(self, run: rally_task.TaskRun, line: str) -> None:
        c = run.counts
        now = time.monotonic()
        if self.first is None and c.started:
            self.first = now
        if self.abort and c.started:
            why = self.reason_to_stop(c, now)
            if why:
                run.stop(why)
        if now - self.last >= TICK_S and c.started:
            self.last = now
            self.say(
                f"  probe {self.number}: {now - self.t0:.0f} s, {c.started} of {self.planned} "
                f"started, {c.done} done, {c.failed} failed"
            )

    def reason_to_stop(self, c: rally_task.Counts, now: float) -> str | None:
        if c.failed:
            return "an iteration failed"
        since = now - (self.first if self.first is not None else now)
        if c.started - c.done >= self.slots_for(self.rate_at(since)):
            return SLOTS_FULL
        if since > self.warmup and c.started < 0.8 * self.due_by(since):
            return f"{c.started} started in {since:.0f} s, behind {fmt(self.rate_at(since))} rps"
        if since > 2 * self.planned_s + 30:
            return "running past twice its length"
        return None


class RallyProber:
    """Runs each probe as a real ``rally task start`` and judges its JSON report."""

    def __init__(
        self,
        home: RallyHome,
        env: str,
        settings: capacity.Settings,
        out_dir: Path,
        say: Callable[[str], None] = rally_task.progress,
        extra_args: dict[str, Any] | None = None,
        evidence: ProbeEvidence | None = None,
    ) -> None:
        self.home, self.env, self.settings = home, env, settings
        # Keystone's access log and the machine's CPU (None: the client's figures alone)
        self.evidence = evidence
        self.reference: keystone_side.KeystoneSide | None = None  # at the lowest passing rate
        self.reference_rate: float | None = None
        self.out_dir = out_dir
        # Task arguments beside the probe's own (an LDAP deployment's ldap_domain).
        self.extra_args = dict(extra_args or {})
        self.say = say
        self.task_file = shipped.probe_task_path()
        self.started = time.monotonic()
        self.expected = capacity.estimated_probes(settings)
        self.count = 0
        self.done: list[capacity.Probe] = []
        self.lo: float | None = None  # highest passing rate so far
        self.hi: float | None = None  # lowest non-passing rate so far
        self.tasks: list[rally_task.TaskOutcome] = []  # each probe's task, for say_left_behind

    def verdict_so_far(self) -> str:
        lo = fmt(self.lo) if self.lo is not None else "?"
        if self.hi is None:
            return f"N >= {lo} rps so far"
        return f"N in [{lo}, {fmt(self.hi)}) rps so far"

    def _run(
        self, stem: str, task_args: dict[str, Any], watcher: ProbeWatcher
    ) -> tuple[rally_task.TaskRun, Path, results.Workload]:
        """One ``rally task start`` of the probe task; its run, JSON report and workload."""
        s = self.settings
        log_path = self.out_dir / f"{stem}.rally.log"
        with left_behind.recorded(self.tasks):  # what a cut-short probe may have left
            run = rally_task.start_task(
                self.home,
                self.env,
                self.task_file,
                {**task_args, **self.extra_args},
                log_path,
                # pooled_rps counts for itself: Rally's ITER lines are silenced (CPU).
                config=self.home.quiet_config() if s.runner == "pooled_rps" else None,
                extra=["--abort-on-sla-failure"] if s.abort_on_sla_failure else [],
                watch=watcher,
            )
        self.tasks.append(left_behind.outcome_of(run))
        json_path = self.out_dir / f"{stem}.json"
        what = f"probe {watcher.number} ({stem})"
        if run.rc < 0:  # killed from outside (a signal of ours raises Interrupted instead)
            raise BenchError(f"{what}: rally task start exited {run.rc}, killed; see {log_path}")
        if run.uuid is None or not rally_task.json_report(self.home, run.uuid, json_path):
            raise BenchError(
                f"{what}: rally task start exited {run.rc} without a result; see {log_path}"
            )
        workloads = results.load(json_path)
        if not workloads:
            raise BenchError(f"{what} ran no workload (a context failed?); see {log_path}")
        return run, json_path, workloads[0]

    def _sampling(self) -> contextlib.AbstractContextManager:
        if self.evidence is None:
            return contextlib.nullcontext([None])
        return self.evidence.sampling()

    def _judge_side(
        self, probe: capacity.Probe, span: tuple[float, float], requests: list, machine: Any
    ) -> None:
        """Keystone's figures over SPAN (epoch seconds) and the machine's, added to PROBE."""
        side = keystone_side.keystone_side(requests, *span, self.settings.scenario)
        capacity.judge_keystone_side(probe, side, self.reference, machine)
        if probe.passed and side is not None and side.p95 is not None:
            if self.reference_rate is None or probe.rps < self.reference_rate:
                self.reference, self.reference_rate = side, probe.rps

    def _record(self, probe: capacity.Probe) -> None:
        self.done.append(probe)
        if probe.passed:
            self.lo = probe.rps if self.lo is None else max(self.lo, probe.rps)
        else:
            self.hi = probe.rps if self.hi is None else min(self.hi, probe.rps)

    def __call__(self, rps: float, role: str) -> capacity.Probe:
        s = self.settings
        self.count += 1
        k = self.count
        about = max(self.expected, k)
        probe = capacity.Probe(
            k, role, rps, planned=s.times(rps), max_concurrency=s.max_concurrency(rps)
        )
        elapsed = elapsed_text(time.monotonic() - self.started)
        self.say(
            f"probe {k} of about {about} ({role}): {fmt(rps)} rps, {probe.planned} iterations "
            f"over {s.warmup + s.window:g} s; elapsed {elapsed}"
        )
        if role.startswith("repeat") and self.evidence is not None:
            self.evidence.wait_quiet()
        t0 = time.monotonic()
        task_args = s.task_args(rps)
        watcher = ProbeWatcher(task_args, s.abort_on_sla_failure, self.say, k, probe.planned)
        with self._sampling() as machine:
            run, json_path, wl = self._run(f"probe-{k:02d}-{fmt(rps)}rps", task_args, watcher)
        probe.stopped_for = run.stopped_for
        probe.slots_full = probe.stopped_for == SLOTS_FULL
        probe.task_uuid = run.uuid
        probe.report = str(json_path)
        capacity.judge(probe, wl, s)
        if wl.iterations:
            begin = float(wl.iteration_started.min()) + s.warmup
            end = float((wl.iteration_started + wl.iteration_duration).max())
            requests = self.evidence.requests() if self.evidence is not None else []
            self._judge_side(probe, (begin, end), requests, machine[0])
        probe.elapsed = time.monotonic() - t0
        self._record(probe)
        why = f"; stopped: {probe.stopped_for}" if probe.stopped_for else ""
        self.say(
            f"probe {k}: {fmt(rps)} rps -> {probe.verdict} ({probe.reason}) in "
            f"{probe.elapsed:.0f} s{why}; "
            f"{self.verdict_so_far()}"
        )
        return probe

    def ramp(self, rates: list[float]) -> list[capacity.Probe]:
        """One Rally run through RATES (pooled_rps steps); a Probe judged per step.

        The run stops in the first step with a failed iteration, every slot
        of the step's rate in flight, or starts behind the schedule; the steps
        it did not reach are left out.
        """
        s = self.settings
        self.count += 1
        k = self.count
        steps = s.ramp_steps(rates)
        task_args = s.ramp_task_args(rates)
        elapsed = elapsed_text(time.monotonic() - self.started)
        self.say(
            f"probe {k} of about {max(self.expected, k)} (ramp): "
            f"{', '.join(fmt(r) for r in rates)} rps, {s.describe_ramp(rates)}; "
            f"elapsed {elapsed}"
        )
        t0 = time.monotonic()
        watcher = ProbeWatcher(
            task_args,
            s.abort_on_sla_failure,
            self.say,
            k,
            task_args["times"],
            steps=steps,
            slots_for=s.ramp_slots,
        )
        with self._sampling() as machine:
            run, json_path, wl = self._run(f"probe-{k:02d}-ramp", task_args, watcher)
        requests = self.evidence.requests() if self.evidence is not None else []
        zero = capacity.ramp_zero(wl)
        parts = []
        begin = 0.0
        for i, (rate, seconds) in enumerate(steps):
            lo, begin = begin + (s.warmup if i == 0 else 0.0), begin + seconds
            half = 0.5 / rate  # a step's first iteration is due half a gap early at most
            part = capacity.step_workload(wl, zero + lo - half, zero + begin - half)
            if part.iterations == 0:
                break  # the run stopped before this step
            parts.append((rate, begin - lo, part, (zero + lo - half, zero + begin - half)))
        out: list[capacity.Probe] = []
        for i, (rate, seconds, part, span) in enumerate(parts):
            probe = capacity.Probe(
                k,
                f"ramp {i + 1}/{len(rates)}",
                rate,
                planned=int(math.floor(rate * seconds + 1e-9)),
                max_concurrency=s.ramp_slots(rate),
                task_uuid=run.uuid,
                report=str(json_path),
            )
            if i == len(parts) - 1:  # the run stopped in the last step it reached
                probe.stopped_for = run.stopped_for
                probe.slots_full = run.stopped_for == SLOTS_FULL
            capacity.judge(probe, part, dataclasses.replace(s, warmup=0.0))
            if probe.stopped_for and probe.passed:
                # cut short in this step: it did not hold its rate to the end
                behind = "behind" in probe.stopped_for
                probe.verdict = capacity.GENERATOR if behind else capacity.SATURATED
                probe.reason = f"the ramp stopped here: {probe.stopped_for}"
            self._judge_side(probe, span, requests, machine[0])
            self._record(probe)
            out.append(probe)
            self.say(
                f"probe {k} ({probe.role}): {fmt(rate)} rps -> {probe.verdict} ({probe.reason})"
            )
        for probe in out[:-1]:  # the ramp's setup, like its time, goes on its last row
            probe.setup = None
        if out:
            out[-1].elapsed = time.monotonic() - t0
        return out


def elapsed_text(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def _search_locust(
    settings: capacity.Settings,
    run_dir: Path,
    out_dir: Path,
    args: argparse.Namespace,
    probers: list[capacity.Prober],
    **target: Any,
) -> tuple[capacity.Outcome, str]:
    """The search with every probe on the Locust engine (a ramp first to bracket N)."""
    from rally_keystone_bench.engines.locust.prober import LocustProber

    with targets.started_target(run_dir, say=rally_task.progress, **target) as (
        credential,
        auth_url,
    ):
        described = targets.describe(args.target, auth_url, target.get("mock"))
        rally_task.progress(
            f"target: {described}; engine: locust, {settings.locust_workers} worker(s)"
        )
        prober = LocustProber(credential, settings, out_dir, say)
        probers.append(prober)
        ramp = prober.ramp if settings.ramp else None
        return capacity.find_capacity(
            settings, prober, say=rally_task.progress, ramp=ramp
        ), described


def main(args: argparse.Namespace) -> int:
    """``keystone-bench capacity``: print N and write reports/<ts>/capacity.{json,html}."""
    settings = check_settings(args)
    options.check_target(args)
    shipped.probe_task_path()
    deployment = cloud = mock = None
    if args.target == "local":
        deployment = options.deployment(args)
        deployment.validate()
    elif args.target == "cloud":
        cloud = options.cloud_spec(args)
    options.check_history(args)
    out_dir, run_dir = rally_task.new_run_dirs(args.reports_dir)
    if args.target == "mock":
        mock = options.mock(args, run_dir)
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    rally_task.progress(
        f"capacity of {settings.rally_scenario} in [{fmt(settings.low)}, "
        f"{fmt(settings.high)}] rps, precision {fmt(settings.precision)}: about "
        f"{capacity.estimated_probes(settings)} probes of {settings.warmup + settings.window:g} s"
    )
    probers: list[capacity.Prober] = []  # the prober, once made: its probes are kept on error
    target = args.target
    try:
        with rally_task.sigterm_as_interrupt():
            if settings.engine == "locust":
                outcome, target = _search_locust(
                    settings,
                    run_dir,
                    out_dir,
                    args,
                    probers,
                    cloud=cloud,
                    mock=mock,
                    deployment=deployment,
                )
            else:
                with targets.prepared_env(
                    run_dir, cloud=cloud, mock=mock, deployment=deployment
                ) as env:
                    target = targets.describe(args.target, env.auth_url, mock)
                    rally_task.progress(f"target: {target}")
                    ldap = targets.identity_task_args(deployment, {})
                    evidence = ProbeEvidence(env.keystone_dir, say)
                    prober = RallyProber(
                        env.home, env.name, settings, out_dir, extra_args=ldap, evidence=evidence
                    )
                    probers.append(prober)
                    ramp = prober.ramp if settings.ramp else None
                    outcome = capacity.find_capacity(
                        settings, prober, say=rally_task.progress, ramp=ramp
                    )
    except (BenchError, KeyboardInterrupt):
        if probers and probers[0].done:  # keep what was measured
            partial = capacity.Outcome(
                None, "interrupted", message="the search did not finish", probes=probers[0].done
            )
            capacity_report.write_reports(
                partial, settings, target, out_dir, started_at, time.monotonic() - t0
            )
            rally_task.progress(f"the search did not finish; probes so far in {out_dir}")
        say_left_behind(probers, cloud, args.spec)
        raise
    elapsed = time.monotonic() - t0
    json_path, html_path = capacity_report.write_reports(
        outcome, settings, target, out_dir, started_at, elapsed
    )
    print(capacity_report.format_table(outcome.probes))
    print(f"{outcome.message}")
    print(f"capacity: {html_path}")
    print(f"capacity: {json_path}")
    print(f"elapsed: {elapsed_text(elapsed)}")
    say_left_behind(probers, cloud, args.spec)
    if outcome.status == "not measurable":
        raise BenchError(outcome.message)
    options.record_history(
        args, "capacity", out_dir, deployment, where=target, rows=[capacity_row(settings, outcome)]
    )
    return outcome.exit_code


def say_left_behind(probers: list, cloud: dict | None, spec: str | None) -> None:
    """On a cloud: what probes cut short (or whose cleanup failed) may have left there."""
    if cloud is None or not probers:
        return
    left_behind.say_left_behind(getattr(probers[0], "tasks", []), auth_url_of(cloud), spec)
    for run_id in getattr(probers[0], "run_ids", []):  # a Locust master killed
        what = locust_setup.describe_left(probers[0].credential, run_id)
        if what:
            print(left_behind.load_line(run_id, what, auth_url_of(cloud), spec))


def capacity_row(settings: capacity.Settings, outcome: capacity.Outcome) -> ActionRow:
    """The capacity as a history row: its rate is N (None when even --low degrades), its
    count the probes it took."""
    return ActionRow(
        workload=f"capacity {settings.rally_scenario} ({settings.engine})",
        action="capacity",
        p50=None,
        p95=None,
        p99=None,
        rate=outcome.n,
        success_percent=None,
        count=len(outcome.probes),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench capacity``."""
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--low", type=boundary.non_negative, default=1.0)
    parser.add_argument("--high", type=boundary.non_negative, default=200.0)
    parser.add_argument("--warmup", type=boundary.non_negative, default=60.0, help="seconds")
    parser.add_argument("--window", type=boundary.non_negative, default=300.0, help="seconds")
    parser.add_argument("--max-slope", type=boundary.number_in(), default=0.01)
    parser.add_argument("--precision", type=boundary.non_negative, default=1.0, help="rps")
    parser.add_argument(
        "--runner",
        choices=["pooled_rps", "rps"],
        default="pooled_rps",
        help="Rally runner of each probe: pooled_rps (ours, default) or Rally's rps",
    )
    parser.add_argument(
        "--engine",
        choices=["rally", "locust"],
        default="rally",
        help="load engine of every probe: rally (pooled_rps, default) or locust",
    )
    parser.add_argument(
        "--locust-workers",
        type=int,
        default=None,
        metavar="K",
        help="--engine locust: worker processes on this host (default 1); "
        "--workers stays the local Keystone's",
    )
    parser.add_argument(
        "--ramp",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bracket N with one ramp probe first (default: on, but with --runner rps)",
    )
    parser.add_argument("--target", choices=["local", "cloud", "mock"], default="local")
    parser.add_argument("--spec", default=None)
    parser.add_argument("--reports-dir", default="reports")
    options.add_force_option(parser)
    options.add_history_option(parser)
    parser.add_argument(
        "--abort-on-sla-failure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stop a failing probe early (default on)",
    )
    parser.add_argument(
        "--mock-workers", type=boundary.positive_int, default=1, help="--target mock: processes"
    )
    parser.add_argument(
        "--mock-service-time",
        type=boundary.non_negative,
        default=20.0,
        metavar="MS",
        help="--target mock: ms per token request and worker (default 20: 50 rps a worker)",
    )
    options.add_deployment_options(parser)
