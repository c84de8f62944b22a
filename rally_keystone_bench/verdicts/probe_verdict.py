"""One capacity probe: its figures from Rally's (or Locust's) report, and its verdict.

A probe's verdict, in this order:

* ``degraded (errors)``: an iteration failed;
* ``degraded (saturated)``: every iteration slot of the runner was in
  flight at once: Keystone answered too slowly for the rate, the runner had
  to wait for it, and the latency stopped growing only because the load did
  (with --abort-on-sla-failure the probe is stopped right then);
* ``generator-limited``: fewer than 95 % of the target rate was sent, with
  free slots: the load generator, not Keystone, was the limit (the paper's
  trap). The probe says nothing about Keystone, whatever its latency did (a
  starved generator also delays its own timers); the search does not go
  above it, and an N below it is reported as a lower bound;
* ``degraded (slope)``: the latency of the timed action grew faster than
  ``max_slope`` seconds per second past the warm-up;
* ``ok``.

A ``degraded (saturated)`` or ``(slope)`` probe is looked at from
Keystone's side too (its access log, verdicts/keystone_side.py): when
Keystone's own times stayed flat and its workers were not busy while the
client's waits grew, it is ``generator- or setup-bound`` and bounds no N.

The achieved rate is that of iteration *starts* in the window (after the
warm-up): ``(starts - 1) / (last start - first start)``. Starting
iterations on time is the generator's whole job; counting only successful
ones, or dividing by Rally's load duration (which includes waiting for the
last answers), would blame the generator for Keystone's errors and latency.
Throughput (successful iterations per second of load) is reported beside it.

The settings a probe is judged by are the search's (``capacity.Settings``);
``JudgeSettings`` names the four it reads.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from rally_keystone_bench.verdicts import keystone_side, stats, trend
from rally_keystone_bench.verdicts.keystone_side import CLIENT_BOUND, KeystoneSide, Machine
from rally_keystone_bench.verdicts.machine import MachineState
from rally_keystone_bench.verdicts.results import Workload

GENERATOR_SHARE = 0.95  # below this share of the target rate, the generator was the limit
# Locust engine: sends later than this after their intended start (p95 of the
# window), with slots free: the generator, not Keystone, held them back. Not
# applied to Rally probes: an iteration's untimed set-up before its send (a new
# pooled client authenticates first) waits on Keystone too, so near saturation
# its sends run late because Keystone is slow, not the generator (seen: 1-1.7 s
# at 48-50 rps on the 50-rps mock). Their response time still shows the wait.
LAG_LIMIT_S = 0.25


class JudgeSettings(Protocol):
    """What judging a probe reads of the search's settings."""

    warmup: float
    max_slope: float
    engine: str

    @property
    def action(self) -> str: ...


OK = "ok"
ERRORS = "degraded (errors)"
SLOPE = "degraded (slope)"
SATURATED = "degraded (saturated)"
GENERATOR = "generator-limited"
LOWER_BOUNDS = (GENERATOR, CLIENT_BOUND)  # verdicts that leave N a lower bound


