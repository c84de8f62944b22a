"""``keystone-bench capacity``: search N, the highest rate Keystone serves without degrading.

A probe is one Rally task (tasks/capacity-probe.yaml): the ``pooled_rps``
runner (``--runner rps`` for Rally's own; same schedule, see
runners/pooled_rps.py) starts ``rps * (warmup + window)`` iterations at a
constant rate, judged by
``failure_rate: max 0`` and our ``latency_slope`` SLA. A probe's verdict,
in this order:

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

The search first brackets N with ramps (one run whose rate rises step by
step, each step judged as a probe on the iterations due in it): 16 steps
over [--low, --high], then 7 inside the bracket that found. It bisects what
is left on a linear scale, the probe rates on a grid of --precision (with
--no-ramp, the whole range); a probe above N fails early under
--abort-on-sla-failure, so a high guess is cheap. It then repeats N and
N + precision ("confirm"); when a confirmation contradicts the search, it
resumes from there (two rounds at most), then repeats what still disagrees
(verdicts/repeats.py) and gives N with its spread.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rally_keystone_bench.verdicts import keystone_side, stats, trend
from rally_keystone_bench.verdicts.keystone_side import CLIENT_BOUND, KeystoneSide, Machine
from rally_keystone_bench.verdicts.ramps import (  # noqa: F401 (the search's names)
    RAMP_STEPS,
    REFINE_STEPS,
    peak_in_flight,
    ramp_rates,
    ramp_zero,
    refine_rates,
    start_rate,
    step_workload,
)
from rally_keystone_bench.verdicts.repeats import full_probes, settle
from rally_keystone_bench.verdicts.results import Workload

# scenario argument -> (Rally scenario, timed atomic action)
SCENARIOS = {
    "authenticate": ("KeystoneTokens.authenticate", "keystone.issue_token"),
    "validate": ("KeystoneTokens.validate", "keystone.validate_token"),
}
# One probe (``load --engine rally``) runs the lifecycle too: issue, validate,
# revoke and check, its slope (if judged) on the token issue.
PROBE_SCENARIOS = {
    **SCENARIOS,
    "lifecycle": ("KeystoneTokens.lifecycle", "keystone.issue_token"),
}
GENERATOR_SHARE = 0.95  # below this share of the target rate, the generator was the limit
# Locust engine: sends later than this after their intended start (p95 of the
# window), with slots free: the generator, not Keystone, held them back. Not
# applied to Rally probes: an iteration's untimed set-up before its send (a new
# pooled client authenticates first) waits on Keystone too, so near saturation
# its sends run late because Keystone is slow, not the generator (seen: 1-1.7 s
# at 48-50 rps on the 50-rps mock). Their response time still shows the wait.
LAG_LIMIT_S = 0.25
RAMP_LATENCY_S = 2.0  # a ramp stops once its step's rate holds this much latency in flight
ENGINES = ("rally", "locust")
LATENCY_BUDGET_S = 5.0  # max_concurrency = rps * this: slots for 5 s of latency
MIN_CONCURRENCY = 20
CONFIRM_ROUNDS = 2
MIN_STEP_REQUESTS = 30  # a ramp step's requests at least: the slope test's most points
# A ramp step degraded by a slope under this many times --max-slope bounds N only
# when no later step failed harder (_ramp_bracket).
MARGINAL_SLOPE = 2.0

OK = "ok"
ERRORS = "degraded (errors)"
SLOPE = "degraded (slope)"
SATURATED = "degraded (saturated)"
GENERATOR = "generator-limited"
LOWER_BOUNDS = (GENERATOR, CLIENT_BOUND)  # verdicts that leave N a lower bound


# -- settings ------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Settings:
    scenario: str
    low: float
    high: float
    warmup: float
    window: float
    max_slope: float
    precision: float
    abort_on_sla_failure: bool = True
    runner: str = "pooled_rps"
    engine: str = "rally"  # rally | locust
    locust_workers: int = 1
    ramp: bool = False  # bracket N with one ramp probe first

    @property
    def ramp_step_s(self) -> float:
        """Seconds of each step of a bracketing ramp: a sixth of the window, 5 at least.

        A ramp only brackets N: the bisection and the confirmations that
        follow run whole windows, and a step judged wrongly costs probes,
        never a wrong N.
        """
        return max(5.0, self.window / 6)

    def ramp_step_seconds(self, rps: float) -> float:
        """Seconds of a ramp's step at RPS: ramp_step_s, long enough for MIN_STEP_REQUESTS."""
        return max(self.ramp_step_s, float(math.ceil(MIN_STEP_REQUESTS / rps)))

    def describe_ramp(self, rates: Sequence[float]) -> str:
        """How long the ramp's steps are, as the progress line states it."""
        longer = [(r, self.ramp_step_seconds(r)) for r in rates]
        longer = [(r, t) for r, t in longer if t > self.ramp_step_s]
        slow = f"; {', '.join(f'{t:g} s at {fmt(r)}' for r, t in longer)}" if longer else ""
        return (
            f"{self.ramp_step_s:g} s a step and {MIN_STEP_REQUESTS} requests at least for "
            f"the slope{slow}, after {self.warmup:g} s of warm-up"
        )

    def ramp_slots(self, rps: float) -> int:
        """In-flight iterations at which a ramp stops in a step of RPS (2 s of answers)."""
        return max(MIN_CONCURRENCY, int(math.ceil(rps * RAMP_LATENCY_S)))

    @property
    def rally_scenario(self) -> str:
        return PROBE_SCENARIOS[self.scenario][0]

    @property
    def action(self) -> str:
        return PROBE_SCENARIOS[self.scenario][1]

    def times(self, rps: float) -> int:
        return int(math.ceil(rps * (self.warmup + self.window) - 1e-9))

    def ramp_steps(self, rates: Sequence[float]) -> list[tuple[float, float]]:
        """(rate, seconds) of the ramp through RATES; the first step carries the warm-up."""
        first = self.warmup + self.ramp_step_seconds(rates[0])
        return [(rates[0], first)] + [(r, self.ramp_step_seconds(r)) for r in rates[1:]]

    def min_iterations(self, rps: float) -> int:
        """Points the slope needs past the warm-up: half the window's, 3 to 30."""
        return max(3, min(30, int(rps * self.window / 2)))

    def max_concurrency(self, rps: float) -> int:
        return max(MIN_CONCURRENCY, int(math.ceil(rps * LATENCY_BUDGET_S)))

    def task_args(self, rps: float) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "rps": rps,
            "warmup": self.warmup,
            "window": self.window,
            "times": self.times(rps),
            "max_slope": self.max_slope,
            "min_iterations": self.min_iterations(rps),
            "max_concurrency": self.max_concurrency(rps),
            "runner": self.runner,
        }

    def ramp_task_args(self, rates: Sequence[float]) -> dict[str, Any]:
        """The probe task's arguments for one Rally run through the ramp's steps."""
        steps = self.ramp_steps(rates)
        top = max(rates)
        return {
            **self.task_args(top),
            "ramp": [[rate, seconds] for rate, seconds in steps],
            "times": sum(int(math.ceil(rate * seconds - 1e-9)) for rate, seconds in steps),
            "max_concurrency": self.max_concurrency(top),
        }


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

    @property
    def passed(self) -> bool:
        return self.verdict == OK

    @property
    def stopped_early(self) -> bool:
        return 0 < self.iterations < self.planned

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["passed"] = self.passed
        out["stopped_early"] = self.stopped_early
        return out


