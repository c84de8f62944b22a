"""pooled_rps: the rps schedule, reused threads, a one-level context copy, no head-of-line wait."""

from __future__ import annotations

import collections
import itertools
import threading
import time

import pytest
from rally.task import scenario

from rally_keystone_bench.plugins.runners import pooled_rps

# serial: iterations must finish, and an abort land, within bounds of wall clock (the
# tests that run _worker_process; the others compute offsets, schemas or results).
pytestmark = pytest.mark.serial


class Recorder:
    """What the iterations did, seen from inside them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.started: list[float] = []
        self.threads: set[int] = set()
        self.contexts: list[dict] = []
        self.finished_at: dict[int, float] = {}


RECORD = Recorder()


class Sleepy(scenario.Scenario):
    def run(self, sleep: float = 0.0, slow_first: float = 0.0) -> None:
        it = self.context["iteration"]
        with RECORD.lock:
            RECORD.running += 1
            RECORD.most = max(RECORD.most, RECORD.running)
            RECORD.started.append(time.monotonic())
            RECORD.threads.add(threading.get_ident())
            RECORD.contexts.append(self.context)
        time.sleep(slow_first if it == 1 and slow_first else sleep)
        with RECORD.lock:
            RECORD.running -= 1
            RECORD.finished_at[it] = time.monotonic()


class ListQueue(list):
    """The result queue: what the runner process sends, its batches taken apart."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[dict] = []
        self.batches = 0

    def put(self, item) -> None:
        assert item[0] == pooled_rps.BATCH
        _, events, results = item
        self.batches += 1
        self.events.extend(events)
        self.extend(results)


def run_worker(times: int, rate: float, concurrency: int, args: dict, aborted=None) -> list:
    global RECORD
    RECORD = Recorder()
    results = ListQueue()
    shared = {"users": [{"id": "u1"}]}
    context = {"task": {"uuid": "task"}, "owner_id": "w", "shared": shared}
    pooled_rps._worker_process(
        results,
        itertools.count(),
        None,
        times,
        concurrency,
        context,
        Sleepy,
        "run",
        args,
        ListQueue(),
        aborted or threading.Event(),
        lambda cfg, start, processes: float(cfg) / processes,
        rate,
        1,
        {"processes_counter": 0, "processes_to_start": 1},
    )
    return results


def test_the_schedule_is_the_rate_and_never_ahead_of_it():
    """11 iterations at 50 rps: intended starts 1/50 s apart (computed, to 1e-6 s), none
    started over 1 ms early. A slow machine only starts them later; the 1 ms is a
    margin no measurement backs (both times are time.time(), the start read after the
    wait)."""
    results = run_worker(times=11, rate=50, concurrency=4, args={})
    assert len(results) == 11 and not any(r["error"] for r in results)
    # The schedule: iteration i is due i / rate after the runner's start,
    # whatever the machine did meanwhile; and none starts before it is due.
    due = sorted(r["intended_start"] for r in results)
    assert all(abs((b - a) - 1 / 50) < 1e-6 for a, b in zip(due, due[1:], strict=False))
    assert all(r["timestamp"] >= r["intended_start"] - 1e-3 for r in results)


def test_threads_are_reused_and_concurrency_is_capped():
    """40 iterations of 10 ms at 10,000 rps, 3 slots: 3 run at once, never 4, on at most 3
    threads. Timing: each iteration lasts 100 spacings, and a slot is added within
    GROW_INTERVAL (5 ms) of all being busy, so 3 overlap even on a slow machine; not
    measured."""
    results = run_worker(times=40, rate=10_000, concurrency=3, args={"sleep": 0.01})
    assert len(results) == 40
    assert RECORD.most == 3  # the cap is reached, never passed
    assert len(RECORD.threads) <= 3  # not a thread per iteration


def test_each_iteration_gets_its_own_context_sharing_nested_objects():
    run_worker(times=6, rate=10_000, concurrency=2, args={})
    numbers = sorted(c["iteration"] for c in RECORD.contexts)
    assert numbers == [1, 2, 3, 4, 5, 6]
    first = RECORD.contexts[0]
    assert all(c["shared"] is first["shared"] for c in RECORD.contexts)
    assert len({id(c) for c in RECORD.contexts}) == 6


def test_a_slow_iteration_does_not_hold_back_the_free_slot():
    """Iteration 1 takes 0.5 s, nine others 10 ms, two slots: all nine end before it
    (under rps's worker 1 of 9 did, doc/source/runners.rst). Slack: the nine need
    about 90 ms of the 500, over 5 times less."""
    # Rally's rps runner waits for the oldest running iteration when its
    # slots are full; here the other slot keeps going.
    run_worker(times=10, rate=10_000, concurrency=2, args={"sleep": 0.01, "slow_first": 0.5})
    slow_end = RECORD.finished_at[1]
    assert sum(1 for it, t in RECORD.finished_at.items() if it != 1 and t < slow_end) == 9


