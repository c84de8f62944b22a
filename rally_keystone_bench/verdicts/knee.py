"""Where Keystone's knee should be, from its own busy time: the utilization law.

The utilization law, U = X S / m: Keystone's m workers, busy a share U of
a span while it completed X requests a second, spend S = U m / X seconds
of worker time on each. At most m / S = X / U requests a second can then
be served, however the load arrives: that rate is the saturation bound,
and N, the highest rate that does not degrade, lies at or below it.

The probes already measure both sides: the rate each one sent, and the
busy share of Keystone's workers over it (its access log,
verdicts/keystone_side.py, ``Probe.server_busy``). Each probe that passed
with its workers at least MIN_BUSY busy gives one estimate of the bound;
the busiest of them is the prediction (ties: the highest rate). The
estimates are not equal: a request's cost falls as the rate rises (seen on
validations, 2026-11-29: 154 ms of worker time at 1 rps, 133 at 2, 99-114
at 8-16, 66-79 ms in whole probes at 23-29 rps), so the probe nearest the
knee tells the most of it and the low rates would pull a median down.
Fewer than MIN_BUSY: too little work to time (a request or two of a few
milliseconds a second); a probe that degraded is left out, since a queue
outside the workers hides there. The search predicts again after each
probe that passes (verdicts/capacity_search.py), so a whole probe near the
knee, a thousand requests, soon outweighs the ramp's steps of a few dozen.

Figures (doc/source/capacity.rst): password tokens on 2 workers, 14 % busy
at 1 rps, 42 % at 3, 70 % at 5, 87 % at 6 give 7.1, 7.1, 7.1 and 6.9 rps;
the search found N = 7. Validations at 15 rps, 64 % busy, and 19 rps, 78 %,
give 23.4 and 24.4 rps; the search found 22-23.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

MIN_BUSY = 0.10  # a passing probe's workers busy at least this share: an estimate
MAX_BUSY = 0.98  # above: the workers were full, the rate is a bound and not an estimate


@dataclasses.dataclass(frozen=True)
class Prediction:
    """The saturation bound (rps) from the probes' EVIDENCE, and N's grid rate below it."""

    saturation: float
    n: float
    evidence: tuple[tuple[float, float], ...]  # (rate sent, workers' busy share) per probe

    def describe(self) -> str:
        seen = ", ".join(f"{100 * u:.0f}% busy at {x:.3g} rps" for x, u in self.evidence)
        return (
            f"Keystone's workers were {seen}: by the utilization law, from the busiest, "
            f"they saturate near {self.saturation:.1f} rps, so N is expected at "
            f"{self.n:g} rps or just below"
        )


def estimates(probes: Sequence[Any]) -> list[tuple[float, float]]:
    """(rate sent, busy share) of each probe that passed with its workers busy enough."""
    out = []
    for p in probes:
        busy = getattr(p, "server_busy", None)
        if not p.passed or busy is None or not MIN_BUSY <= busy <= MAX_BUSY:
            continue
        rate = p.sent_rate or p.rps
        if rate and rate > 0:
            out.append((float(rate), float(busy)))
    return out


def predict(probes: Sequence[Any], settings: Any) -> Prediction | None:
    """The knee PROBES predict on SETTINGS' grid (low, high, precision); None without evidence.

    The saturation bound is the busiest passing probe's rate / busy share.
    N's predicted rate is the highest grid rate at or below the saturation
    bound (the law puts N no higher), clamped to [low, high].
    """
    seen = estimates(probes)
    if not seen:
        return None
    rate, busy = max(seen, key=lambda e: (e[1], e[0]))  # the busiest, the nearest the knee
    saturation = rate / busy
    k = math.floor((saturation - settings.low) / settings.precision + 1e-9)
    n = round(settings.low + max(0, k) * settings.precision, 6)
    n = min(n, settings.high)
    return Prediction(saturation, n, tuple(sorted(seen)))
