"""What used the CPU while the gate measured, from /proc.

A :class:`Sampler` thread reads ``/proc/stat`` and every process's
``/proc/PID/stat`` every ``interval`` seconds and keeps, per interval, the
CPU time (in clock ticks) of:

- each process of the named process trees (the two Keystone deployments),
  by pid, so that a worker's CPU can be divided by the requests it served;
- the load generator: every other descendant of this process (rally and
  its workers);
- this process itself (the gate and the sampler);
- the machine's shared services a deployment may use (a PostgreSQL or
  MariaDB server, memcached, slapd, HAProxy, nginx, Apache, and a web
  server's Keystone workers started elsewhere), not started by this
  process: ``deployment``, the work the load itself causes;
- everything else on the machine ("other": busy time of /proc/stat minus
  all of the above), and the steal time;
- the 1-minute load average at each sample.

Intervals are grouped into blocks afterwards, by :mod:`verdicts.cpu`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from rally_keystone_bench.verdicts.cpu import GENERATOR, Interval, Request
from rally_keystone_bench.verdicts.machine import DEPLOYMENT

SELF = "self"
# Processes (their /proc comm) of the services a deployment may share with the machine,
# and of a Keystone started elsewhere on it (an existing cloud on this host).
SERVICES = frozenset(
    {"postgres", "mariadbd", "mysqld", "memcached", "slapd", "haproxy", "nginx", "apache2",
     "httpd", "uwsgi", "gunicorn"}
)  # fmt: skip


def read_machine(path: str = "/proc/stat") -> tuple[int, int]:
    """(busy ticks, steal ticks) of all CPUs since boot."""
    with open(path) as f:
        fields = f.readline().split()
    values = [int(v) for v in fields[1:]]
    values += [0] * (8 - len(values))
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    # guest time is already inside user and nice.
    return user + nice + system + irq + softirq, steal


def read_processes(
    proc: str = "/proc", names: dict[int, str] | None = None
) -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, start time, utime + stime ticks) of every live process.

    NAMES, when given, is filled with each pid's command name (its comm).
    """
    out: dict[int, tuple[int, int, int]] = {}
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"{proc}/{entry.name}/stat") as f:
                text = f.read()
        except OSError:
            continue
        head, _, rest = text.rpartition(")")
        fields = rest.split()
        # fields[0] is the state (field 3 of stat); ppid is field 4.
        out[int(entry.name)] = (int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12]))
        if names is not None:
            names[int(entry.name)] = head.partition("(")[2]
    return out


def read_load_average(path: str = "/proc/loadavg") -> float | None:
    """The 1-minute load average, or None where /proc has none."""
    try:
        with open(path) as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


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
        self.load_averages: list[float] = []

    def _snapshot(self) -> tuple[float, int, int, dict[int, tuple[str, int, int]]]:
        now = time.time()
        busy, steal = read_machine()
        names: dict[int, str] = {}
        procs = read_processes(names=names)
        load = read_load_average()
        if load is not None:
            self.load_averages.append(load)
        owner: dict[int, str] = {pid: DEPLOYMENT for pid, n in names.items() if n in SERVICES}
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