def test_abort_stops_starting_iterations():
    """An abort 0.2 s into 1000 iterations at 50 rps: 5 to 29 ran (about 10 are due by
    then). The band accepts an abort that lands 0.1 to 0.6 s in, a margin for the timer
    thread on a busy machine that no measurement backs."""
    aborted = threading.Event()
    threading.Timer(0.2, aborted.set).start()
    results = run_worker(times=1000, rate=50, concurrency=2, args={}, aborted=aborted)
    assert 5 <= len(results) < 30


def test_timeout_is_not_an_option():
    schema = pooled_rps.PooledRPSScenarioRunner.CONFIG_SCHEMA
    assert "timeout" not in schema["properties"]
    assert {"times", "rps", "max_concurrency", "max_cpu_count"} <= set(schema["properties"])


@pytest.fixture(autouse=True)
def _no_rally_config(monkeypatch):
    # _run_scenario_once asks rally's logging whether debug is on
    from rally.common import logging as rally_logging

    monkeypatch.setattr(rally_logging, "is_debug", lambda: False)


def test_each_iteration_records_its_intended_start_and_a_late_one_shows():
    """One slot, 60 ms iterations due every 20 ms: the fifth, due at 80 ms, starts after
    four iterations, about 160 ms late, against a bound of 100 ms. One-sided: a slow
    machine only adds lateness; the 1 ms never-early margin is the schedule test's."""
    # one slot, iterations of 60 ms at 50 rps (20 ms apart): every start after
    # the first is late, and the record says when it was due
    results = run_worker(times=5, rate=50, concurrency=1, args={"sleep": 0.06})
    due = sorted(r["intended_start"] for r in results)
    assert all(b - a == pytest.approx(0.02, abs=1e-6) for a, b in zip(due, due[1:], strict=False))
    for r in results:
        assert r["timestamp"] >= r["intended_start"] - 1e-3  # never ahead of its schedule
    last = max(results, key=lambda r: r["intended_start"])
    assert last["timestamp"] - last["intended_start"] > 0.1  # waited for the one slot


def test_steps_space_each_steps_iterations_at_its_rate_one_step_after_the_other():
    steps = [(10.0, 1.0), (20.0, 0.5), (40.0, 1.0)]
    offsets = [pooled_rps.step_offset(i, steps, 1) for i in range(30)]
    # 10 in the first second, 10 in the next half second, then 40 a second
    assert offsets[:10] == pytest.approx([i / 10 for i in range(10)])
    assert offsets[10:20] == pytest.approx([1.0 + i / 20 for i in range(10)])
    assert offsets[20:30] == pytest.approx([1.5 + i / 40 for i in range(10)])
    # two processes share each rate: each sends half, at half the rate
    assert pooled_rps.step_offset(5, steps, 2) == pytest.approx(1.0)
    # past the last step the last rate goes on
    assert pooled_rps.step_offset(70, steps, 1) == pytest.approx(2.5 + 10 / 40)


def test_a_stepped_schedule_runs_through_the_worker_never_early():
    """20 rps for 0.5 s, then 60 rps, through the worker: intended starts at each step's
    spacing (computed, to 1e-6 s), none started over 1 ms early. No wall-clock bound
    but that margin, as in the first schedule test."""
    global RECORD
    RECORD = Recorder()
    results = ListQueue()
    context = {"task": {"uuid": "task"}, "owner_id": "w"}
    cfg = {"steps": [[20, 0.5], [60, 0.5]]}
    pooled_rps._worker_process(
        results, itertools.count(), None, 40, 4, context, Sleepy, "run", {}, ListQueue(),
        threading.Event(), None, cfg, 1, {"processes_counter": 0, "processes_to_start": 1},
    )  # fmt: skip
    assert len(results) == 40 and not any(r["error"] for r in results)
    due = sorted(r["intended_start"] for r in results)
    gaps = [b - a for a, b in zip(due, due[1:], strict=False)]
    assert gaps[:9] == pytest.approx([1 / 20] * 9, abs=1e-6)
    assert gaps[10:] == pytest.approx([1 / 60] * 29, abs=1e-6)
    assert all(r["timestamp"] >= r["intended_start"] - 1e-3 for r in results)