def judge(probe: Probe, wl: Workload, settings: Settings) -> Probe:
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


# -- the search ----------------------------------------------------------------
@dataclasses.dataclass
class Outcome:
    """What the search found."""

    n: float | None  # None: even --low degrades (or could not be measured)
    status: str  # "found", "lower bound", "low degrades", "not measurable"
    limited_by: str | None = None  # "generator" or "--high" when n is a lower bound
    confirmed: bool = False
    message: str = ""
    probes: list[Probe] = dataclasses.field(default_factory=list)
    spread: tuple[float, float] | None = None  # N's range across disagreeing repeats

    @property
    def exit_code(self) -> int:
        return {"found": 0, "lower bound": 0, "low degrades": 1}.get(self.status, 2)


def snap(rate: float, settings: Settings) -> float:
    """RATE on the grid low + k * precision, to a micro-rps."""
    k = round((rate - settings.low) / settings.precision)
    return round(min(settings.high, settings.low + k * settings.precision), 6)


def midpoint(lo: float, hi: float, settings: Settings) -> float:
    """A grid rate strictly inside (lo, hi), near the middle; hi - lo > precision."""
    m = snap((lo + hi) / 2, settings)
    if m <= lo:
        m = round(lo + settings.precision, 6)
    if m >= hi:
        m = round(hi - settings.precision, 6)
    return m


