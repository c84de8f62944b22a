"""What this machine can hold: a deployment bigger than that is refused, not started.

Two limits, both stated in the refusal:

- CPU: server worker processes (nodes x workers) at most PROCESSES_PER_CORE
  per core. Beyond that Keystone measures the scheduler, not itself.
- Memory: every server process (each node's workers plus its master) is
  counted at PROCESS_MIB, and all of them together may take at most half of
  the machine's memory (the database, the load generator and the rest need
  the other half). 150 MiB: the resident size (``VmRSS``) of the uWSGI
  Keystone processes running on the 2-core, 24 GiB test machine was
  135-147 MiB (2026-11-25 11:50 UTC, other jobs running).
"""

from __future__ import annotations

import os
from pathlib import Path

from rally_keystone_bench.errors import BenchError

PROCESSES_PER_CORE = 16
PROCESS_MIB = 150


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def memory_mib() -> int:
    """MemTotal in MiB (0 when unknown: no memory limit then)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def check_size(nodes: int | None, workers: int) -> None:
    """BenchError when NODES x WORKERS server processes do not fit this machine."""
    n = nodes or 1
    processes = n * workers
    where = f"{n} node(s) x {workers} worker(s) = {processes} server processes"
    cpu_cap = PROCESSES_PER_CORE * cores()
    if processes > cpu_cap:
        raise BenchError(
            f"{where}: more than this machine's {cores()} core(s) can run "
            f"(at most {PROCESSES_PER_CORE} per core, {cpu_cap})"
        )
    total = memory_mib()
    need = n * (workers + 1) * PROCESS_MIB
    if total and need > total // 2:
        raise BenchError(
            f"{where}: about {need} MiB at {PROCESS_MIB} MiB a process, more than half "
            f"of this machine's {total} MiB"
        )


# A data size (scale --values): every item (a role, a group, a revocation
# event, a service's endpoints) is a few rows in Keystone's database, their
# index entries, its part of each token body, and the objects setup makes for
# it. DATA_ITEM_KIB allows for all of that generously; it is an allowance, not
# a measurement: the bound it gives (3 million items on 24 GiB) only refuses
# sizes no run here would finish seeding.
DATA_ITEM_KIB = 4


def check_data_size(size: int, unit: str) -> None:
    """BenchError when SIZE items of UNIT would not fit in half this machine's memory."""
    total = memory_mib()
    need = size * DATA_ITEM_KIB // 1024
    if total and need > total // 2:
        raise BenchError(
            f"--values {size:,} {unit}: about {need:,} MiB at {DATA_ITEM_KIB} KiB an item, more "
            f"than half of this machine's {total} MiB (--force to try anyway)"
        )
