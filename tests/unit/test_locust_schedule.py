"""The open-model schedule of the Locust engine: never early, answers do not slow it."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from rally_keystone_bench.engines.locust import schedule


class FakeClock:
    """A clock whose sleeps may wake early, as real timers sometimes do."""

    def __init__(self, early: float = 0.0) -> None:
        self.now = 0.0
        self.early = early

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds - self.early, seconds / 2)


def test_wait_until_never_returns_before_the_due_time():
    clock = FakeClock(early=0.003)
    for due in (0.001, 0.5, 0.5, 2.25, 7.0):
        woke = schedule.wait_until(due, clock, clock.sleep)
        assert woke >= due and clock.now >= due


def test_constant_arrivals_are_evenly_spaced_and_split_round_robin():
    steps = schedule.steps_of(20, 3)
    whole = list(schedule.global_offsets(steps))
    assert len(whole) == 60 == schedule.planned_count(steps)
    assert np.allclose(np.diff(whole), 1 / 20)
    shares = [list(schedule.worker_offsets(steps, worker_index=i, workers=3)) for i in range(3)]
    merged = sorted(itertools.chain(*shares))
    assert [k for k, _ in merged] == list(range(60))
    assert [o for _, o in merged] == whole
    assert all(len(s) == 20 for s in shares)


def test_a_ramp_runs_its_steps_one_after_the_other():
    steps = (schedule.Step(10, 2), schedule.Step(40, 1))
    offsets = list(schedule.global_offsets(steps))
    assert len(offsets) == 60
    assert sum(1 for o in offsets if o < 2) == 20 and sum(1 for o in offsets if o >= 2) == 40
    assert schedule.step_bounds(steps) == [(10, 0.0, 2.0), (40, 2.0, 3.0)]


def test_poisson_arrivals_have_the_rate_as_mean_and_variance_of_counts():
    rate, seconds = 200.0, 200.0
    offsets = np.array(list(schedule.global_offsets(schedule.steps_of(rate, seconds), "poisson")))
    gaps = np.diff(offsets)
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.02)
    assert gaps.var() == pytest.approx(1 / rate**2, rel=0.05)  # exponential: var = mean^2
    counts, _ = np.histogram(offsets, bins=np.arange(0, seconds + 1, 1.0))
    assert counts.mean() == pytest.approx(rate, rel=0.02)
    assert counts.var() == pytest.approx(rate, rel=0.25)  # Poisson: var = mean
    # every worker draws the same global sequence: the shares rebuild it
    a = [o for _, o in schedule.worker_offsets(schedule.steps_of(50, 5), "poisson", 0, 2, seed=7)]
    b = [o for _, o in schedule.worker_offsets(schedule.steps_of(50, 5), "poisson", 1, 2, seed=7)]
    whole = list(schedule.global_offsets(schedule.steps_of(50, 5), "poisson", seed=7))
    assert sorted(a + b) == whole


@pytest.mark.serial  # every send within 125 ms of its due time
def test_the_schedule_keeps_the_rate_when_answers_are_slow():
    """Open model: 40 users, answers 25 x the spacing; every request still goes out
    on time, and with 5 users a request that finds every user busy keeps its intended start.

    Bound: every send within 125 ms of its due time, the answer's length: a send that
    waited for a busy user would be that late. Against timer jitter that leaves 25
    spacings of 5 ms, half capacity's 0.25 s LAG_LIMIT_S; no jitter was measured."""
    gevent = pytest.importorskip("gevent")
    rate, seconds, answer = 200.0, 0.5, 0.125  # needs 25 in flight
    offsets = schedule.worker_offsets(schedule.steps_of(rate, seconds))
    clock = __import__("time").perf_counter
    dispatcher = schedule.Dispatcher(offsets, clock() + 0.05)
    records: list[tuple[float, float]] = []

    def user() -> None:
        while (slot := dispatcher.next()) is not None:
            _, due = slot
            sent = schedule.wait_until(due, clock, gevent.sleep)
            records.append((due, sent))
            gevent.sleep(answer)  # a slow answer

    # enough users: every request sent when due, none waited for an answer
    group = [gevent.spawn(user) for _ in range(40)]
    gevent.joinall(group)
    due = np.array([d for d, _ in records])
    sent = np.array([s for _, s in records])
    assert len(records) == 100
    assert np.allclose(np.diff(np.sort(due)), 1 / rate)  # the schedule ignored the answers
    assert (sent >= due).all()
    assert (sent - due).max() < answer  # no request waited for another's answer

    # too few users: late sends, but each keeps its intended start
    offsets = schedule.worker_offsets(schedule.steps_of(rate, seconds))
    dispatcher = schedule.Dispatcher(offsets, clock() + 0.05)
    records.clear()
    gevent.joinall([gevent.spawn(user) for _ in range(5)])
    due = np.array(sorted(d for d, _ in records))
    assert np.allclose(np.diff(due), 1 / rate)
    lag = np.array([s - d for d, s in records])
    assert (lag >= 0).all() and lag.max() > answer  # the waits are there to be counted


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="rate"):
        schedule.check(schedule.steps_of(0, 10), "constant", 1)
    with pytest.raises(ValueError, match="worker"):
        schedule.check(schedule.steps_of(5, 10), "constant", 0)
    with pytest.raises(ValueError, match="arrival"):
        schedule.check(schedule.steps_of(5, 10), "bursty", 1)


def test_the_locustfile_stops_a_ramp_on_the_limits_the_judge_uses():
    # The locustfile (its worker.py) runs without our package's capacity module on a worker
    # host; its copies of the two limits must not drift from the judge's.
    import re

    from rally_keystone_bench.engines.locust import schedule as _schedule
    from rally_keystone_bench.verdicts import capacity, probe_verdict

    text = (Path(_schedule.__file__).parent / "worker.py").read_text()
    for name, judge in (("LAG_LIMIT_S", probe_verdict), ("RAMP_LATENCY_S", capacity)):
        (value,) = re.findall(rf"^{name} = ([0-9.]+)", text, re.M)
        assert float(value) == getattr(judge, name), name
