"""The counts line the pooled_rps runner logs, and its parser (no Rally import)."""

from __future__ import annotations

import re

PROGRESS = "pooled_rps progress: pid {pid} started {started} done {done} failed {failed}"
_PROGRESS_RE = re.compile(r"pooled_rps progress: pid (\d+) started (\d+) done (\d+) failed (\d+)")


def parse_progress(line: str) -> tuple[int, int, int, int] | None:
    """(pid, started, done, failed) of a PROGRESS line, else None."""
    m = _PROGRESS_RE.search(line)
    if not m:
        return None
    pid, started, done, failed = (int(g) for g in m.groups())
    return pid, started, done, failed


class Totals:
    """Sums the latest counts of each runner process."""

    def __init__(self) -> None:
        self._by_pid: dict[int, tuple[int, int, int]] = {}

    def add(self, counted: tuple[int, int, int, int]) -> tuple[int, int, int]:
        pid, started, done, failed = counted
        self._by_pid[pid] = (started, done, failed)
        values = self._by_pid.values()
        return (
            sum(v[0] for v in values),
            sum(v[1] for v in values),
            sum(v[2] for v in values),
        )
