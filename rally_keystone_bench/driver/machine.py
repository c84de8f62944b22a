"""The machine's record of one load: /proc sampled while it runs, reduced to its load windows.

Every ``rally task start`` we drive is sampled (:class:`procstat.Sampler`);
the gate reads the intervals block by block, every other verb keeps the
run's record (:mod:`verdicts.machine`) in its summary, where ``compare``
finds it. Capacity probes and ``load``, on either engine, are sampled the
same way (:func:`sampling`: what their probers sample each load with).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench import procstat
from rally_keystone_bench.verdicts import machine
from rally_keystone_bench.verdicts.machine import DEPLOYMENT, MachineState

PROBE_INTERVAL_S = 1.0  # a probe's or a load's sampling interval (as run_task's)


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
    return machine.of_sampler(sampler, machine.load_windows(workloads))


def sampling(
    *target_dirs: Path, interval: float = PROBE_INTERVAL_S
) -> Callable[[], contextlib.AbstractContextManager[procstat.Sampler]]:
    """What a prober samples each load with: :func:`sampled`, with the target's processes
    (a local Keystone's or the mock's, in TARGET_DIRS) read as each load starts, when
    the target is up."""

    def one_load() -> contextlib.AbstractContextManager[procstat.Sampler]:
        return sampled(target_trees(*target_dirs), interval)

    return one_load


def target_sampling(run_dir: Path) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """:func:`sampling` of a verb's target started in RUN_DIR: a local Keystone in
    RUN_DIR/keystone (driver/targets), the mock in RUN_DIR/mock (verbs/options)."""
    return sampling(run_dir / "keystone", run_dir / "mock")


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


def target_trees(*target_dirs: Path) -> dict[str, list[int]]:
    """The target's processes as the deployment: a local Keystone's (its state.json) or
    the mock's (its mock.json) in any of TARGET_DIRS; {} for a cloud."""
    pids: list[int] = []
    for where in target_dirs:
        pids += deployment_trees(where).get(DEPLOYMENT, [])
        with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
            pids.append(int(json.loads((Path(where) / "mock.json").read_text())["pid"]))
    return {DEPLOYMENT: pids} if pids else {}


def load_saved(result: str) -> MachineState | None:
    """The machine record a run kept beside RESULT, or None.

    ``run`` keeps it in ``STEM-summary/summary.json``, ``load`` in the
    ``summary.json`` beside its report (whose source names the report).
    """
    path = Path(result)
    if path.name == "summary.json":
        doc = _read(path)
    else:
        doc = _read(path.parent / f"{path.stem}-summary" / "summary.json")
        beside = _read(path.parent / "summary.json") if doc is None else None
        if beside is not None and Path(str(beside.get("source", ""))).name == path.name:
            doc = beside
    found = doc.get("machine") if doc is not None else None
    return MachineState.from_dict(found) if isinstance(found, dict) else None


def _read(summary: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(summary.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
