"""What Keystone's side and the machine say about a capacity probe: pure arithmetic.

The client's latency alone cannot tell a Keystone at its limit from a load
generator (or the probe's own setup) that kept requests waiting. Two more
sources, read by driver/probe_evidence.py and counted here:

* Keystone's access log: every request's start, server time and worker
  pid. Per probe (or ramp step): the server times of the scenario's token
  requests, how busy the workers were (their server seconds over the span,
  per worker) and the token requests the scenario did not send (setup).
  A server whose workers are busy queues requests outside them: its server
  times stay flat at saturation, so "busy" is what marks Keystone's limit.
* the gate's /proc sampler (procstat.Sampler): other processes' CPU and
  steal while the probe ran.

A degraded probe whose server times stayed flat, with workers mostly idle,
while the client's waits grew, is :data:`CLIENT_BOUND`: the wait was not in
Keystone, and the probe does not bound N.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rally_keystone_bench.verdicts import cpu

CLIENT_BOUND = "generator- or setup-bound"
TOKENS_PATH = "/v3/auth/tokens"
# The token requests each scenario sends itself; any other is setup.
SCENARIO_METHODS = {"validate": ("GET",), "authenticate": ("POST",)}
FLAT_FACTOR = 2.0  # server p95 within this factor of the reference's (or SLACK) is flat
FLAT_SLACK_S = 0.05
BUSY_SHARE = 0.8  # workers busy this share of the span: Keystone was at its limit
SETUP_SHARE = 0.25  # of the workers' busy time, spent on setup: setup-bound
CLIENT_FACTOR = 3.0  # client p95 above this many server p95s: the wait grew outside
MIN_REQUESTS = 5  # fewer logged requests in a span: no Keystone-side verdict
QUIET_OTHER = 0.25  # cores of other processes' CPU a quiet machine stays under
QUIET_STEAL = 0.05


@dataclasses.dataclass(frozen=True)
class LoggedRequest:
    """One line of Keystone's access log (epoch seconds, server seconds)."""

    start: float
    seconds: float
    pid: int
    status: int
    method: str
    path: str


@dataclasses.dataclass(frozen=True)
class KeystoneSide:
    """Keystone's own figures over one span of a probe."""

    requests: int  # the scenario's token requests that started in the span
    p50: float | None
    p95: float | None
    busy: float  # server seconds of every request / (span * workers)
    workers: int
    setup: int  # token requests the scenario did not send (tokens for a pool)
    setup_busy: float  # their share of the workers' busy time

    def describe(self) -> str:
        p95 = "-" if self.p95 is None else f"{self.p95 * 1000:.0f} ms"
        setup = f", {self.setup} setup token requests" if self.setup else ""
        return (
            f"Keystone p95 {p95} over {self.requests} requests, "
            f"{self.workers} worker(s) {100 * self.busy:.0f}% busy{setup}"
        )


def keystone_side(
    requests: Sequence[LoggedRequest], begin: float, end: float, scenario: str
) -> KeystoneSide | None:
    """Keystone's figures for requests that started in [BEGIN, END); None without any."""
    inside = [r for r in requests if begin <= r.start < end]
    if not inside or end <= begin:
        return None
    mine_methods = SCENARIO_METHODS.get(scenario)
    tokens = [r for r in inside if r.path.split("?")[0] == TOKENS_PATH]
    mine = [r for r in tokens if mine_methods is None or r.method in mine_methods]
    setup = [r for r in tokens if mine_methods is not None and r.method not in mine_methods]
    # The workers that served in the span: one respawned during the run would
    # otherwise count twice and make Keystone look idler than it was.
    workers = len({r.pid for r in inside}) or 1
    total = sum(r.seconds for r in inside)
    times = np.asarray([r.seconds for r in mine], dtype=float)
    p50 = float(np.percentile(times, 50)) if times.size else None
    p95 = float(np.percentile(times, 95)) if times.size else None
    return KeystoneSide(
        requests=len(mine),
        p50=p50,
        p95=p95,
        busy=total / ((end - begin) * workers),
        workers=workers,
        setup=len(setup),
        setup_busy=sum(r.seconds for r in setup) / total if total > 0 else 0.0,
    )


def flat(side: KeystoneSide, reference: KeystoneSide | None) -> bool:
    """SIDE's server p95 stayed within FLAT_FACTOR (or FLAT_SLACK_S) of REFERENCE's."""
    if side.p95 is None or reference is None or reference.p95 is None:
        return False
    return side.p95 <= max(FLAT_FACTOR * reference.p95, reference.p95 + FLAT_SLACK_S)


