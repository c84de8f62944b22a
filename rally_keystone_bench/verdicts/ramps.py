"""Ramps of the capacity search: their rates, one step's part of a ramp's run, and the
bracket a ramp's judged steps leave for N (:func:`ramp_bracket`).

A ramp is one run whose rate rises step by step; each step is judged as a
probe on the iterations due in it (:func:`step_workload`). Settings are the
search's (:class:`capacity.Settings`), read for low, high and precision only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rally_keystone_bench.verdicts.keystone_side import CLIENT_BOUND
from rally_keystone_bench.verdicts.probe_verdict import SLOPE, Probe
from rally_keystone_bench.verdicts.results import Workload

RAMP_STEPS = 16  # rates of the first bracketing ramp, from --low to --high
REFINE_STEPS = 7  # rates of the second ramp, inside the first one's bracket
# A ramp step degraded by a slope under this many times --max-slope bounds N only
# when no later step failed harder (ramp_bracket).
MARGINAL_SLOPE = 2.0


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


def ramp_zero(wl: Workload) -> float:
    """When the ramp's schedule began (epoch seconds): its first intended start."""
    if wl.iteration_intended is not None and np.isfinite(wl.iteration_intended).any():
        return float(np.nanmin(wl.iteration_intended))
    return float(wl.iteration_started.min())


def ramp_rates(
    settings: Any,
    low: float | None = None,
    high: float | None = None,
    steps: int = RAMP_STEPS,
) -> list[float]:
    """Rates of a bracketing ramp from LOW to HIGH: at most STEPS, equal steps on the grid.

    The step is a whole number of --precision; the last rate is HIGH.
    """
    low = settings.low if low is None else low
    high = settings.high if high is None else high
    if high - low < 2 * settings.precision:
        return [low]
    grid = (high - low) / settings.precision / (steps - 1)
    step = settings.precision * max(1, math.ceil(grid - 1e-9))
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
    return [r for r in ramp_rates(settings, lo, hi, REFINE_STEPS + 1) if r < hi - 1e-9]


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
