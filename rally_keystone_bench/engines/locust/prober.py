"""Capacity probes and ``load`` on the Locust engine: one load per probe, or one ramp.

``LocustProber.run(rate, report, log)`` runs one load at RATE and keeps its
report at REPORT (``keystone-bench load``; the interface is
verdicts/probing.Prober, driver/probers has Rally's). ``LocustProber(rate,
role)`` runs ``warmup + window`` seconds at RATE the same way and judges the
report with probe_verdict.judge, as a Rally probe is judged; the
warm-up is cut from the Locust report already, so the judge sees no
warm-up. ``LocustProber.ramp(rates)`` runs the rates one after the other in
one load (the first step also carries the warm-up) and judges each step on
its own samples: errors, the latency slope within the step, saturation,
the generator's lag. With a ``sampling`` (driver/machine.sampling, from the
verb) each load runs under the machine's sampler: a probe (a ramp's step)
keeps the machine's record of its window and says it as ``run`` does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.engines.locust import engine, schedule, setup
from rally_keystone_bench.engines.locust import samples as sm
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.report import locust_report
from rally_keystone_bench.verdicts import capacity, machine, probe_verdict, ramps, results
from rally_keystone_bench.verdicts.capacity import fmt
from rally_keystone_bench.verdicts.probing import LoadRun

MAX_CONNECTIONS = 500
REQUEST_TIMEOUT_S = 10.0  # an answer later than this fails the request (and the probe)


def connections(settings: capacity.Settings, rps: float) -> int:
    """Users (connections) of a probe: Rally's slot budget, at most MAX_CONNECTIONS."""
    return max(2 * settings.locust_workers, min(MAX_CONNECTIONS, settings.max_concurrency(rps)))


