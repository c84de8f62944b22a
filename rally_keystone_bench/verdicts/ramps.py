"""Ramps of the capacity search: their rates, one step's part of a ramp's run, and the
bracket a ramp's judged steps leave for N (:func:`ramp_bracket`).

A ramp is one run whose rate rises step by step; each step is judged as a
probe on the iterations due in it (:func:`step_workload`). Settings are the
search's (:class:`capacity.Settings`), read for low, high and precision only.

The first ramp doubles its rate from --low (1, 2, 4, 8, 16 rps ...), no step
wider than one of RAMP_STEPS equal steps over [--low, --high]: several steps
pass below the knee with Keystone's workers busy enough to time, which is
what the utilization law needs to predict it (verdicts/knee.py), and a high
knee is still bracketed as finely as by equal steps. The second ramp, when
there is no prediction, climbs the first one's bracket in REFINE_STEPS
equal steps.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rally_keystone_bench.verdicts.keystone_side import CLIENT_BOUND
from rally_keystone_bench.verdicts.probe_verdict import OK, SLOPE, Probe, judge
from rally_keystone_bench.verdicts.results import Workload

RAMP_STEPS = 16  # the first ramp's steps are no wider than this many equal ones over the range
REFINE_STEPS = 7  # rates of the second ramp, inside the first one's bracket
# A ramp step degraded by a slope under this many times --max-slope bounds N only
# when no later step failed harder (ramp_bracket).
MARGINAL_SLOPE = 2.0
# A ramp step of fewer requests is not judged by its slope: 30 are the slope test's most
# points (capacity.Settings.min_iterations), and a step of a few seconds at a low rate
# holds too few to fit a line through, while its errors and saturation still show.
MIN_STEP_REQUESTS = 30


def fmt(rate: float) -> str:
    return f"{rate:g}"


def step_workload(wl: Workload, begin: float, end: float) -> Workload:
    """The part of WL due in [BEGIN, END) (epoch seconds): one step of a ramp.

    An iteration or action belongs to the step its intended start falls in
    (its actual start where that is not known), so a send that ran late
    still counts against the step that was due to send it.
    """

    def due(intended: np.ndarray | None, started: np.ndarray) -> np.ndarray:
        if intended is None:
            return started
        return np.where(np.isfinite(intended), intended, started)

    keep = due(wl.iteration_intended, wl.iteration_started)
    keep = (keep >= begin) & (keep < end)
    actions = {}
    for name, a in wl.actions.items():
        mine = due(a.intended, a.started_at)
        mine = (mine >= begin) & (mine < end)
        actions[name] = dataclasses.replace(
            a,
            duration=a.duration[mine],
            started_at=a.started_at[mine],
            failed=a.failed[mine],
            intended=None if a.intended is None else a.intended[mine],
        )
    failed = wl.iteration_failed[keep]
    return dataclasses.replace(
        wl,
        iteration_started=wl.iteration_started[keep],
        iteration_duration=wl.iteration_duration[keep],
        iteration_failed=failed,
        iteration_intended=None if wl.iteration_intended is None else wl.iteration_intended[keep],
        actions=actions,
        errors=wl.errors if failed.any() else [],
        sla=[],
        load_duration=end - begin,
    )


def judge_step(probe: Probe, part: Workload, settings: Any) -> Probe:
    """PROBE, one step of a ramp, judged on PART (the iterations due in it) as a probe with
    no warm-up is; a step of fewer than MIN_STEP_REQUESTS requests not by its slope."""
    judge(probe, part, dataclasses.replace(settings, warmup=0.0))
    if probe.verdict == SLOPE and probe.iterations < MIN_STEP_REQUESTS:
        slope = f"{probe.slope:.2g}" if probe.slope is not None else "?"
        probe.verdict = OK
        probe.reason = (
            f"sent {probe.sent_rate or 0.0:.1f} rps, slope {slope} s/s not judged on "
            f"{probe.iterations} requests (fewer than {MIN_STEP_REQUESTS}), no error"
        )
    return probe


def ramp_zero(wl: Workload) -> float:
    """When the ramp's schedule began (epoch seconds): its first intended start."""
    if wl.iteration_intended is not None and np.isfinite(wl.iteration_intended).any():
        return float(np.nanmin(wl.iteration_intended))
    return float(wl.iteration_started.min())


def ramp_rates(settings: Any) -> list[float]:
    """Rates of the first ramp: doubling from --low, each step a whole number of
    --precision and no wider than :func:`equal_step`; the last rate is --high."""
    low, high, precision = settings.low, settings.high, settings.precision
    if high - low < 2 * settings.precision:
        return [low]
    widest = equal_step(settings, low, high, RAMP_STEPS)
    rates = []
    rate = low
    while rate < high - 1e-9:
        rates.append(round(rate, 6))
        rate += max(precision, min(widest, precision * math.floor(rate / precision + 1e-9)))
    return [*rates, round(high, 6)]


def equal_step(settings: Any, low: float, high: float, steps: int) -> float:
    """The step of a ramp from LOW to HIGH in at most STEPS rates: whole --precision steps."""
    grid = (high - low) / settings.precision / (steps - 1)
    return settings.precision * max(1, math.ceil(grid - 1e-9))


def equal_rates(settings: Any, low: float, high: float, steps: int) -> list[float]:
    """Rates from LOW to HIGH in at most STEPS equal steps on the grid; the last is HIGH."""
    if high - low < 2 * settings.precision:
        return [low]
    step = equal_step(settings, low, high, steps)
    rates = []
    rate = low
    while rate < high - 1e-9:
        rates.append(round(rate, 6))
        rate += step
    return [*rates, round(high, 6)]


def refine_rates(settings: Any, lo: float, hi: float) -> list[float]:
    """The second ramp's rates: from LO (passed) up to below HI (failed), or [] when narrow."""
    if hi - lo <= 2 * settings.precision + 1e-9:
        return []
    return [r for r in equal_rates(settings, lo, hi, REFINE_STEPS + 1) if r < hi - 1e-9]


def ramp_bracket(
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
