"""The prober interface: one load at a rate on an engine, as it ran and as judged.

Both engines implement it (``driver/probers.RallyProber``,
``engines/locust/prober.LocustProber``) and both verbs go through it:
``prober.run(rate, report, log)`` runs one load and returns it unjudged (a
``LoadRun``: where its report went, what the engine said, whether it was
interrupted), which ``keystone-bench load`` summarizes; ``prober(rate,
role)`` and ``prober.ramp(rates)`` run loads the same way and judge them as
``probe_verdict.Probe`` objects, which the capacity search reads.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Protocol

from rally_keystone_bench.verdicts.probe_verdict import Probe


@dataclasses.dataclass
class LoadRun:
    """One load as its engine left it: nothing judged yet."""

    report: Path | None  # its Rally-format JSON report; None: the run gave no result
    log: Path  # Rally's task log; Locust's directory (master and worker logs, samples)
    error: str | None = None  # why there is no result, or why the result is short (a lost worker)
    uuid: str | None = None  # Rally's task
    rc: int | None = None  # rally task start's exit code
    stopped_for: str | None = None  # why its watcher stopped it early
    samples: Path | None = None  # Locust: one record per request
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)  # Locust's run.json
    interrupted: bool = False  # cut by a signal: what was sent until then
    # procstat.Sampler of the load (driver/machine.py), read for the machine's record
    sampler: Any = None


class Prober(Protocol):
    """One load at a rate on an engine (Rally's RallyProber, engines/locust's LocustProber).

    ``run(rate, report, log)`` runs one load and returns it unjudged; a
    signal during it raises KeyboardInterrupt carrying what was kept as
    ``exc.run`` (a LoadRun) when the engine kept anything. The search sees
    the judged probes only: ``prober(rate, role)`` runs and judges one
    probe, ``prober.ramp(rates)`` one rising run judged per step, and
    ``done`` keeps every probe made (kept when the search is cut).
    """

    done: list[Probe]

    def run(self, rate: float, report: Path, log: Path) -> LoadRun: ...

    def __call__(self, rate: float, role: str) -> Probe: ...

    def ramp(self, rates: list[float]) -> list[Probe]: ...
