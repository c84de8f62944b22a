"""Keystone's cost counters for a finished Rally task: trace store -> workloads -> summary.

After each task, the traces its requests left in the run's trace store are
taken (the store is emptied for the next task), split into the task's
workloads by time, counted per action, and the task's summary is written
again with them.
"""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench.deploy import profiling, tracing
from rally_keystone_bench.report.flame import flame_svg
from rally_keystone_bench.report.render import write_summary
from rally_keystone_bench.verdicts import counters, profiles
from rally_keystone_bench.verdicts.machine import load_windows as windows  # each workload's span


def per_workload(records: Sequence[dict], workloads: Sequence[Any]) -> list[dict[str, dict]]:
    """For each workload, action -> its counters (as summary.json keeps them).

    Only the workload's atomic actions: a request a scenario sends untimed
    inside an iteration (the token a validation workload validates) is left out.
    """
    costs = counters.request_costs(records)
    groups = counters.split_by_windows(costs, windows(workloads))
    return [
        {name: c.as_dict() for name, c in counters.by_action(group).items() if name in wl.actions}
        for wl, group in zip(workloads, groups, strict=True)
    ]


def gather(outcome: Any, keystone_dir: Path | None, profile: Path | None = None) -> None:
    """Set OUTCOME.counters from the trace store; rewrite its summary with them and PROFILE.

    PROFILE: py-spy's collapsed stacks of the task, drawn as a flame graph.
    """
    traced = keystone_dir is not None and tracing.store_path(keystone_dir).is_dir()
    records = tracing.take_records(keystone_dir) if traced and keystone_dir else []
    if not outcome.workloads or (not traced and profile is None):
        return
    if traced:
        outcome.counters = per_workload(records, outcome.workloads)
        pools = tracing.checked_out(keystone_dir) if keystone_dir else {}
        outcome.checked_out = sum(pools.values()) if pools else None
    flame = None
    stem = outcome.task_file.stem
    if profile is not None and profile.exists():
        stacks = profiles.parse(profiling.read_lines(profile))
        flame = flame_svg(stacks, f"{stem}: Keystone's server processes") if stacks else None
    if outcome.summary is not None:
        label = f"{stem} ({outcome.interrupted}: what ran)" if outcome.interrupted else stem
        state = {"db_connections_checked_out": outcome.checked_out} if traced else None
        write_summary(
            outcome.workloads, outcome.summary.parent, label, outcome.counters, flame, state,
            getattr(outcome, "machine", None),
        )  # fmt: skip


def server_pids(keystone_dir: Path | None) -> list[int]:
    """The pids of a local Keystone's servers (uWSGI masters...), from its state.json."""
    if keystone_dir is None:
        return []
    try:
        state = json.loads((keystone_dir / "state.json").read_text())
    except (OSError, ValueError):
        return []
    pids = state.get("pids") or {}
    return [int(p) for name, p in pids.items() if str(name).split("-")[-1] == "server"]


def share_key(run_dirs: Sequence[Path]) -> None:
    """One trace key for several deployments (the gate's two sides), 0600 in each RUN_DIR.

    Our clients sign with one key; each side's Keystone accepts it.
    """
    for run_dir in run_dirs:
        run_dir.mkdir(parents=True, exist_ok=True)
    tracing.prepare(run_dirs[0])
    key = tracing.key_path(run_dirs[0]).read_text()
    for run_dir in run_dirs[1:]:
        path = tracing.key_path(run_dir)
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(key)


def side_costs(
    records: Sequence[dict], workloads: Sequence[Any], prefix: str = ""
) -> list[tuple[Any, counters.RequestCost]]:
    """The traced requests timed as an atomic action of one of WORKLOADS, each with its workload.

    PREFIX: the gate's side (``baseline.``), as its atomic action names carry it.
    """
    costs = counters.request_costs(records)
    kept: list[tuple[Any, counters.RequestCost]] = []
    for wl, group in zip(
        workloads, counters.split_by_windows(costs, windows(workloads)), strict=True
    ):
        kept.extend((wl, c) for c in group if prefix + c.action in wl.actions)
    return kept


def load_saved(result: str) -> dict[int, dict[str, counters.ActionCounters]] | None:
    """The counters a run kept beside RESULT (its Rally JSON): ``STEM-summary/summary.json``.

    Per workload (its index in the task, from 0), action -> counters:
    workloads of one task differ in cost. None when RESULT is not a file or
    its summary has no counters.
    """
    path = Path(result)
    if not path.is_file():
        return None
    summary = path.parent / f"{path.stem}-summary" / "summary.json"
    if path.name == "summary.json":
        summary = path
    try:
        doc = json.loads(summary.read_text())
    except (OSError, ValueError):
        return None
    found: dict[int, dict[str, counters.ActionCounters]] = {}
    for i, wl in enumerate(doc.get("workloads") or []):
        saved = wl.get("counters") or {}
        if saved:
            found[i] = {n: counters.ActionCounters.from_dict(c) for n, c in saved.items()}
    return found or None


def load_profile(result: str, workloads: Sequence[Any]) -> tuple[collections.Counter, dict] | None:
    """py-spy's stacks that ``run`` kept beside RESULT (``STEM-profile.txt.xz``), and the requests.

    The requests: each atomic action's iterations in WORKLOADS (RESULT's),
    and all of them under ``profiles.ANY``. None without a profile file.
    """
    path = Path(result)
    named = path.parent / f"{path.stem}-profile.txt"
    profile = next((p for p in (profiling.stored(named), named) if p.is_file()), None)
    if not path.is_file() or profile is None:
        return None
    stacks = profiles.parse(profiling.read_lines(profile))
    if not stacks:
        return None
    requests: collections.Counter = collections.Counter()
    for wl in workloads:
        for name, a in wl.actions.items():
            if name != "total":
                requests[name] += a.count
                requests[profiles.ANY] += a.count
    return stacks, dict(requests)