def client_bound(
    client_p95: float | None, side: KeystoneSide | None, reference: KeystoneSide | None
) -> str | None:
    """Why a degraded probe's client waits were not Keystone's, or None (they were, or unknown).

    CLIENT_P95: the client's p95 of the same span; SIDE: Keystone's figures of
    it; REFERENCE: Keystone's figures at the lowest rate that passed.
    """
    if side is None or side.requests < MIN_REQUESTS or side.p95 is None or client_p95 is None:
        return None
    if client_p95 < CLIENT_FACTOR * side.p95 + FLAT_SLACK_S:
        return None  # the client waited about as long as Keystone worked
    ref = ""
    if reference is not None and reference.p95:
        ref = f" ({reference.p95 * 1000:.0f} ms at the reference)"
    seen = (
        f"client p95 {client_p95:.2f} s, Keystone's own p95 {side.p95 * 1000:.0f} ms{ref}, "
        f"{side.workers} worker(s) {100 * side.busy:.0f}% busy"
    )
    if side.busy >= BUSY_SHARE and side.setup_busy >= SETUP_SHARE:
        return (
            f"setup-bound: Keystone's workers spent {100 * side.setup_busy:.0f}% of their "
            f"time on {side.setup} token requests the scenario did not send ({seen})"
        )
    if side.busy >= BUSY_SHARE or not flat(side, reference):
        return None  # Keystone full, or slower itself: its degradation
    return f"Keystone's times stayed flat while the client's waits grew ({seen})"


# -- the machine -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Machine:
    """What else ran while a probe ran, in cores (CPU seconds per second)."""

    other: float  # processes that are neither Keystone nor this tool and its load
    other_swing: float  # max - min of ``other`` between samples
    steal: float


def machine_during(intervals: Sequence[cpu.Interval]) -> Machine | None:
    """Other processes' CPU and steal over the sampler's INTERVALS (None without any)."""
    if not intervals:
        return None
    seconds = intervals[-1].end - intervals[0].start
    if seconds <= 0:
        return None
    per = [
        cpu.other_ticks(iv) / cpu.TICKS / (iv.end - iv.start)
        for iv in intervals
        if iv.end > iv.start
    ]
    return Machine(
        other=sum(cpu.other_ticks(iv) for iv in intervals) / cpu.TICKS / seconds,
        other_swing=(max(per) - min(per)) if per else 0.0,
        steal=sum(iv.steal for iv in intervals) / cpu.TICKS / seconds,
    )


def disturbance(m: Machine | None) -> str | None:
    """Why a machine was not quiet, or None when it was (or was not sampled)."""
    if m is None:
        return None
    if m.other > QUIET_OTHER:
        return f"other processes used {m.other:.2f} core"
    if m.steal > QUIET_STEAL:
        return f"steal {m.steal:.2f} core"
    return None


def _ms(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"


def moved(a: Any, b: Any) -> str:
    """Which measurement moved between two probes of one rate that disagree, and why.

    A and B are capacity Probes (one passed, one did not), with their
    Keystone-side and machine figures where known.
    """
    ok, bad = (a, b) if a.passed else (b, a)
    parts = []
    if ok.p95 is not None or bad.p95 is not None:
        parts.append(f"client p95 {_ms(ok.p95)} -> {_ms(bad.p95)}")
    if ok.server_p95 is not None or bad.server_p95 is not None:
        parts.append(f"Keystone p95 {_ms(ok.server_p95)} -> {_ms(bad.server_p95)}")
    if ok.sent_rate and bad.sent_rate:
        parts.append(f"sent {ok.sent_rate:.1f} -> {bad.sent_rate:.1f} rps")
    if ok.other_cpu is not None and bad.other_cpu is not None:
        parts.append(f"other processes {ok.other_cpu:.2f} -> {bad.other_cpu:.2f} core")
    if ok.steal is not None and bad.steal is not None and max(ok.steal, bad.steal) > 0.005:
        parts.append(f"steal {ok.steal:.2f} -> {bad.steal:.2f} core")
    busy = disturbance(_machine_of(bad))
    if busy:
        why = f"probe {bad.number} shared the machine ({busy})"
    elif bad.verdict == CLIENT_BOUND:
        why = f"probe {bad.number}'s waits were outside Keystone"
    elif (
        ok.server_p95 is not None
        and bad.server_p95 is not None
        and bad.server_p95 > max(FLAT_FACTOR * ok.server_p95, ok.server_p95 + FLAT_SLACK_S)
    ):
        why = "Keystone itself answered slower, on a quiet machine: its limit is near this rate"
    else:
        why = "no interference seen: the rate is at Keystone's limit"
    return (
        f"probes {ok.number} ({ok.verdict}) and {bad.number} ({bad.verdict}) at "
        f"{bad.rps:g} rps disagree: {'; '.join(parts + [why])}"
    )


def _machine_of(p: Any) -> Machine | None:
    if p.other_cpu is None:
        return None
    return Machine(p.other_cpu, p.other_swing or 0.0, p.steal or 0.0)


def quiet(p: Any) -> bool:
    """PROBE ran on a quiet machine (or one that was not sampled)."""
    return disturbance(_machine_of(p)) is None