def estimated_probes(settings: Settings) -> int:
    """About how many probes the search runs: log2 of the range in steps, plus two.

    With a ramp: two ramps, one probe inside their bracket, and the two
    confirmations.
    """
    steps = (settings.high - settings.low) / settings.precision
    if settings.ramp and steps >= 2:
        return 5
    return (math.ceil(math.log2(steps)) if steps > 1 else 0) + 2


def fmt(rate: float) -> str:
    return f"{rate:g}"


def _bracket(
    settings: Settings,
    ramp: Callable[[list[float]], list[Probe]] | None,
    say: Callable[[str], None],
    probes: list[Probe],
) -> tuple[float, float, Probe | None]:
    """(lo, hi, the probe that failed at hi): from the ramps, or [low, high] without one.

    lo is taken to pass and hi to fail until probed; PROBES gets every step.
    """
    lo, hi = settings.low, settings.high
    hi_probe: Probe | None = None
    rates = ramp_rates(settings) if ramp is not None else []
    if len(rates) < 3:  # a range of two grid steps or less: bisecting it is as quick
        rates = []
    for ramp_round in range(2):
        if ramp is None or not rates:
            break
        steps = ramp(rates)
        probes.extend(steps)
        lo, hi, hi_probe = _ramp_bracket(steps, lo, hi, hi_probe, settings.max_slope, say)
        say(f"ramp: N in [{fmt(lo)}, {fmt(hi)}] rps")
        # the finer ramp, once, when the first one found a step that failed
        rates = refine_rates(settings, lo, hi) if ramp_round == 0 and hi_probe else []
    return lo, hi, hi_probe


def _ramp_bracket(
    steps: Sequence[Probe],
    lo: float,
    hi: float,
    hi_probe: Probe | None,
    max_slope: float,
    say: Callable[[str], None],
) -> tuple[float, float, Probe | None]:
    """(lo, hi, the step that failed at hi) after one ramp's STEPS.

    A step failed by errors, saturation, or a slope of MARGINAL_SLOPE times
    MAX_SLOPE or more bounds N. A step failed by a smaller slope (a few
    seconds, about 30 requests, the workers at their limit: whole probes of
    its rate may pass) bounds it only when no later step failed harder; else
    whole probes decide up to that one (figures: doc/source/capacity.rst).
    """
    first_failed: Probe | None = None
    for step in steps:
        if step.verdict == CLIENT_BOUND:
            say(f"ramp: {fmt(step.rps)} rps was {CLIENT_BOUND}: it does not bound N")
            break
        if step.passed:
            if first_failed is None:
                lo = max(lo, step.rps)
            continue
        if first_failed is None:
            first_failed = step
        marginal = (
            step.verdict == SLOPE
            and step.slope is not None
            and step.slope < MARGINAL_SLOPE * max_slope
        )
        if not marginal:
            if first_failed is not step:
                say(
                    f"ramp: {fmt(first_failed.rps)} rps was {SLOPE} only, by a slope "
                    f"under {MARGINAL_SLOPE:g} times the limit, "
                    f"{fmt(step.rps)} rps {step.verdict}: whole probes decide between them"
                )
            return lo, step.rps, step
    if first_failed is not None:
        return lo, first_failed.rps, first_failed
    return lo, hi, hi_probe


