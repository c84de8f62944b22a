"""A signal while the gate's two Keystones start: both starts end before the gate goes on.

On Python 3.11 an exception raised by a signal handler inside Thread.join()
marks the thread, still running, as stopped: a second join() returns at
once. The gate once joined its start threads that way, so a start could go
on spawning keystone-manage after the gate had stopped its Keystones and
exited (a clean clone's CI saw one left behind, 2026-11-28).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time

import pytest

from rally_keystone_bench.errors import Interrupted
from rally_keystone_bench.verbs import gate


class SlowStart:
    """A start that runs until cancelled, then needs a while to wind down (as a
    keystone-manage in flight does)."""

    ended: list[float] = []
    made = 0

    def __init__(self, *args, **kwargs) -> None:
        self.cancelled = threading.Event()
        # The baseline's (joined first) winds down longest: a join that
        # returned early would not be covered by waiting for the candidate.
        self.wind_down = 2.0 if SlowStart.made == 0 else 0.1
        SlowStart.made += 1

    def start(self) -> None:
        self.cancelled.wait(30)
        time.sleep(self.wind_down)  # the child it waits for
        SlowStart.ended.append(time.monotonic())

    def cancel_start(self) -> None:
        self.cancelled.set()

    def stop(self) -> None:
        pass


def test_a_signal_during_both_starts_waits_until_both_have_ended(tmp_path, monkeypatch):
    monkeypatch.setattr(gate, "LocalKeystone", SlowStart)
    monkeypatch.setattr(gate.targets, "start_explained", lambda ks: ks.start())
    SlowStart.ended, SlowStart.made = [], 0

    def interrupt(signum, frame):
        raise Interrupted(signal.SIGTERM)

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(Interrupted), contextlib.ExitStack() as stack:
            gate.start_both({"baseline": None, "candidate": None}, tmp_path, stack)
        returned = time.monotonic()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert len(SlowStart.ended) == 2, "a start was still running when start_both returned"
    assert max(SlowStart.ended) <= returned
