"""Longest test files first, and how long each file took: the parallel parts' schedule.

pytest-xdist's ``--dist loadfile`` hands whole files to its two workers in
collection order, one more to a worker whose file has two tests or fewer
left. By default it first sorts files by their number of tests, which puts
the unit files (hundreds of quick tests) first and the functional files
(one to five tests of minutes each) last: the last long file then runs on
one core while the other idles. ``tox.ini`` turns that sort off
(``--no-loadscope-reorder``) and this module orders the files by how long
each took in an earlier run (``tests/file_durations.json``), longest first,
so the tail holds the short ones (longest-processing-time-first).

At the end of a session it prints the files that took longest, and, in a
parallel part, writes every file's seconds to ``$KEYSTONE_BENCH_FILE_DURATIONS`` when that is set,
in the format ``file_durations.json`` keeps, to refresh it from a CI run.
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parent / "file_durations.json"
OUT_ENV = "KEYSTONE_BENCH_FILE_DURATIONS"
SHOWN = 25


def file_of(nodeid: str) -> str:
    """The test file of a node id, relative to the root (``tests/unit/test_x.py``)."""
    return nodeid.split("::", 1)[0]


def load_table(path: Path = TABLE) -> dict[str, float]:
    """Seconds per file from an earlier run; empty when there is no table."""
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in table.get("seconds", {}).items()}


def longest_first(nodeids: list[str], seconds: dict[str, float]) -> list[int]:
    """The order (indices into NODEIDS) that runs the longest files first.

    A file's tests stay together and in their own order; files the table
    does not know count as 0 s and keep their collection order at the end.
    """
    first: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        first.setdefault(file_of(nodeid), i)

    def key(i: int) -> tuple[float, int, int]:
        f = file_of(nodeids[i])
        return (-seconds.get(f, 0.0), first[f], i)

    return sorted(range(len(nodeids)), key=key)


class FileClock:
    """Seconds spent per test file (setup, call and teardown of each test, summed)."""

    def __init__(self) -> None:
        self.seconds: collections.Counter[str] = collections.Counter()

    def add(self, nodeid: str, duration: float) -> None:
        self.seconds[file_of(nodeid)] += duration

    def lines(self, shown: int = SHOWN) -> list[str]:
        top = self.seconds.most_common(shown)
        return [f"{s:8.1f}s  {f}" for f, s in top]

    def write(self, path: Path) -> None:
        """Write the seconds as file_durations.json holds them, merged into PATH's."""
        merged = load_table(path)
        merged.update({f: round(s, 1) for f, s in self.seconds.items()})
        ordered = dict(sorted(merged.items(), key=lambda kv: -kv[1]))
        path.write_text(json.dumps({"seconds": ordered}, indent=1) + "\n")


CLOCK = FileClock()


def reorder(items: list[Any]) -> None:
    """Put ITEMS (pytest's collected items) in longest-file-first order, in place."""
    order = longest_first([it.nodeid for it in items], load_table())
    items[:] = [items[i] for i in order]


def summary(terminalreporter: Any, config: Any) -> None:
    """The slowest files of this session; the table file written when asked."""
    if hasattr(config, "workerinput") or not CLOCK.seconds:
        return  # an xdist worker: the controller reports for all
    terminalreporter.write_sep("=", f"slowest {SHOWN} files (seconds, all phases)")
    for line in CLOCK.lines():
        terminalreporter.write_line(line)
    out = os.environ.get(OUT_ENV)
    # only the parallel parts read the table: a serial part's figure for a file
    # that also has parallel tests would replace the one the order needs
    if out and getattr(config.option, "numprocesses", None):
        CLOCK.write(Path(out))
        terminalreporter.write_line(f"file durations written to {out}")
