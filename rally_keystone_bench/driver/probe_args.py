"""The probe task's arguments (tasks/capacity-probe.yaml) from the search's settings.

One probe at a rate (``task_args``) or one ramp through rates
(``ramp_task_args``), and how a ramp's steps are described in the progress
lines. ``reuse`` names the keystone_users reuse tag of a search: every probe
of it uses the same projects and users (plugins/contexts/reuse.py), and the
task gives the tag to token_pool too, so a validate probe uses the tokens
the first one issued.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rally_keystone_bench.verdicts.capacity import Settings, fmt
from rally_keystone_bench.verdicts.ramps import MIN_STEP_REQUESTS


def task_args(settings: Settings, rps: float, reuse: str | None = None) -> dict[str, Any]:
    """The probe task's arguments for one probe at RPS."""
    s = settings
    args = {
        "scenario": s.scenario,
        "rps": rps,
        "warmup": s.warmup,
        "window": s.window,
        "times": s.times(rps),
        "max_slope": s.max_slope,
        "min_iterations": s.min_iterations(rps),
        "max_concurrency": s.max_concurrency(rps),
        "runner": s.runner,
    }
    if reuse:
        args["reuse"] = reuse
    return args


def ramp_task_args(
    settings: Settings, rates: Sequence[float], reuse: str | None = None
) -> dict[str, Any]:
    """The probe task's arguments for one Rally run through the ramp's steps."""
    steps = settings.ramp_steps(rates)
    top = max(rates)
    return {
        **task_args(settings, top, reuse),
        "ramp": [[rate, seconds] for rate, seconds in steps],
        "times": sum(int(math.ceil(rate * seconds - 1e-9)) for rate, seconds in steps),
        "max_concurrency": settings.max_concurrency(top),
    }


def describe_ramp(settings: Settings, rates: Sequence[float]) -> str:
    """How long the ramp's steps are, as the progress line states it."""
    s = settings
    few = [r for r in rates if r * s.ramp_step_s < MIN_STEP_REQUESTS]
    unjudged = f" (at {', '.join(fmt(r) for r in few)}: too few for the slope)" if few else ""
    return f"{s.ramp_step_s:g} s a step{unjudged}, after {s.warmup:g} s of warm-up"
