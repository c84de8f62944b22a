"""The capacity search's vocabulary: its settings, outcome, plan, constants and grid.

``keystone-bench capacity`` searches N, the highest rate Keystone serves
without degrading: the search itself (ramps, the walk from a predicted
knee, bisection, confirmations) is verdicts/capacity_search.py, a probe's
verdict verdicts/probe_verdict.py, the ramps' rates and brackets
verdicts/ramps.py. Here: the scenarios a search or a probe runs, the
constants, ``Settings`` (what every probe and ramp is run and judged by),
``Outcome`` (what the search found), the grid of --precision the probe
rates lie on, and the estimate of how many probes the search runs.

The plan (``Plan``): about how many probes the search will run, printed
first; it grows only when the search takes a longer way, and says why.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from rally_keystone_bench.verdicts.probe_verdict import Probe
from rally_keystone_bench.verdicts.ramps import REFINE_STEPS, equal_step, ramp_rates

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
RAMP_LATENCY_S = 2.0  # a ramp stops once its step's rate holds this much latency in flight
ENGINES = ("rally", "locust")
LATENCY_BUDGET_S = 5.0  # max_concurrency = rps * this: slots for 5 s of latency
MIN_CONCURRENCY = 20
CONFIRM_ROUNDS = 2
WALK_PROBES = 10  # whole probes from the predicted rate at most, before the bisection takes over
# A ramp step failed (errors, saturation) under this share of the saturation predicted
# from the passing steps is not held to: the walk starts at the prediction (capacity_search._start).
CONTRADICTED = 0.9


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
    predict: bool = False  # place the probes at the knee Keystone's busy time predicts

    @property
    def ramp_step_s(self) -> float:
        """Seconds of each step of a bracketing ramp: a sixth of the window, 5 at least.

        A ramp only brackets N: the bisection and the confirmations that
        follow run whole windows, and a step judged wrongly costs probes,
        never a wrong N. A step of fewer than ramps.MIN_STEP_REQUESTS
        requests (under 6 rps) is not judged by its slope.
        """
        return max(5.0, self.window / 6)

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
        first = self.warmup + self.ramp_step_s
        return [(rates[0], first)] + [(r, self.ramp_step_s) for r in rates[1:]]

    def min_iterations(self, rps: float) -> int:
        """Points the slope needs past the warm-up: half the window's, 3 to 30."""
        return max(3, min(30, int(rps * self.window / 2)))

    def max_concurrency(self, rps: float) -> int:
        return max(MIN_CONCURRENCY, int(math.ceil(rps * LATENCY_BUDGET_S)))


# -- what the search found, its plan, its grid ---------------------------------
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
    prediction: str | None = None  # the knee predicted, and whether the probes found N there
    # the prediction's verdict: "held" (the walk found N within two grid steps of it),
    # "walked" (the walk found N further away), "missed" (bisection did); None: none
    prediction_held: str | None = None

    @property
    def exit_code(self) -> int:
        return {"found": 0, "lower bound": 0, "low degrades": 1}.get(self.status, 2)


@dataclasses.dataclass
class Plan:
    """About how many probes the search runs (a ramp is one): grown only with a reason."""

    about: int
    reasons: list[str] = dataclasses.field(default_factory=list)

    def grow(self, total: int, reason: str) -> str | None:
        """The line that says so when TOTAL probes exceed the plan (None: they do not)."""
        if total <= self.about:
            return None
        self.about = total
        self.reasons.append(reason)
        return f"plan: about {total} probes now: {reason}"


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


def bisections(lo: float, hi: float, settings: Settings) -> int:
    """Probes a bisection of [LO, HI) takes down to one grid step."""
    steps = (hi - lo) / settings.precision
    return math.ceil(math.log2(steps) - 1e-9) if steps > 1 + 1e-9 else 0


def estimated_probes(settings: Settings) -> int:
    """About how many probes the search runs (a ramp is one).

    With a prediction: the first ramp, then N and N + precision at the knee
    it predicts. With a ramp and no prediction: two ramps, the bisection of
    the finer one's step and the two confirmations. Without a ramp: log2 of
    the range in grid steps, and the two confirmations.
    """
    rates = ramp_rates(settings) if settings.ramp else []
    if len(rates) < 3:
        return bisections(settings.low, settings.high, settings) + 2
    if settings.predict:
        return 3
    widest = max(b - a for a, b in zip(rates, rates[1:], strict=False))
    fine = equal_step(settings, 0, widest, REFINE_STEPS + 1)
    return 2 + bisections(0, fine, settings) + 2


def fmt(rate: float) -> str:
    return f"{rate:g}"


def interval(probes: Sequence[Probe]) -> tuple[float | None, float | None, list[float]]:
    """(ok, degraded, below): the highest rate that passed, the lowest above it that did
    not (None: none yet), and the rates that did not pass below the highest that did."""
    passed = [p.rps for p in probes if p.passed]
    ok = max(passed, default=None)
    failed = sorted({p.rps for p in probes if not p.passed})
    if ok is None:
        return None, (failed[0] if failed else None), []
    above = [r for r in failed if r > ok + 1e-9]
    return ok, (above[0] if above else None), [r for r in failed if r < ok - 1e-9]
