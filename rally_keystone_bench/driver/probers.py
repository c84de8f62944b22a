"""Capacity probes and ``load`` on the Rally engine: one ``rally task start`` each.

``RallyProber.run(rate, report, log)`` runs the probe task once at RATE
and leaves its JSON report at REPORT (``keystone-bench load``);
``RallyProber(rate, role)`` and ``RallyProber.ramp(rates)`` run it the same
way, watched line by line so that an overloaded probe is stopped early
(``ProbeWatcher``), and judge the report (``keystone-bench capacity``).
The interface is ``verdicts/probing.Prober``; engines/locust has the other.
Each ``rally task start`` runs under the machine's sampler (driver/machine.py):
a probe keeps the machine's record of its load window (of each step, for a
ramp) and says it as ``run`` does.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rally_keystone_bench import procstat, shipped
from rally_keystone_bench.driver import left_behind, probe_args, rally
from rally_keystone_bench.driver import machine as machine_record
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.outcome import TaskOutcome
from rally_keystone_bench.driver.probe_evidence import ProbeEvidence
from rally_keystone_bench.driver.rally import RallyHome, last_line
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verdicts import (
    capacity,
    keystone_side,
    machine,
    probe_verdict,
    ramps,
    results,
)
from rally_keystone_bench.verdicts.capacity import fmt
from rally_keystone_bench.verdicts.probing import LoadRun

SLOTS_FULL = "every iteration slot in flight"
Sampling = Callable[[], contextlib.AbstractContextManager[Any]]  # driver/machine.sampling
TICK_S = 10.0


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
    """Runs each load as a real ``rally task start`` (``run``); judges a probe's JSON report."""

    def __init__(
        self,
        home: RallyHome,
        env: str,
        settings: capacity.Settings,
        out_dir: Path,
        say: Callable[[str], None] = rally_task.progress,
        extra_args: dict[str, Any] | None = None,
        evidence: ProbeEvidence | None = None,
        plan: capacity.Plan | None = None,
        reuse: str | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        """SAMPLING: what each load runs under (driver/machine.sampling; by default one
        naming EVIDENCE's Keystone, none without evidence)."""
        self.home, self.env, self.settings = home, env, settings
        # keystone_users' reuse tag: every probe of the search uses the same users
        self.reuse = reuse
        # Keystone's access log and the machine's CPU (None: the client's figures alone)
        self.evidence = evidence
        if sampling is None and evidence is not None:
            sampling = machine_record.sampling(*filter(None, [evidence.keystone_dir]))
        self.sampling = sampling
        self.reference: keystone_side.KeystoneSide | None = None  # at the lowest passing rate
        self.reference_rate: float | None = None
        self.out_dir = out_dir
        # Task arguments beside the probe's own (an LDAP deployment's ldap_domain).
        self.extra_args = dict(extra_args or {})
        self.say = say
        self.task_file = shipped.probe_task_path()
        self.started = time.monotonic()
        # the search's plan: "probe k of about M" reads it; the search grows it
        self.plan = plan or capacity.Plan(capacity.estimated_probes(settings))
        self.count = 0
        self.done: list[probe_verdict.Probe] = []
        self.tasks: list[TaskOutcome] = []  # each run's task, for say_left_behind

    def verdict_so_far(self) -> str:
        return so_far(self.done)

    def run(
        self,
        rate: float,
        report: Path,
        log: Path,
        *,
        task_args: dict[str, Any] | None = None,
        watch: ProbeWatcher | None = None,
    ) -> LoadRun:
        """One ``rally task start`` of the probe task at RATE, its JSON report at REPORT.

        TASK_ARGS (default: the settings' one probe at RATE) say what runs,
        WATCH sees each line (default: Rally's progress lines); its output
        goes to LOG. A run without a report says why in its ``error``.
        """
        s = self.settings
        sampled = self.sampling() if self.sampling is not None else contextlib.nullcontext()
        # what a run cut short may have left; the machine while it ran
        with left_behind.recorded(self.tasks), sampled as sampler:
            task = rally_task.start_task(
                self.home,
                self.env,
                self.task_file,
                {**(task_args or probe_args.task_args(s, rate)), **self.extra_args},
                log,
                # pooled_rps counts for itself: Rally's ITER lines are silenced (CPU).
                config=self.home.quiet_config() if s.runner == "pooled_rps" else None,
                extra=["--abort-on-sla-failure"] if s.abort_on_sla_failure else [],
                watch=watch,
            )
        self.tasks.append(left_behind.outcome_of(task))
        done = LoadRun(
            None, log, uuid=task.uuid, rc=task.rc, stopped_for=task.stopped_for, sampler=sampler
        )
        if task.uuid is None:
            done.error = f"rally task start exited {task.rc} without a result; see {log}"
            return done
        proc = rally.task_report(self.home, task.uuid, report)
        if proc.returncode == 0:
            done.report = report
        else:
            done.error = f"rally task report failed: {last_line(proc)}"
        return done

    def _probe_run(
        self, stem: str, task_args: dict[str, Any], watcher: ProbeWatcher
    ) -> tuple[LoadRun, Path, results.Workload]:
        """One run of a capacity probe named STEM; its run, JSON report and workload."""
        log_path = self.out_dir / f"{stem}.rally.log"
        json_path = self.out_dir / f"{stem}.json"
        run = self.run(task_args["rps"], json_path, log_path, task_args=task_args, watch=watcher)
        what = f"probe {watcher.number} ({stem})"
        if run.rc < 0:  # killed from outside (a signal of ours raises Interrupted instead)
            raise BenchError(f"{what}: rally task start exited {run.rc}, killed; see {log_path}")
        if run.report is None:
            raise BenchError(
                f"{what}: rally task start exited {run.rc} without a result; see {log_path}"
            )
        workloads = results.load(json_path)
        if not workloads:
            raise BenchError(f"{what} ran no workload (a context failed?); see {log_path}")
        if workloads[0].iterations == 0 and not run.stopped_for:
            # a context's setup failed (seen: token_pool's issues timing out on a machine
            # at load 24): nothing ran, so nothing can be judged
            why = context_failure(log_path)
            raise BenchError(f"{what} ran no iteration: {why}; see {log_path}")
        return run, json_path, workloads[0]

    def _judge_side(
        self,
        probe: probe_verdict.Probe,
        span: tuple[float, float],
        requests: list,
        sampler: procstat.Sampler | None,
    ) -> None:
        """Keystone's figures over SPAN (epoch seconds) and the machine's, added to PROBE."""
        side = keystone_side.keystone_side(requests, *span, self.settings.scenario)
        seen = None
        if sampler is not None:
            seen = keystone_side.machine_during(machine.within(sampler.intervals, [span]))
            probe.machine = machine.of_sampler(sampler, [span])
        probe_verdict.judge_keystone_side(probe, side, self.reference, seen)
        if probe.passed and side is not None and side.p95 is not None:
            if self.reference_rate is None or probe.rps < self.reference_rate:
                self.reference, self.reference_rate = side, probe.rps

    def _record(self, probe: probe_verdict.Probe) -> None:
        self.done.append(probe)

    def __call__(self, rps: float, role: str) -> probe_verdict.Probe:
        s = self.settings
        self.count += 1
        k = self.count
        about = max(self.plan.about, k)
        probe = probe_verdict.Probe(
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
        task_args = probe_args.task_args(s, rps, self.reuse)
        watcher = ProbeWatcher(task_args, s.abort_on_sla_failure, self.say, k, probe.planned)
        run, json_path, wl = self._probe_run(f"probe-{k:02d}-{fmt(rps)}rps", task_args, watcher)
        probe.stopped_for = run.stopped_for
        probe.slots_full = probe.stopped_for == SLOTS_FULL
        probe.task_uuid = run.uuid
        probe.report = str(json_path)
        probe_verdict.judge(probe, wl, s)
        if wl.iterations:
            begin = float(wl.iteration_started.min()) + s.warmup
            end = float((wl.iteration_started + wl.iteration_duration).max())
            requests = self.evidence.requests() if self.evidence is not None else []
            self._judge_side(probe, (begin, end), requests, run.sampler)
        probe.elapsed = time.monotonic() - t0
        self._record(probe)
        why = f"; stopped: {probe.stopped_for}" if probe.stopped_for else ""
        self.say(
            f"probe {k}: {fmt(rps)} rps -> {probe.verdict} ({probe.reason}) in "
            f"{probe.elapsed:.0f} s{why}; "
            f"{self.verdict_so_far()}"
        )
        say_machine(self.say, probe.machine)
        return probe

    def ramp(self, rates: list[float]) -> list[probe_verdict.Probe]:
        """One Rally run through RATES (pooled_rps steps); a Probe judged per step.

        The run stops in the first step with a failed iteration, every slot
        of the step's rate in flight, or starts behind the schedule; the steps
        it did not reach are left out.
        """
        s = self.settings
        self.count += 1
        k = self.count
        steps = s.ramp_steps(rates)
        task_args = probe_args.ramp_task_args(s, rates, self.reuse)
        elapsed = elapsed_text(time.monotonic() - self.started)
        self.say(
            f"probe {k} of about {max(self.plan.about, k)} (ramp): "
            f"{', '.join(fmt(r) for r in rates)} rps, {probe_args.describe_ramp(s, rates)}; "
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
        run, json_path, wl = self._probe_run(f"probe-{k:02d}-ramp", task_args, watcher)
        requests = self.evidence.requests() if self.evidence is not None else []
        zero = ramps.ramp_zero(wl)
        parts = []
        begin = 0.0
        for i, (rate, seconds) in enumerate(steps):
            lo, begin = begin + (s.warmup if i == 0 else 0.0), begin + seconds
            half = 0.5 / rate  # a step's first iteration is due half a gap early at most
            part = ramps.step_workload(wl, zero + lo - half, zero + begin - half)
            if part.iterations == 0:
                break  # the run stopped before this step
            parts.append((rate, begin - lo, part, (zero + lo - half, zero + begin - half)))
        out: list[probe_verdict.Probe] = []
        for i, (rate, seconds, part, span) in enumerate(parts):
            probe = probe_verdict.Probe(
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
            ramps.judge_step(probe, part, s)
            if probe.stopped_for and probe.passed:
                # cut short in this step: it did not hold its rate to the end
                behind = "behind" in probe.stopped_for
                probe.verdict = probe_verdict.GENERATOR if behind else probe_verdict.SATURATED
                probe.reason = f"the ramp stopped here: {probe.stopped_for}"
            self._judge_side(probe, span, requests, run.sampler)
            self._record(probe)
            out.append(probe)
            self.say(
                f"probe {k} ({probe.role}): {fmt(rate)} rps -> {probe.verdict} ({probe.reason})"
            )
        for probe in out[:-1]:  # the ramp's setup, like its time, goes on its last row
            probe.setup = None
        if out:
            out[-1].elapsed = time.monotonic() - t0
        if parts:  # the ramp's one line: over every step it reached
            say_machine(self.say, machine.of_sampler(run.sampler, [s for *_, s in parts]))
        return out


def say_machine(say: Callable[[str], None], state: machine.MachineState | None) -> None:
    """``  machine during the load: ...``, the line ``run`` prints, for a probe that has one."""
    if state is not None:
        say(f"  machine during the load: {state.headline()}")


def context_failure(log_path: Path) -> str:
    """Rally's one line on a context that failed to set up, from its task log (or a guess)."""
    marker = "ContextSetupFailure: "
    with contextlib.suppress(OSError):
        for line in log_path.read_text(errors="replace").splitlines():
            if marker in line:
                return line.split(marker, 1)[1].strip()[:300]
    return "a context failed to set up?"


def so_far(probes: list[probe_verdict.Probe]) -> str:
    """Where N lies after PROBES, as ``[ok, degraded)``: the highest rate that passed and
    the lowest above it that did not; rates that did not pass below it are named."""
    ok, degraded, below = capacity.interval(probes)
    if ok is None:
        return f"N < {fmt(degraded)} rps so far" if degraded is not None else "N unknown so far"
    text = (
        f"N in [{fmt(ok)}, {fmt(degraded)}) rps so far"
        if degraded
        else f"N >= {fmt(ok)} rps so far"
    )
    if below:
        text += f" ({', '.join(fmt(r) for r in below)} rps did not pass once, below it)"
    return text


def elapsed_text(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"
