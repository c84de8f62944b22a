"""CPU seconds of the gate's sampled intervals, grouped into blocks: pure arithmetic.

The intervals come from :class:`procstat.Sampler` (which reads /proc) and the
requests from Keystone's access log (:func:`procstat.read_access_log`); here
they are only counted.
"""

from __future__ import annotations

import dataclasses
import os

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
GENERATOR = "generator"


@dataclasses.dataclass
class Interval:
    """CPU ticks used between two samples."""

    start: float  # epoch seconds
    end: float
    busy: int  # the whole machine, every CPU
    steal: int
    groups: dict[str, int]  # tree name (and GENERATOR, SELF) -> ticks
    pids: dict[tuple[str, int], int]  # (tree name, pid) -> ticks


@dataclasses.dataclass
class Window:
    """A block's worth of intervals, in cores (CPU seconds per second)."""

    start: float
    end: float
    other: float
    other_swing: float
    steal: float
    generator: float
    pid_seconds: dict[tuple[str, int], float]  # CPU seconds of each server process


def _cores(ticks: float, seconds: float) -> float:
    return ticks / TICKS / seconds if seconds > 0 else 0.0


def other_ticks(iv: Interval) -> int:
    return max(0, iv.busy - sum(iv.groups.values()))


def windows(intervals: list[Interval], per_block: int) -> list[Window]:
    """Consecutive groups of PER_BLOCK intervals (a last partial group is dropped)."""
    out = []
    for i in range(0, len(intervals) - per_block + 1, per_block):
        group = intervals[i : i + per_block]
        seconds = group[-1].end - group[0].start
        others = [_cores(other_ticks(iv), iv.end - iv.start) for iv in group]
        pid_seconds: dict[tuple[str, int], float] = {}
        for iv in group:
            for key, ticks in iv.pids.items():
                pid_seconds[key] = pid_seconds.get(key, 0.0) + ticks / TICKS
        out.append(
            Window(
                start=group[0].start,
                end=group[-1].end,
                other=_cores(sum(other_ticks(iv) for iv in group), seconds),
                other_swing=max(others) - min(others),
                steal=_cores(sum(iv.steal for iv in group), seconds),
                generator=_cores(sum(iv.groups.get(GENERATOR, 0) for iv in group), seconds),
                pid_seconds=pid_seconds,
            )
        )
    return out


def cpu_between(intervals: list[Interval], start: float, end: float) -> tuple[float, float, dict]:
    """CPU seconds of each server process in the intervals that overlap [START, END).

    Returns the span those intervals cover and {(tree name, pid): seconds}.
    """
    chosen = [iv for iv in intervals if iv.end > start and iv.start < end]
    pid_seconds: dict[tuple[str, int], float] = {}
    for iv in chosen:
        for key, ticks in iv.pids.items():
            pid_seconds[key] = pid_seconds.get(key, 0.0) + ticks / TICKS
    if not chosen:
        return start, start, pid_seconds
    return chosen[0].start, chosen[-1].end, pid_seconds


@dataclasses.dataclass(frozen=True)
class Request:
    """One line of a Keystone access log."""

    start: float  # epoch seconds
    seconds: float  # server time
    pid: int
    status: int


def served(requests: list[Request], start: float, end: float) -> tuple[float, set[int]]:
    """Requests served in [START, END), each counted by the share of its time inside.

    Returns that count and the pids that served them.
    """
    count, pids = 0.0, set()
    for r in requests:
        r_end = r.start + max(r.seconds, 1e-6)
        overlap = min(end, r_end) - max(start, r.start)
        if overlap <= 0:
            continue
        count += overlap / (r_end - r.start)
        pids.add(r.pid)
    return count, pids
