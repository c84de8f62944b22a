"""What Keystone itself says during the gate's paired runs: SQL costs and py-spy stacks.

Each task run adds its traced requests (OSprofiler, per side) and its
collapsed stacks (py-spy, per side); the gate then judges the counts
(``verdicts.counters``) and says where the added time went
(``verdicts.profiles``).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench.deploy import profiling, tracing
from rally_keystone_bench.driver import counters as keystone_counters
from rally_keystone_bench.driver.task import progress
from rally_keystone_bench.verdicts import counters, profiles
from rally_keystone_bench.verdicts.blocks import workload_label

SIDES = ("baseline", "candidate")


@dataclasses.dataclass
class Evidence:
    """Per side: traced request costs (with their workload's title), collapsed stacks and
    the requests they cover."""

    records: dict[str, list] = dataclasses.field(
        default_factory=lambda: {side: [] for side in SIDES}
    )
    stacks: dict[str, collections.Counter] = dataclasses.field(
        default_factory=lambda: {side: collections.Counter() for side in SIDES}
    )
    requests: dict[str, collections.Counter] = dataclasses.field(
        default_factory=lambda: {side: collections.Counter() for side in SIDES}
    )
    # side -> where its Keystone's source files are (py-spy's file names resolve there)
    sources: dict[str, list[Path]] = dataclasses.field(default_factory=dict)

    def read_sources(self, keystones: dict[str, Any]) -> None:
        """Each side's source roots, from its LocalKeystone's environment (``venv``)."""
        self.sources = {side: profiling.source_roots(ks.venv) for side, ks in keystones.items()}

    def add_run(self, got: dict, run_dirs: dict[str, Any], workloads: Sequence[Any]) -> None:
        """A task run's stacks (GOT: side -> Profile) and each side's traced requests.

        RUN_DIRS: side -> its run directory, or its list of them (the gate's two pairs).
        The stacks count per request its Keystone served while py-spy sampled (its
        access log), not per request Rally timed: untimed requests are served too.
        """
        for side, prof in got.items():
            if prof.path is None:
                continue
            self.stacks[side].update(profiles.parse(profiling.read_lines(prof.path)))
            for run_dir in _dirs(run_dirs[side]):
                served = keystone_counters.served_requests(run_dir, prof.spans)
                self.requests[side].update(served)
        for side in SIDES:  # each of a side's deployments (the gate's pairs)
            dirs = _dirs(run_dirs[side])
            records = [r for d in dirs for r in tracing.take_records(d)]
            self.records[side].extend(
                (workload_label(wl), cost)
                for wl, cost in keystone_counters.side_costs(records, workloads, f"{side}.")
            )

    def counter_changes(self, tolerance: int) -> list:
        """Per workload (a token path) and action: counts per request, baseline against candidate.

        Never pooled across workloads: one path's added statement is not
        outvoted by the paths that did not change.
        """
        if not all(self.records.values()):
            return []
        grouped: dict[str, dict[str, list]] = {side: {} for side in SIDES}
        for side, kept in self.records.items():
            for label, cost in kept:
                grouped[side].setdefault(label, []).append(cost)
        changes = []
        for label in grouped["baseline"]:
            if label not in grouped["candidate"]:
                continue
            before, after = (counters.by_action(grouped[side][label]) for side in SIDES)
            changes.extend(counters.compare(before, after, tolerance, workload=label))
        return changes

    def traced(self) -> dict[str, dict[str, int]]:
        """Side -> workload -> traced requests kept (each timed workload should have some)."""
        out: dict[str, dict[str, int]] = {side: {} for side in SIDES}
        for side, kept in self.records.items():
            for label, _ in kept:
                out[side][label] = out[side].get(label, 0) + 1
        return out

    def untraced(self, workloads: Sequence[str]) -> list[str]:
        """A note for each timed workload a side has no traced request of (no counter verdict)."""
        traced = self.traced()
        return [
            f"counters: no traced request of {label} on the {side}: its counts are not judged"
            for label in dict.fromkeys(workloads)
            for side in SIDES
            if not traced[side].get(label)
        ]

    def where_time_went(self) -> list:
        """The functions whose self time per request changed most, and the lines (empty
        without profiles); a line's text from the candidate's own sources only (the
        baseline's file of the same name may say something else at that line)."""
        if not all(self.stacks.values()):
            return []
        roots = self.sources.get("candidate", [])
        return profiles.diff(
            self.stacks["baseline"], self.stacks["candidate"],
            (self.requests["baseline"], self.requests["candidate"]), profiling.RATE,
            source=profiling.line_reader(roots) if roots else None,
        )  # fmt: skip


def _dirs(found: Any) -> list[Path]:
    return [found] if isinstance(found, Path) else list(found)


def prepare_tracing(deps: dict[str, Any], run_root: Path, traced: bool) -> None:
    """Both sides traced (or not), with one key our clients sign with."""
    for dep in deps.values():
        dep.trace = traced
    if traced:
        keystone_counters.share_key([run_root / name / "keystone" for name in deps])


@contextlib.contextmanager
def profiled_sides(trees: dict, out_dir: Path, n: int, enabled: bool) -> Iterator[dict]:
    """py-spy on each side's servers while a task run goes; yields side -> Profile."""
    with contextlib.ExitStack() as spies:
        yield {
            side: spies.enter_context(
                profiling.profiled(
                    trees[side] if enabled else [],
                    out_dir / f"profile-{side}-run{n}.txt",
                    progress,
                )
            )
            for side in SIDES
        }
