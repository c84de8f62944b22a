"""How busy the machine was while a run measured: the record every run keeps.

A run's latencies are only comparable with another run's when the machine
treated both alike. While a task runs, :class:`procstat.Sampler` reads
/proc; here its intervals inside the workloads' load windows are reduced
to a few figures in cores (CPU seconds per second):

- other processes: everything that is neither the deployment under test
  (Keystone's servers, its database, cache, directory and balancer) nor the
  load generator, mean and the largest one-interval value;
- steal: CPU time the hypervisor gave to other guests;
- the load generator (Rally and its workers) and the deployment itself;
- the 1-minute load average, the largest seen.

Every ``rally task start`` a verb drives, every capacity probe and every
``load`` (either engine) keeps one (:func:`of_sampler`, for the load
windows of its workloads or of a ramp's steps). :func:`compare_states`
says when such records rule out an unpaired verdict.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rally_keystone_bench.verdicts.cpu import GENERATOR, TICKS, Interval, other_ticks

DEPLOYMENT = "deployment"  # the Sampler's tree name for the system under test


@dataclasses.dataclass(frozen=True)
class Bounds:
    """When a run counts as disturbed, in cores (the gate's block bounds, for a whole run)."""

    max_other_mean: float = 0.2
    max_other_peak: float = 0.6
    max_steal: float = 0.05

    def describe(self) -> str:
        return (
            f"disturbed: other processes above {self.max_other_mean:g} core on average or "
            f"{self.max_other_peak:g} core in any second, or steal above {self.max_steal:g} core"
        )


@dataclasses.dataclass(frozen=True)
class MachineState:
    """The machine during a run's load windows."""

    seconds: float  # of load sampled
    cores: int
    other_mean: float
    other_peak: float
    steal_mean: float
    generator_mean: float
    deployment_mean: float
    load_average: float | None = None  # the largest 1-minute load average seen

    def disturbed(self, bounds: Bounds | None = None) -> str | None:
        """Why this run cannot carry an unpaired verdict, or None."""
        b = bounds or Bounds()
        if self.seconds <= 0:
            return "no load window was sampled"
        if self.other_mean > b.max_other_mean:
            return f"other processes used {self.other_mean:.2f} core on average"
        if self.other_peak > b.max_other_peak:
            return f"other processes reached {self.other_peak:.2f} core"
        if self.steal_mean > b.max_steal:
            return f"the hypervisor stole {self.steal_mean:.2f} core"
        return None

    def sentence(self) -> str:
        """``other processes 0.03 core (peak 0.21), steal 0.00, load generator 0.45, ...``."""
        load = f", load average {self.load_average:.2f}" if self.load_average is not None else ""
        return (
            f"other processes {self.other_mean:.2f} core (peak {self.other_peak:.2f}), "
            f"steal {self.steal_mean:.2f}, load generator {self.generator_mean:.2f}, "
            f"Keystone's deployment {self.deployment_mean:.2f} of {self.cores} cores"
            f"{load}, over {self.seconds:.0f} s of load"
        )

    def headline(self, bounds: Bounds | None = None) -> str:
        """The sentence, after ``DISTURBED (why):`` when the run was."""
        why = self.disturbed(bounds)
        return f"DISTURBED ({why}): {self.sentence()}" if why else self.sentence()

    def as_dict(self, bounds: Bounds | None = None) -> dict[str, Any]:
        doc = dataclasses.asdict(self)
        doc["disturbed"] = self.disturbed(bounds)
        doc["rule"] = (bounds or Bounds()).describe()
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> MachineState:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in names})


def _cores(ticks: float, seconds: float) -> float:
    return ticks / TICKS / seconds if seconds > 0 else 0.0


def load_windows(workloads: Sequence[Any]) -> list[tuple[float, float] | None]:
    """Each workload's span in epoch seconds: first start to last end (None: no iteration)."""
    out: list[tuple[float, float] | None] = []
    for wl in workloads:
        if not wl.iterations:
            out.append(None)
            continue
        ends = wl.iteration_started + wl.iteration_duration
        out.append((float(wl.iteration_started.min()), float(ends.max())))
    return out


def within(
    intervals: Sequence[Interval], windows: Iterable[tuple[float, float] | None]
) -> list[Interval]:
    """The INTERVALS that overlap any of WINDOWS (epoch seconds)."""
    spans = [w for w in windows if w is not None]
    return [iv for iv in intervals if any(iv.end > lo and iv.start < hi for lo, hi in spans)]


def from_intervals(
    intervals: Sequence[Interval],
    windows: Iterable[tuple[float, float] | None],
    load_averages: Sequence[float] = (),
    cores: int | None = None,
) -> MachineState:
    """The record of INTERVALS that overlap the load WINDOWS (epoch seconds)."""
    chosen = within(intervals, windows)
    seconds = sum(iv.end - iv.start for iv in chosen)
    per = [_cores(other_ticks(iv), iv.end - iv.start) for iv in chosen if iv.end > iv.start]
    return MachineState(
        seconds=seconds,
        cores=cores or os.cpu_count() or 1,
        other_mean=_cores(sum(other_ticks(iv) for iv in chosen), seconds),
        other_peak=max(per, default=0.0),
        steal_mean=_cores(sum(iv.steal for iv in chosen), seconds),
        generator_mean=_cores(sum(iv.groups.get(GENERATOR, 0) for iv in chosen), seconds),
        deployment_mean=_cores(sum(iv.groups.get(DEPLOYMENT, 0) for iv in chosen), seconds),
        load_average=max(load_averages) if load_averages else None,
    )


def of_sampler(sampler: Any, windows: Iterable[tuple[float, float] | None]) -> MachineState | None:
    """The record of a sampler's intervals inside WINDOWS; None without a sampler.

    SAMPLER: what :class:`procstat.Sampler` leaves (``intervals`` and
    ``load_averages``), read after it stopped.
    """
    if sampler is None:
        return None
    return from_intervals(list(sampler.intervals), windows, list(sampler.load_averages))


def compare_states(
    base: MachineState | None, cand: MachineState | None, bounds: Bounds | None = None
) -> str | None:
    """Why two runs' machines rule out an unpaired verdict, or None when both were quiet.

    A run without a record (plain ``rally task start``) rules out nothing
    here: the caller says its machine's state is unknown.
    """
    for side, state in (("base", base), ("candidate", cand)):
        if state is not None:
            why = state.disturbed(bounds)
            if why:
                return f"the {side} run was disturbed: {why}"
    return None