# -- one probe -----------------------------------------------------------------
@dataclasses.dataclass
class Probe:
    """One probe's figures and verdict (latencies in seconds, of the window)."""

    number: int
    role: str  # "search", "confirm N", "confirm N+1"
    rps: float
    verdict: str = OK
    reason: str = ""
    iterations: int = 0
    planned: int = 0
    failed: int = 0
    sent_rate: float | None = None
    throughput: float | None = None
    peak_concurrency: int = 0
    max_concurrency: int = 0
    slope: float | None = None
    slope_ci: tuple[float, float] | None = None
    sla_detail: str = ""
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    resp_p50: float | None = None  # response time, from the intended start (when known)
    resp_p99: float | None = None
    lag_p95: float | None = None  # how late the sends were (intended -> actual start)
    elapsed: float = 0.0
    setup: float | None = None  # the probe's setup (users, tokens) before its load, in elapsed
    slots_full: bool = False  # every slot was seen in flight while the probe ran
    stopped_for: str | None = None  # why the probe was stopped early
    # Keystone's side of the window (its access log) and the machine (/proc)
    server_requests: int = 0
    server_p95: float | None = None
    server_busy: float | None = None  # the workers' busy share of the window
    setup_requests: int = 0  # token requests the scenario did not send
    other_cpu: float | None = None  # cores of other processes' CPU while it ran
    other_swing: float | None = None
    steal: float | None = None
    task_uuid: str | None = None
    report: str | None = None
    machine: MachineState | None = None  # the machine during its load window (or ramp step)

    @property
    def passed(self) -> bool:
        return self.verdict == OK

    @property
    def stopped_early(self) -> bool:
        return 0 < self.iterations < self.planned

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["machine"] = self.machine.as_dict() if self.machine is not None else None
        out["passed"] = self.passed
        out["stopped_early"] = self.stopped_early
        return out


def judge(probe: Probe, wl: Workload, settings: JudgeSettings) -> Probe:
    """Fill PROBE's figures and verdict from the probe's Rally workload."""
    probe.iterations = wl.iterations
    probe.failed = wl.failed_iterations
    probe.throughput, probe.setup = wl.throughput, wl.setup_duration
    if wl.iterations == 0:
        probe.verdict, probe.reason = GENERATOR, "no iteration started"
        return probe
    first = float(wl.iteration_started.min())
    boundary = first + settings.warmup
    probe.sent_rate = start_rate(wl.iteration_started, boundary)
    probe.peak_concurrency = peak_in_flight(wl.iteration_started, wl.iteration_duration)
    action = wl.actions.get(settings.action)
    if action is not None:
        keep = (~action.failed) & (action.started_at >= boundary)
        s = stats.summarize(action.duration[keep])
        probe.p50, probe.p95, probe.p99 = s["p50"], s["p95"], s["p99"]
        x, y = action.started_at[keep] - first, action.duration[keep]
        if x.size >= 3 and float(x.max() - x.min()) > 0:
            fit = trend.ols(x, y)
            probe.slope, probe.slope_ci = fit.slope, tuple(fit.slope_ci)
        if action.has_response_time and action.intended is not None:
            due = action.intended >= boundary
            r = stats.summarize(action.response_times()[due[~action.failed & _known(action)]])
            probe.resp_p50, probe.resp_p99 = _finite_or_none(r["p50"]), _finite_or_none(r["p99"])
            lags = action.started_at[due] - action.intended[due]
            if lags.size:
                probe.lag_p95 = float(np.percentile(lags, 95))
    slope_sla = next((c for c in wl.sla if c.get("criterion") == "latency_slope"), None)
    probe.sla_detail = str(slope_sla.get("detail", "")) if slope_sla else ""
    slope_failed = slope_sla is not None and not slope_sla.get("success", True)
    not_enough = "not enough data" in probe.sla_detail
    if slope_sla is None and probe.slope is not None:
        # no latency_slope SLA (the Locust engine's reports): the same test, here
        slope_failed = probe.slope > settings.max_slope
        probe.sla_detail = f"least-squares slope {probe.slope:.3g} s/s"
    lagging = (
        settings.engine == "locust" and probe.lag_p95 is not None and probe.lag_p95 > LAG_LIMIT_S
    )

    sent = probe.sent_rate or 0.0
    if probe.failed:
        top = wl.errors[0] if wl.errors else None
        what = ""
        if top is not None:
            what = f": {top.type}" + (f" (HTTP {top.status})" if top.status else "")
        probe.verdict = ERRORS
        probe.reason = f"{probe.failed} of {probe.iterations} iterations failed{what}"
    elif (
        probe.slots_full
        or probe.peak_concurrency >= probe.max_concurrency > 0
        or float(wl.iteration_duration.max()) * probe.rps >= probe.max_concurrency > 0
    ):
        probe.verdict = SATURATED
        probe.reason = (
            f"answers too slow for the rate: {probe.max_concurrency} iteration slots "
            f"hold {probe.max_concurrency / probe.rps:.1f} s of answers, the slowest took "
            f"{float(wl.iteration_duration.max()):.1f} s"
        )
    elif sent < GENERATOR_SHARE * probe.rps or not_enough or lagging:
        probe.verdict = GENERATOR
        late = f", sends {probe.lag_p95:.2f} s late (p95)" if lagging else ""
        probe.reason = (
            f"sent {sent:.1f} rps, {100 * sent / probe.rps:.0f}% of the target{late}, "
            f"with {probe.max_concurrency - probe.peak_concurrency} slots free"
        )
    elif slope_failed and not not_enough:
        probe.verdict = SLOPE
        slope = f"{probe.slope:.3g}" if probe.slope is not None else "?"
        probe.reason = f"latency slope {slope} s/s > {settings.max_slope:g}"
    else:
        probe.verdict = OK
        slope = f"{probe.slope:.2g}" if probe.slope is not None else "?"
        probe.reason = f"sent {sent:.1f} rps, slope {slope} s/s, no error"
    return probe


