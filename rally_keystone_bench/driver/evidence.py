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
    # Why a timed workload may have no traced request: per deployment (its run
    # directory), the trace records its store held over every run, and whether its
    # Keystone holds the key our clients sign with; per (side, workload) its deployment.
    stored: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    names: dict[Path, str] = dataclasses.field(default_factory=dict)
    keyless: set[Path] = dataclasses.field(default_factory=set)
    targets: dict[tuple[str, str], Path] = dataclasses.field(default_factory=dict)

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
            records = []
            for run_dir in _dirs(run_dirs[side]):
                taken = tracing.take_records(run_dir)
                self.stored[Path(run_dir)] += len(taken)
                records.extend(taken)
            self.records[side].extend(
                (workload_label(wl), cost)
                for wl, cost in keystone_counters.side_costs(records, workloads, f"{side}.")
            )
            for wl in workloads:  # the deployment the workload sent SIDE's requests to
                target = _target(wl, side, _dirs(run_dirs[side]))
                if target is not None:
                    self.targets[(side, workload_label(wl))] = target

    def check_keys(self, keystones: dict[str, Any], signer: Path) -> list[str]:
        """Note each deployment whose Keystone does not hold the trace key our clients sign
        with (SIGNER's run directory's): it traces none of their requests. Lines to print."""
        self.names = {Path(ks.run_dir): name for name, ks in keystones.items()}
        self.keyless = {d for d in self.names if not tracing.same_key(d, signer)}
        return [
            f"counters: {self.names[d]}'s Keystone does not hold the trace key our clients sign "
            "with: none of its requests will be traced, its workloads' counts will be unknown"
            for d in sorted(self.keyless)
        ]

    def counter_changes(self, tolerance: int, expected: Sequence[tuple[str, str]] = ()) -> list:
        """Per workload (a token path) and action: counts per request, baseline against candidate.

        Never pooled across workloads: one path's added statement is not
        outvoted by the paths that did not change. EXPECTED: (workload, action)
        of every timed paired action; one a side traced no request of gets an
        unknown SQL count that says why, never silence (read as unchanged).
        """
        grouped: dict[str, dict[str, list]] = {side: {} for side in SIDES}
        for side, kept in self.records.items():
            for label, cost in kept:
                grouped[side].setdefault(label, []).append(cost)
        changes = []
        for label in dict.fromkeys([*grouped["baseline"], *(w for w, _ in expected)]):
            found = []
            if all(label in grouped[side] for side in SIDES):
                before, after = (counters.by_action(grouped[side][label]) for side in SIDES)
                found = counters.compare(before, after, tolerance, workload=label)
            changes.extend(found)
            judged = {c.action for c in found if c.counter == counters.SQL}
            for action in dict.fromkeys(a for w, a in expected if w == label):
                if action not in judged:
                    why = self._missing(label, action, grouped)
                    changes.append(counters.unknown(action, label, why))
        return changes

    def _missing(self, label: str, action: str, grouped: dict[str, dict[str, list]]) -> str:
        """Why LABEL's ACTION has no count: each side without a complete traced request."""
        said = []
        for side in SIDES:
            costs = [c for c in grouped[side].get(label, []) if c.action == action]
            if costs and not any(c.complete for c in costs):
                said.append(f"on the {side}, {len(costs)} traced request(s) that never ended")
            elif not costs:
                said.append(f"no traced request on the {side}: {self.why_untraced(side, label)}")
        return "; ".join(said) or "no traced request"

    def why_untraced(self, side: str, label: str) -> str:
        """Why SIDE has no traced request of the workload LABEL, as far as the run shows."""
        target = self.targets.get((side, label))
        if target is None:
            who = f"the {side}'s Keystones"
        else:
            who = f"{self.names[target]}'s Keystone" if target in self.names else "its Keystone"
            if target in self.keyless:
                return f"{who} does not hold the trace key our clients sign with"
            if not self.stored[target]:
                return f"{who} wrote no trace record in any task run"
        return f"none of the requests {who} traced started inside the workload's iterations"

    def traced(self) -> dict[str, dict[str, int]]:
        """Side -> workload -> traced requests kept (each timed workload should have some)."""
        out: dict[str, dict[str, int]] = {side: {} for side in SIDES}
        for side, kept in self.records.items():
            for label, _ in kept:
                out[side][label] = out[side].get(label, 0) + 1
        return out

    def untraced(self, workloads: Sequence[str]) -> list[str]:
        """A note for each timed workload a side has no traced request of, and why: its
        counts are unknown (the gate is then inconclusive, never "unchanged")."""
        traced = self.traced()
        return [
            f"counters: no traced request of {label} on the {side}: its counts are unknown "
            f"({self.why_untraced(side, label)})"
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


def _target(wl: Any, side: str, dirs: Sequence[Path]) -> Path | None:
    """The run directory of DIRS whose openrc the workload's SIDE argument names, if any
    (a side of one deployment: that one)."""
    openrc = (getattr(wl, "args", None) or {}).get(side)
    if not isinstance(openrc, str):
        return Path(dirs[0]) if len(dirs) == 1 else None
    parent = Path(openrc).resolve().parent
    return next((Path(d) for d in dirs if Path(d).resolve() == parent), None)


def share_trace_key(deps: dict[str, Any], run_root: Path) -> None:
    """One key our clients sign with, for every traced deployment of DEPS."""
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
