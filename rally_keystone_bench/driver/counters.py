"""Keystone's cost counters for a finished Rally task: trace store -> workloads -> summary.

After each task, the traces its requests left in the run's trace store are
taken (read from where the last task's take stopped), split into the task's
workloads by time and counted per action; the task's summary is then written
once with them (driver/task_reports.write_summary).
"""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.deploy import profiling, tracing
from rally_keystone_bench.report.flame import Flames, WorkloadFlame, flame_svg
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


def access_lines(keystone_dir: Path) -> list[str]:
    """Keystone's access log: each node's behind a balancer, else the deployment's."""
    logs = sorted(keystone_dir.glob("node*/access.log")) or [keystone_dir / "access.log"]
    lines: list[str] = []
    for log in logs:
        try:
            lines.extend(log.read_text(errors="replace").splitlines())
        except OSError:
            continue
    return lines


def served_requests(keystone_dir: Path | None, spans: Sequence[profiles.Span]) -> dict[str, int]:
    """Requests Keystone served in SPANS (epoch seconds), per token action and in all."""
    if keystone_dir is None or not spans:
        return {}
    return dict(profiles.served(access_lines(keystone_dir), spans))


def profile_view(
    profile: Path, workloads: Sequence[Any], stem: str, keystone_dir: Path | None
) -> tuple[Flames, dict[str, Any] | None]:
    """summary.html's flame graphs of PROFILE (py-spy's stacks of a task), and summary.json's
    ``profile``: one graph per workload when the samples were kept in time slices, each
    workload the samples taken while its iterations ran; else one graph of the task."""
    sliced = profiling.slices_of(profile.with_suffix("") if profile.suffix == ".xz" else profile)
    if not sliced.is_file():
        stacks = profiles.parse(profiling.read_lines(profile))
        whole = flame_svg(stacks, f"{stem}: Keystone's server processes") if stacks else None
        return Flames(whole=whole, samples=sum(stacks.values())), None
    texts, slices = profiling.read_slices(sliced)
    spans = [(a, b) for a, b, _ in slices]
    spans_of = windows(workloads)
    per = []
    for i, group in enumerate(profiles.split_by_windows(slices, spans_of)):
        stacks = profiles.parse(f"{texts[k]} {n}" for k, n in group.items())
        title = f"{stem}, workload {i + 1}: Keystone's server processes"
        window = spans_of[i]
        per.append(
            WorkloadFlame(
                flame_svg(stacks, title) if stacks else None,
                sum(stacks.values()),
                window[1] - window[0] if window else 0.0,
                served_requests(keystone_dir, [window] if window else []),
            )
        )
    flames = Flames(per_workload=per, slice_s=_slice_length(spans))
    doc = {
        "samples": sum(sum(c.values()) for _, _, c in slices),
        "sampled_seconds": sum(b - a for a, b in spans),
        "slice_seconds": flames.slice_s,
        "requests_served": served_requests(keystone_dir, spans),
    }
    return flames, doc


def _slice_length(spans: Sequence[profiles.Span]) -> float | None:
    lengths = sorted(b - a for a, b in spans)
    return round(lengths[len(lengths) // 2], 1) if lengths else None


def gather(outcome: Any, keystone_dir: Path | None, profile: Path | None = None) -> None:
    """Keystone's side of OUTCOME, for its summary: its counters from the trace store, the
    traced Keystone's state after the load, and PROFILE (py-spy's collapsed stacks of the
    task) drawn as flame graphs (profile_view). The summary is written after, once
    (task_reports.write_summary)."""
    traced = keystone_dir is not None and tracing.store_path(keystone_dir).is_dir()
    records = tracing.take_records(keystone_dir) if traced and keystone_dir else []
    if not outcome.workloads or (not traced and profile is None):
        return
    if traced:
        outcome.counters = per_workload(records, outcome.workloads)
        pools = tracing.checked_out(keystone_dir) if keystone_dir else {}
        outcome.checked_out = sum(pools.values()) if pools else None
        outcome.keystone = {"db_connections_checked_out": outcome.checked_out}
    if profile is not None and profile.exists():
        stem = outcome.task_file.stem
        outcome.flames, outcome.profile = profile_view(
            profile, outcome.workloads, stem, keystone_dir
        )


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
        writer.create_private(path, key)


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


def load_profile(result: str) -> tuple[collections.Counter, dict] | None:
    """py-spy's stacks that ``run`` kept beside RESULT (``STEM-profile.txt.xz``), and the
    requests Keystone served while py-spy sampled (summary.json's ``profile``).

    None without a profile file, or without that count (a run before it was
    kept): Rally's timed requests are not what Keystone served, and self time
    divided by them exceeds the request.
    """
    path = Path(result)
    named = path.parent / f"{path.stem}-profile.txt"
    profile = next((p for p in (profiling.stored(named), named) if p.is_file()), None)
    if not path.is_file() or profile is None:
        return None
    try:
        doc = json.loads((path.parent / f"{path.stem}-summary" / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    served = ((doc.get("profile") or {}) if isinstance(doc, dict) else {}).get("requests_served")
    if not served:
        return None
    stacks = profiles.parse(profiling.read_lines(profile))
    if not stacks:
        return None
    return stacks, {str(k): int(v) for k, v in served.items()}
