"""Ramps of the capacity search: their rates, one step's part of a ramp's run, and the
start rate and peak in flight of a run's iterations (a probe's or a step's).

A ramp is one run whose rate rises step by step; each step is judged as a
probe on the iterations due in it (:func:`step_workload`). Settings are the
search's (:class:`capacity.Settings`), read for low, high and precision only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rally_keystone_bench.verdicts.results import Workload

RAMP_STEPS = 16  # rates of the first bracketing ramp, from --low to --high
REFINE_STEPS = 7  # rates of the second ramp, inside the first one's bracket


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
