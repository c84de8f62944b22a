"""The machine's record of one task: /proc sampled while Rally runs, reduced to its load windows.

Every ``rally task start`` we drive is sampled (:class:`procstat.Sampler`);
the gate reads the intervals block by block, every other verb keeps the
run's record (:mod:`verdicts.machine`) in its summary, where ``compare``
finds it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench import procstat
from rally_keystone_bench.driver.counters import windows
from rally_keystone_bench.verdicts import machine
from rally_keystone_bench.verdicts.machine import DEPLOYMENT, MachineState


@contextlib.contextmanager
def sampled(
    trees: Mapping[str, Sequence[int]] | None, interval: float
) -> Iterator[procstat.Sampler]:
    """A Sampler of TREES (name -> root pids) running for the block's duration."""
    sampler = procstat.Sampler(trees or {}, interval)
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stop()


def state_of(sampler: procstat.Sampler | None, workloads: Sequence[Any]) -> MachineState | None:
    """The record of SAMPLER's intervals inside the WORKLOADS' load windows."""
    if sampler is None or not workloads:
        return None
    return machine.from_intervals(
        list(sampler.intervals), windows(workloads), sampler.load_averages
    )


def deployment_trees(keystone_dir: Path | None) -> dict[str, list[int]]:
    """A local Keystone's every process root (servers, database, cache, ...) from state.json."""
    if keystone_dir is None:
        return {}
    try:
        state = json.loads((Path(keystone_dir) / "state.json").read_text())
    except (OSError, ValueError):
        return {}
    pids = [int(p) for p in (state.get("pids") or {}).values() if str(p).isdigit()]
    return {DEPLOYMENT: pids} if pids else {}


def load_saved(result: str) -> MachineState | None:
    """The machine record a run kept beside RESULT (``STEM-summary/summary.json``), or None."""
    path = Path(result)
    summary = (
        path
        if path.name == "summary.json"
        else path.parent / f"{path.stem}-summary" / "summary.json"
    )
    try:
        doc = json.loads(summary.read_text())
    except (OSError, ValueError):
        return None
    found = doc.get("machine") if isinstance(doc, dict) else None
    return MachineState.from_dict(found) if isinstance(found, dict) else None