def judge_keystone_side(
    probe: Probe,
    side: KeystoneSide | None,
    reference: KeystoneSide | None,
    machine: Machine | None = None,
) -> Probe:
    """Add Keystone's figures (SIDE) and the machine's to PROBE; re-judge a degradation.

    A probe degraded by its client waits while Keystone's own times stayed
    flat next to REFERENCE's (the lowest rate that passed) and its workers
    were not busy is :data:`CLIENT_BOUND`: the waits were the generator's or
    the setup's, and the probe does not bound N.
    """
    if machine is not None:
        probe.other_cpu, probe.other_swing = machine.other, machine.other_swing
        probe.steal = machine.steal
    if side is None:
        return probe
    probe.server_requests, probe.server_p95 = side.requests, side.p95
    probe.server_busy, probe.setup_requests = side.busy, side.setup
    if probe.verdict in (SATURATED, SLOPE):
        waits = [v for v in (probe.p95, probe.resp_p99) if v is not None]
        why = keystone_side.client_bound(max(waits, default=None), side, reference)
        if why:
            probe.reason = f"{why}; by the client alone: {probe.verdict}, {probe.reason}"
            probe.verdict = CLIENT_BOUND
            return probe
    probe.reason = f"{probe.reason}; {side.describe()}"
    return probe


def _known(action: Any) -> np.ndarray:
    return np.isfinite(action.intended)


def _finite_or_none(v: float) -> float | None:
    return float(v) if v is not None and math.isfinite(v) else None


# -- the start rate and peak in flight of a run's iterations (a probe's or a ramp step's)
def peak_in_flight(started: Sequence[float], duration: Sequence[float]) -> int:
    """The most iterations in flight at one instant."""
    s = np.asarray(started, dtype=float)
    if s.size == 0:
        return 0
    e = s + np.asarray(duration, dtype=float)
    times = np.concatenate([s, e])
    # at equal times an end comes before a start
    steps = np.concatenate([np.ones(s.size, dtype=np.int64), -np.ones(e.size, dtype=np.int64)])
    order = np.lexsort((steps, times))
    return int(np.cumsum(steps[order]).max())


def start_rate(started: Sequence[float], since: float | None = None) -> float | None:
    """Iterations started per second: (starts - 1) / their span, from ``since`` on."""
    s = np.sort(np.asarray(started, dtype=float))
    if since is not None and int((s >= since).sum()) >= 2:
        s = s[s >= since]
    if s.size < 2 or s[-1] <= s[0]:
        return None
    return float((s.size - 1) / (s[-1] - s[0]))