def test_steps_are_valid_config_and_a_ramp_ending_below_its_start_is_not():
    import jsonschema

    schema = pooled_rps.PooledRPSScenarioRunner.CONFIG_SCHEMA
    jsonschema.validate({"times": 9, "rps": {"steps": [[1, 5], [2.5, 5]]}}, schema)
    for bad in ({"steps": []}, {"steps": [[1]]}, {"steps": [[0, 5]]}, {"steps": [[1, 5]], "x": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"times": 9, "rps": bad}, schema)
    check = pooled_rps.CheckPooledRPS()
    check.validate(None, None, None, {"rps": {"steps": [[1, 5]]}, "times": 9})
    with pytest.raises(Exception, match="must not be less than"):
        check.validate(None, None, None, {"rps": {"start": 5, "end": 2, "step": 1}, "times": 9})


def test_processes_of_a_stepped_schedule_interleave_in_every_step():
    # two processes, each half of each rate: together exactly the step's spacing,
    # and no process lags a whole gap of the first (slow) rate into later steps
    steps = [(1.0, 4.0), (20.0, 1.0)]
    due = sorted(pooled_rps.step_offset(i + p / 2, steps, 2) for p in (0, 1) for i in range(12))
    assert due[:4] == pytest.approx([0, 1, 2, 3])
    assert due[4:24] == pytest.approx([4 + i / 20 for i in range(20)])


def test_a_slot_is_added_only_when_every_slot_is_busy():
    """20 empty iterations at 100 rps, up to 8 slots: one thread. Timing: each must end
    within its 10 ms spacing; pooled_rps ran Dummy.dummy at 9,605 iterations/s
    (doc/source/engines.rst), so an iteration costs well under 1 ms."""
    # 20 quick iterations at 100 rps: the one slot is always free when the
    # next is due, so no second thread starts
    results = run_worker(times=20, rate=100, concurrency=8, args={})
    assert len(results) == 20
    assert len(RECORD.threads) == 1


def test_results_and_events_travel_in_batches():
    """30 empty iterations at 10,000 rps: under 30 batches. Results go out every 50 ms
    (FLUSH_INTERVAL); the 30 are due within 3 ms and, at 9,605 iterations/s
    (doc/source/engines.rst), done in a few more, so the bound fails only if the run
    took about 1.5 s."""
    results = run_worker(times=30, rate=10_000, concurrency=2, args={})
    assert len(results) == 30
    assert sorted(e["value"] for e in results.events) == list(range(1, 31))
    assert all(e["type"] == "iteration" for e in results.events)
    assert results.batches < 30  # not a message per result


def _rally_result(**changes):
    result = {
        "duration": 0.1, "timestamp": 1.0, "idle_duration": 0.0, "error": [],
        "output": {"additive": [], "complete": []},
        "atomic_actions": [
            {"name": "a", "started_at": 1.0, "finished_at": 1.1, "children": [
                {"name": "b", "started_at": 1.0, "finished_at": 1.05, "children": []}]}
        ],
    }  # fmt: skip
    result.update(changes)
    return result


def test_the_parents_check_of_a_result_is_rallys():
    from rally.common.objects import task as rally_task

    fake_task = rally_task.Task.__new__(rally_task.Task)
    fake_task.task = {"uuid": "t"}
    nested_bad = _rally_result()
    nested_bad["atomic_actions"][0]["children"][0]["finished_at"] = "late"
    cases = [
        _rally_result(),
        _rally_result(error=["Boom", "bad", "tb"]),
        nested_bad,
        _rally_result(output={"additive": []}),
        _rally_result(duration=1),
        _rally_result(error=[1]),
    ]
    for case in cases:
        assert pooled_rps._valid_result(case) == fake_task.result_has_valid_schema(case)
    assert [pooled_rps._valid_result(c) for c in cases] == [True, True, False, False, False, False]
    # the check does not change the result it walks
    good = _rally_result()
    pooled_rps._valid_result(good)
    assert good == _rally_result()


def test_rallys_process_takes_the_batches_apart():
    runner = pooled_rps.PooledRPSScenarioRunner.__new__(pooled_rps.PooledRPSScenarioRunner)
    runner.task = {"uuid": "t"}
    runner.batch_size = 0
    runner.result_batch = []
    runner.result_queue = collections.deque()
    runner.event_queue = collections.deque()
    events = [{"type": "iteration", "value": 1}, {"type": "iteration", "value": 2}]
    late, early = _rally_result(timestamp=2.0), _rally_result(timestamp=1.0)
    runner._send_result((pooled_rps.BATCH, events, [late, _rally_result(duration="x"), early]))
    assert list(runner.event_queue) == events
    # the malformed result is dropped, as Rally drops it; the others arrive
    assert [r["timestamp"] for batch in runner.result_queue for r in batch] == [2.0, 1.0]
