"""When each request of an open-model load should start.

The schedule is fixed before the load and never looks at answers: request
*k* is due at ``t0 + offset(k)``, whatever happened to request *k - 1*
(wrk2's model). ``constant`` spaces requests exactly ``1 / rate`` apart;
``poisson`` draws exponential gaps of mean ``1 / rate`` from a seeded
generator, so every worker draws the same global sequence. Worker *i* of
*K* takes requests ``k = i, i + K, i + 2K, ...``: together the workers send
the global schedule, each at ``rate / K``.

A load may be a ramp: a list of steps ``(rate, seconds)`` run one after the
other (the capacity search brackets N with one such probe).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

ARRIVALS = ("constant", "poisson")


@dataclass(frozen=True)
class Step:
    rate: float  # requests per second, all workers together
    seconds: float


def steps_of(rate: float, seconds: float) -> tuple[Step, ...]:
    return (Step(float(rate), float(seconds)),)


def check(steps: Sequence[Step], arrival: str, workers: int) -> None:
    """ValueError naming the first bad setting."""
    if arrival not in ARRIVALS:
        raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, not {arrival!r}")
    if workers < 1:
        raise ValueError(f"need at least 1 worker, not {workers}")
    if not steps:
        raise ValueError("a schedule needs at least one step")
    for s in steps:
        if not (math.isfinite(s.rate) and s.rate > 0):
            raise ValueError(f"the rate must be above 0 requests/s, not {s.rate:g}")
        if not (math.isfinite(s.seconds) and s.seconds > 0):
            raise ValueError(f"a step must last more than 0 s, not {s.seconds:g}")


def global_offsets(
    steps: Sequence[Step], arrival: str = "constant", seed: int = 0
) -> Iterator[float]:
    """Seconds from t0 of every request of the whole load, in order."""
    begin = 0.0
    rng = random.Random(seed)
    for step in steps:
        end = begin + step.seconds
        if arrival == "constant":
            count = int(math.floor(step.rate * step.seconds + 1e-9))
            for m in range(count):
                yield begin + m / step.rate
        else:
            t = begin + rng.expovariate(step.rate)
            while t < end:
                yield t
                t += rng.expovariate(step.rate)
        begin = end


def worker_offsets(
    steps: Sequence[Step],
    arrival: str = "constant",
    worker_index: int = 0,
    workers: int = 1,
    seed: int = 0,
) -> Iterator[tuple[int, float]]:
    """(global request number, seconds from t0) of one worker's share."""
    for k, offset in enumerate(global_offsets(steps, arrival, seed)):
        if k % workers == worker_index:
            yield k, offset


def planned_count(steps: Sequence[Step], arrival: str = "constant") -> int | None:
    """Requests of the whole load when known in advance (constant arrivals)."""
    if arrival != "constant":
        return None
    return sum(int(math.floor(s.rate * s.seconds + 1e-9)) for s in steps)


def step_bounds(steps: Sequence[Step]) -> list[tuple[float, float, float]]:
    """(rate, start offset, end offset) of each step."""
    out, begin = [], 0.0
    for s in steps:
        out.append((s.rate, begin, begin + s.seconds))
        begin += s.seconds
    return out


def wait_until(due: float, clock: Callable[[], float], sleep: Callable[[float], None]) -> float:
    """Sleep until CLOCK() >= DUE and return that time: never before DUE.

    Timers may wake a little early; the loop sleeps again for what is left.
    """
    now = clock()
    while now < due:
        sleep(due - now)
        now = clock()
    return now


class Dispatcher:
    """Hands one worker's due requests to whichever of its users is free.

    A user asks for the next request, waits until it is due, sends it and
    asks again. A request whose due time has passed (every user was busy)
    goes out at once and keeps its intended start: its response time then
    includes the wait. ``t0`` is on the CLOCK's scale.
    """

    def __init__(self, offsets: Iterator[tuple[int, float]], t0: float) -> None:
        self._offsets = offsets
        self.t0 = t0
        self.handed = 0
        self.exhausted = False

    def next(self) -> tuple[int, float] | None:
        """(request number, due time on the clock), or None when the load is over."""
        if self.exhausted:
            return None
        try:
            k, offset = next(self._offsets)
        except StopIteration:
            self.exhausted = True
            return None
        self.handed += 1
        return k, self.t0 + offset
