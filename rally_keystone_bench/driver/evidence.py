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

SIDES = ("baseline", "candidate")


@dataclasses.dataclass
class Evidence:
    """Per side: traced request costs, collapsed stacks and the requests they cover."""

    records: dict[str, list] = dataclasses.field(
        default_factory=lambda: {side: [] for side in SIDES}
    )
    stacks: dict[str, collections.Counter] = dataclasses.field(
        default_factory=lambda: {side: collections.Counter() for side in SIDES}
    )
    requests: dict[str, collections.Counter] = dataclasses.field(
        default_factory=lambda: {side: collections.Counter() for side in SIDES}
    )

    def add_run(self, got: dict, run_dirs: dict[str, Path], workloads: Sequence[Any]) -> None:
        """A task run's stacks (GOT: side -> Profile) and each side's traced requests."""
        for side, prof in got.items():
            if prof.path is None:
                continue
            self.stacks[side].update(
                profiles.parse(prof.path.read_text(errors="replace").splitlines())
            )
            for wl in workloads:
                for name, a in wl.actions.items():
                    if name.startswith(f"{side}."):
                        self.requests[side][name.removeprefix(f"{side}.")] += a.count
                        self.requests[side][profiles.ANY] += a.count
        for side in SIDES:
            records = tracing.take_records(run_dirs[side])
            self.records[side].extend(keystone_counters.side_costs(records, workloads, f"{side}."))

    def counter_changes(self, tolerance: int) -> list:
        """Each paired action's SQL statements per request, baseline against candidate."""
        if not all(self.records.values()):
            return []
        by_side = {side: counters.by_action(costs) for side, costs in self.records.items()}
        return counters.compare(by_side["baseline"], by_side["candidate"], tolerance)

    def where_time_went(self) -> list:
        """The functions whose self time per request changed most (empty without profiles)."""
        if not all(self.stacks.values()):
            return []
        return profiles.diff(
            self.stacks["baseline"], self.stacks["candidate"],
            (self.requests["baseline"], self.requests["candidate"]), profiling.RATE,
        )  # fmt: skip


def prepare_tracing(deps: dict[str, Any], run_root: Path, traced: bool) -> None:
    """Both sides traced (or not), with one key our clients sign with."""
    for dep in deps.values():
        dep.trace = traced
    if traced:
        keystone_counters.share_key([run_root / side / "keystone" for side in SIDES])


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