class LocustProber:
    def __init__(
        self,
        credential: Mapping[str, Any],
        settings: capacity.Settings,
        out_dir: Path,
        say: Callable[[str], None],
        load: engine.LoadSettings | None = None,
        sampling: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    ) -> None:
        """LOAD: the load of ``run`` at any rate (default: a probe of SETTINGS, 10 s timeout);
        SAMPLING: what each load runs under (driver/machine.sampling; default none)."""
        self.credential = credential
        self.settings = settings
        self.out_dir = out_dir
        self.say = say
        self.load = load or engine.LoadSettings(
            scenario=settings.scenario,
            rate=1.0,
            duration=settings.window,
            warmup=settings.warmup,
            workers=settings.locust_workers,
            timeout=REQUEST_TIMEOUT_S,
        )
        self.sampling = sampling
        self.count = 0
        self.done: list[probe_verdict.Probe] = []
        self.run_ids: list[str] = []  # each load's id: the names of its users (describe_left)
        self.started = time.monotonic()

    def run(
        self, rate: float, report: Path, log: Path, run_id: str | None = None, **load: Any
    ) -> LoadRun:
        """One load at RATE (LOAD: other settings of it), its files in LOG, its report at REPORT.

        RUN_ID names the users its master makes (``kbl-RUN_ID``: what a killed
        master leaves); a new one by default. A signal stops it: the samples
        sent until then, when the master wrote them, go with the
        KeyboardInterrupt as ``exc.run``.
        """
        s = dataclasses.replace(self.load, rate=rate, **load)
        run_id = run_id or setup.new_run_id()
        self.run_ids.append(run_id)
        try:
            result = engine.run_load(
                s, self.credential, log, self.say, run_id=run_id, sampling=self.sampling
            )
        except KeyboardInterrupt as exc:
            kept = getattr(exc, "result", None)
            if kept is not None:
                exc.run = _kept(kept, report, interrupted=True)  # type: ignore[attr-defined]
            raise
        return _kept(result, report)

    def _load(self, stem: str, rate: float, **kw: Any) -> LoadRun:
        """A capacity probe's load, its files in OUT_DIR/STEM; BenchError for a lost worker."""
        where = self.out_dir / stem
        run = self.run(rate, where / "locust-report.json", where, **kw)
        if run.error:
            raise BenchError(f"{stem}: {run.error}")
        return run

    def __call__(self, rps: float, role: str) -> probe_verdict.Probe:
        s = self.settings
        self.count += 1
        k = self.count
        users = connections(s, rps)
        probe = probe_verdict.Probe(k, role, rps, planned=s.times(rps), max_concurrency=users)
        self.say(
            f"probe {k} ({role}): {fmt(rps)} rps over {s.warmup + s.window:g} s on "
            f"{s.locust_workers} Locust worker(s), {users} connections"
        )
        t0 = time.monotonic()
        run = self._load(f"probe-{k:02d}-{fmt(rps)}rps", rate=rps, users=users)
        (wl,) = results.load(run.report)
        probe.report = str(run.report)
        probe_verdict.judge(probe, wl, dataclasses.replace(s, warmup=0.0))
        probe.planned = s.times(rps) - int(math.floor(rps * s.warmup + 1e-9))
        probe.elapsed = time.monotonic() - t0
        probe.machine = machine.of_sampler(run.sampler, machine.load_windows([wl]))
        self._said(probe)
        self._say_machine(probe.machine)
        return probe

    def ramp(self, rates: list[float]) -> list[probe_verdict.Probe]:
        s = self.settings
        self.count += 1
        k = self.count
        step_s = s.ramp_step_s
        steps = [schedule.Step(rate, seconds) for rate, seconds in s.ramp_steps(rates)]
        users = connections(s, max(rates))
        self.say(
            f"probe {k} (ramp): {', '.join(fmt(r) for r in rates)} rps, {step_s:g} s each "
            f"after {s.warmup:g} s of warm-up, on {s.locust_workers} Locust worker(s)"
        )
        t0 = time.monotonic()
        run = self._load(
            f"probe-{k:02d}-ramp",
            steps=tuple(steps),
            users=users,
            rate=max(rates),
            warmup=0.0,
            stop_when_degraded=True,
        )
        everything = json.loads(run.samples.read_text())
        t_zero = run.meta["t0"]
        out, spans = [], []
        for i, (rate, begin, end) in enumerate(schedule.step_bounds(steps)):
            if i == 0:
                begin += s.warmup
            half = 0.5 / rate
            mine = [x for x in everything if t_zero + begin - half <= x[2] < t_zero + end - half]
            report = locust_report.rally_report(
                mine,
                scenario=s.scenario,
                rally_scenario=sm.SCENARIOS[s.scenario],
                runner={"rps": rate, "workers": s.locust_workers, "users": users, "ramp": True},
                sla_results=[],
            )
            probe = probe_verdict.Probe(
                k,
                f"ramp {i + 1}/{len(rates)}",
                rate,
                planned=int(math.floor(rate * step_s + 1e-9)),
                max_concurrency=users,
            )
            if not mine:  # every worker stopped before this step: degraded earlier
                break
            (wl,) = results.from_report(report, f"ramp step {i + 1}")
            ramps.judge_step(probe, wl, s)
            probe.report = str(run.report)
            span = (t_zero + begin - half, t_zero + end - half)
            probe.machine = machine.of_sampler(run.sampler, [span])
            spans.append(span)
            probe.elapsed = (time.monotonic() - t0) if i == len(rates) - 1 else 0.0
            out.append(probe)
            self._said(probe)
        if out:  # the ramp's setup (users, tokens), like its time, goes on its last row
            out[-1].setup = results.load(run.report)[0].setup_duration
            self._say_machine(machine.of_sampler(run.sampler, spans))  # every step reached
        return out

    def _said(self, probe: probe_verdict.Probe) -> None:
        if probe not in self.done:
            self.done.append(probe)
        self.say(
            f"probe {probe.number} ({probe.role}): {fmt(probe.rps)} rps -> {probe.verdict} "
            f"({probe.reason})"
        )

    def _say_machine(self, state: machine.MachineState | None) -> None:
        """``  machine during the load: ...``, the line ``run`` prints."""
        if state is not None:
            self.say(f"  machine during the load: {state.headline()}")


def _kept(result: engine.LoadResult, report: Path, interrupted: bool = False) -> LoadRun:
    """The engine's RESULT as a LoadRun, its report copied to REPORT when asked elsewhere."""
    if result.report != report:
        writer.copy(result.report, report)
    return LoadRun(
        report,
        result.out_dir,
        error=result.meta.get("error"),
        samples=result.samples,
        meta=result.meta,
        interrupted=interrupted,
        sampler=result.sampler,
    )
