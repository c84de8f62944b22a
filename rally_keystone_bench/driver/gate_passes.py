"""The default gate's two passes: Keystone at a cloud's size, and with the cache off.

The sized pass is every workload of ``tasks/gate-cloud.yaml``: both sides
(memcached on) are seeded with the same :data:`seed_plan.DEFAULT` before
the task starts. The cache-off pass is a second pair of deployments, the
same two Keystones with ``cache=none``, seeded alike, whose workloads
(validate and check) the task names by the task args ``baseline_nocache``
and ``candidate_nocache``. Both pairs stay up for the whole gate; the
sampler and the trace counters see a side's servers of both pairs.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path

from rally_keystone_bench.deploy import seeding
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.deploy.seed_plan import SeedPlan
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.report.records import write_json
from rally_keystone_bench.verdicts.blocks import SIDES

CACHE_OFF = "nocache"


def cache_off_name(side: str) -> str:
    """The deployment (and task arg) of SIDE's cache-off pass: ``baseline_nocache``."""
    return f"{side}_{CACHE_OFF}"


def with_cache_off(deps: Mapping[str, Deployment]) -> dict[str, Deployment]:
    """DEPS plus each side's twin without a cache (everything else the same)."""
    twins = {cache_off_name(s): dataclasses.replace(deps[s], cache="none") for s in SIDES}
    return {**deps, **twins}


def side_of(name: str) -> str:
    """The side a deployment NAME belongs to (``baseline_nocache`` -> ``baseline``)."""
    return name.split("_")[0]


def server_trees(keystones: Mapping[str, LocalKeystone]) -> dict[str, list[int]]:
    """Each side's server pids over both pairs ("server", or "<node>-server")."""
    trees: dict[str, list[int]] = {side: [] for side in SIDES}
    for name, ks in keystones.items():
        trees[side_of(name)] += [p for n, p in ks.pids.items() if n.split("-")[-1] == "server"]
    return trees


def run_dirs(keystones: Mapping[str, LocalKeystone]) -> dict[str, list[Path]]:
    """Each side's run directories over both pairs."""
    dirs: dict[str, list[Path]] = {side: [] for side in SIDES}
    for name, ks in keystones.items():
        dirs[side_of(name)].append(ks.run_dir)
    return dirs


def seed_both(
    keystones: Mapping[str, LocalKeystone], plan: SeedPlan, out_dir: Path
) -> tuple[float, str]:
    """Seed every deployment with PLAN, all at once; (seconds, the line to print).

    What each one holds afterwards (rows per table) goes to OUT_DIR/seeded.json.
    """
    rally_task.progress(f"seeding {len(keystones)} deployments: {plan.describe()}")
    reports, took = seeding.seed_all(keystones, plan)
    write_json(seeding.seeded_path(out_dir), reports, indent=1)
    events = sorted({r["counts"]["revocation_event"] for r in reports.values()})
    line = (
        f"setup: seeded {len(keystones)} deployments in {took:.1f} s, before any timed "
        f"window ({'/'.join(f'{e:,}' for e in events)} revocation events each; "
        f"rows per table in {seeding.seeded_path(out_dir)})"
    )
    return took, line


def total_line(began: float, setup: dict[str, float]) -> str:
    """The gate's last line: its time from start to verdict, and its setup's share."""
    total = time.monotonic() - began
    parts = ", ".join(f"{k} {v:.0f} s" for k, v in setup.items())
    return f"gate: {total:.0f} s from start to verdict ({total / 60:.1f} min; {parts})"
