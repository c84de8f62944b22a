"""What used the CPU while the gate measured, from /proc.

A :class:`Sampler` thread reads ``/proc/stat`` and every process's
``/proc/PID/stat`` every ``interval`` seconds and keeps, per interval, the
CPU time (in clock ticks) of:

- each process of the named process trees (the two Keystone deployments),
  by pid, so that a worker's CPU can be divided by the requests it served;
- the load generator: every other descendant of this process (rally and
  its workers);
- this process itself (the gate and the sampler);
- everything else on the machine ("other": busy time of /proc/stat minus
  all of the above), and the steal time.

Intervals are grouped into blocks afterwards, by :mod:`verdicts.cpu`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from rally_keystone_bench.verdicts.cpu import GENERATOR, Interval, Request

SELF = "self"


def read_machine(path: str = "/proc/stat") -> tuple[int, int]:
    """(busy ticks, steal ticks) of all CPUs since boot."""
    with open(path) as f:
        fields = f.readline().split()
    values = [int(v) for v in fields[1:]]
    values += [0] * (8 - len(values))
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    # guest time is already inside user and nice.
    return user + nice + system + irq + softirq, steal


def read_processes(proc: str = "/proc") -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, start time, utime + stime ticks) of every live process."""
    out: dict[int, tuple[int, int, int]] = {}
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"{proc}/{entry.name}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        # fields[0] is the state (field 3 of stat); ppid is field 4.
        out[int(entry.name)] = (int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12]))
    return out


def descendants(root: int, procs: Mapping[int, tuple[int, int, int]]) -> set[int]:
    """ROOT and every process below it."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in found or pid not in procs:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found


def tree_pids(roots: Iterable[int]) -> set[int]:
    """Every live process of the trees under ROOTS (a Keystone's servers: uWSGI's
    master, router and workers), e.g. to pin them to a core."""
    procs = read_processes()
    return set().union(*(descendants(root, procs) for root in roots))


class Sampler(threading.Thread):
    """Samples /proc every INTERVAL seconds until ``stop()``."""

    def __init__(self, trees: Mapping[str, Sequence[int]], interval: float = 0.5) -> None:
        """TREES: a name -> the root pids of its process trees (a deployment's servers)."""
        super().__init__(name="procstat-sampler", daemon=True)
        self.trees = {name: list(roots) for name, roots in trees.items()}
        self.interval = interval
        self.intervals: list[Interval] = []
        self._stop_event = threading.Event()
        self._me = os.getpid()
        self._last: tuple[float, int, int, dict[int, tuple[str, int, int]]] | None = None
        self.started_at: float | None = None

    def _snapshot(self) -> tuple[float, int, int, dict[int, tuple[str, int, int]]]:
        now = time.time()
        busy, steal = read_machine()
        procs = read_processes()
        owner: dict[int, str] = {}
        for pid in descendants(self._me, procs):
            owner[pid] = GENERATOR
        owner[self._me] = SELF
        for name, roots in self.trees.items():
            for root in roots:
                for pid in descendants(root, procs):
                    owner[pid] = name
        ours = {pid: (owner[pid], procs[pid][1], procs[pid][2]) for pid in owner}
        return now, busy, steal, ours

    def sample(self) -> None:
        """Take one sample; from the second on, record the interval since the last."""
        snap = self._snapshot()
        if self._last is not None:
            t0, busy0, steal0, ours0 = self._last
            t1, busy1, steal1, ours1 = snap
            groups: dict[str, int] = {}
            pids: dict[tuple[str, int], int] = {}
            for pid, (name, start, ticks) in ours1.items():
                before = ours0.get(pid)
                # A process new since the last sample (or a reused pid) did
                # all its work in this interval.
                used = ticks - before[2] if before and before[1] == start else ticks
                groups[name] = groups.get(name, 0) + used
                if name in self.trees:
                    pids[(name, pid)] = used
            self.intervals.append(Interval(t0, t1, busy1 - busy0, steal1 - steal0, groups, pids))
        else:
            self.started_at = snap[0]
        self._last = snap

    def run(self) -> None:
        next_at = time.monotonic()
        while not self._stop_event.is_set():
            self.sample()
            next_at += self.interval
            self._stop_event.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5)
        self.sample()  # the last partial interval


def read_access_log(path: Path) -> list[Request]:
    """Our uWSGI access log: ``tmsecs method uri status micros pid`` per line."""
    out = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        fields = line.split()
        if len(fields) < 6:
            continue
        try:
            out.append(
                Request(int(fields[0]) / 1000.0, int(fields[-2]) / 1e6, int(fields[-1]),
                        int(fields[-3]))
            )  # fmt: skip
        except ValueError:
            continue
    return out
