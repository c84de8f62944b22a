"""Keystone's side of capacity probes, and the machine while they ran: the reading.

For a local Keystone: its access log (every request's start, method, path,
status, server time and worker pid) and its process tree, from its run
directory. For every target: the /proc sampler each probe's load runs
under (driver/machine.py, the prober's), giving other processes' CPU and
steal, and a look at the machine before a repeat. The arithmetic on both
lives in verdicts/keystone_side.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rally_keystone_bench.driver import machine as machine_record
from rally_keystone_bench.verdicts import keystone_side
from rally_keystone_bench.verdicts.keystone_side import LoggedRequest, Machine

SAMPLE_S = machine_record.PROBE_INTERVAL_S  # the sampler's interval (the gate's is 0.5 s)
QUIET_LOOK_S = 5.0  # one look at the machine before a repeat
QUIET_WAIT_S = 90.0  # the longest wait for a quiet machine before a repeat runs anyway


def read_requests(path: Path, start: int = 0) -> tuple[list[LoggedRequest], int]:
    """Keystone's access log from byte START: ``epoch-ms method uri status micros pid`` per
    line; the requests of its whole lines, and the offset after the last of them."""
    out: list[LoggedRequest] = []
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read()
    except OSError:
        return out, start
    whole = data.rfind(b"\n") + 1  # a line still being written waits for the next read
    for line in data[:whole].decode(errors="replace").splitlines():
        f = line.split()
        if len(f) < 6:
            continue
        try:
            out.append(
                LoggedRequest(int(f[0]) / 1000.0, int(f[-2]) / 1e6, int(f[-1]), int(f[-3]),
                              f[1], f[2])
            )  # fmt: skip
        except ValueError:
            continue
    return out, start + whole


class ProbeEvidence:
    """Reads KEYSTONE_DIR's access log (when there is one) and samples the machine."""

    def __init__(self, keystone_dir: Path | None, say: Callable[[str], None]) -> None:
        self.keystone_dir = keystone_dir
        self.access_log = keystone_dir / "access.log" if keystone_dir is not None else None
        self.trees = machine_record.deployment_trees(keystone_dir)
        self.say = say
        self._logged: list[LoggedRequest] = []  # read so far, and where the reading stopped
        self._offset = 0

    def requests(self) -> list[LoggedRequest]:
        """Every request Keystone has logged so far ([] without an access log). Each call
        reads only what was appended since the last: a search reads the log once."""
        if self.access_log is not None:
            new, self._offset = read_requests(self.access_log, self._offset)
            self._logged.extend(new)
        return list(self._logged)

    def look(self, seconds: float = QUIET_LOOK_S) -> Machine | None:
        """Other processes' CPU and steal over SECONDS, the load generator idle."""
        with machine_record.sampled(self.trees, SAMPLE_S) as sampler:
            time.sleep(seconds)
        return keystone_side.machine_during(sampler.intervals)

    def wait_quiet(self, limit_s: float = QUIET_WAIT_S) -> str | None:
        """Wait (LIMIT_S at most) until the machine is quiet; why it is not, if it never was."""
        t0 = time.monotonic()
        while True:
            why = keystone_side.disturbance(self.look())
            if why is None:
                return None
            waited = time.monotonic() - t0
            if waited + QUIET_LOOK_S > limit_s:
                self.say(f"  not quiet after {waited:.0f} s ({why}): repeating anyway")
                return why
            self.say(f"  waiting for a quiet machine: {why}")