def _outcome(
    n: float,
    hi_probe: Probe | None,
    confirmed: bool,
    settings: Settings,
    probes: list[Probe],
    spread: tuple[float, float] | None = None,
) -> Outcome:
    """The search's result: N found, or a lower bound (--high, or the generator's limit)."""
    if hi_probe is None:
        status, limited = "lower bound", "--high"
        message = f"N >= {fmt(n)} rps: no degradation up to --high {fmt(settings.high)}"
    elif hi_probe.verdict in LOWER_BOUNDS:
        status, limited = "lower bound", "generator"
        message = (
            f"N >= {fmt(n)} rps, {hi_probe.verdict} at {fmt(hi_probe.rps)} rps ({hi_probe.reason})"
        )
    else:
        note = ""
        if spread is not None and spread[0] != spread[1]:
            note = f" ({fmt(spread[0])}-{fmt(spread[1])} rps across repeats)"
        elif not confirmed:
            note = " (not confirmed: the repeats disagreed)"
        status, limited = "found", None
        message = f"N = {fmt(n)} rps{note}; {fmt(hi_probe.rps)} rps is {hi_probe.verdict}"
    return Outcome(n, status, limited, confirmed, message, probes, spread)


def find_capacity(
    settings: Settings,
    probe: Callable[[float, str], Probe],
    say: Callable[[str], None] = lambda line: None,
    ramp: Callable[[list[float]], list[Probe]] | None = None,
) -> Outcome:
    """Bisect [low, high] for N with PROBE(rate, role), then confirm N and N + precision.

    With RAMP (one run whose rate rises through the rates it is given, a
    Probe judged per step), the search brackets N first: a ramp from --low to
    --high, then a finer one inside its bracket (from the last step that
    passed up to the first that did not); the bisection starts from that.
    """
    probes: list[Probe] = []
    eps = settings.precision * 1e-6
    lo, hi, hi_probe = _bracket(settings, ramp, say, probes)

    def run(rate: float, role: str) -> Probe:
        p = probe(rate, role)
        earlier = full_probes(probes, rate)  # the last probe of this rate, if it disagrees
        probes.append(p)
        if earlier and earlier[-1].passed != p.passed and not role.startswith("search"):
            say(keystone_side.moved(earlier[-1], p))
        return p

    def fail_above(rate: float) -> tuple[float, Probe | None]:
        failing = [p for p in probes if not p.passed and p.rps > rate + eps]
        if not failing:
            return settings.high, None
        best = min(failing, key=lambda p: (p.rps, -p.number))
        return best.rps, best

    confirmed = False
    for _round in range(CONFIRM_ROUNDS + 1):
        while hi - lo > settings.precision + eps:
            p = run(midpoint(lo, hi, settings), "search")
            if p.passed:
                lo = p.rps
            else:
                hi, hi_probe = p.rps, p
        if _round == CONFIRM_ROUNDS:
            if hi_probe is None or hi_probe.verdict in LOWER_BOUNDS:
                break  # nothing to settle: N stays unconfirmed
            lo, hi_probe, spread = settle(lo, settings, run, probes, say)
            return _outcome(lo, hi_probe, True, settings, probes, spread)
        pn = run(lo, "confirm N")
        if not pn.passed:
            if lo <= settings.low + eps:
                status = "not measurable" if pn.verdict == GENERATOR else "low degrades"
                why = pn.reason
                return Outcome(
                    None,
                    status,
                    "generator" if pn.verdict == GENERATOR else None,
                    message=f"even --low {fmt(settings.low)} rps is {pn.verdict}: {why}",
                    probes=probes,
                )
            hi, hi_probe = lo, pn
            passing = [q.rps for q in probes if q.passed and q.rps < lo - eps]
            lo = max(passing, default=settings.low)
            continue
        if lo >= settings.high - eps:
            confirmed = True
            hi_probe = None
            break
        p1 = run(round(min(lo + settings.precision, settings.high), 6), "confirm N+1")
        if p1.passed:
            lo = p1.rps
            if lo >= settings.high - eps:
                confirmed, hi_probe = True, None
                break
            hi, hi_probe = fail_above(lo)
            continue
        hi_probe = p1
        confirmed = True
        break

    return _outcome(lo, hi_probe, confirmed, settings, probes)
