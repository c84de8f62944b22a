"""Runner ``pooled_rps``: Rally's ``rps`` runner with reusable iteration threads.

Same configuration and the same schedule as ``rps`` (iteration *i* of a
process starts no earlier than *i* / rate after the process starts; at most
``max_concurrency`` in flight; ``rps`` may ramp with start/end/step), the same
worker processes, result queue, ITER log lines and abort. ``rps`` may also
be a list of steps, ``{"steps": [[rate, seconds], ...]}``: the rates one
after the other, each for its seconds, the last one for as long as ``times``
lasts (the capacity search's ramp probe). Each step's iterations are spaced
exactly at its rate; no step makes up for another. What differs is
what an iteration costs the load generator:

- ``rps`` starts a new thread for every iteration and deep-copies the whole
  context for it; ``pooled_rps`` keeps iteration threads (slots) that each
  claim the next iteration of the schedule, wait until it is due and run it
  (a slot is added only when an iteration is due that no slot has claimed,
  up to the per-process concurrency) and copies the context one level deep: the iteration gets its
  own dict, with its own ``iteration``, ``user`` and ``tenant``, and shares
  the nested objects (users, credentials, the token pool). A scenario that
  changes nested context objects would see other iterations' changes;
  KeystoneTokens.* and Rally's OpenStack scenarios do not.
- ``rps`` waits for the oldest running iteration when every slot is busy, so
  one slow iteration holds back starts that finished iterations made room
  for; here any finished iteration frees its slot at once.
- each iteration's record carries ``intended_start`` (epoch seconds): when
  the schedule wanted it to start. Rally keeps the extra key in its
  database and JSON report and ignores it; ``results`` gives every action a
  response time from it (wrk2's definition), beside Rally's duration, which
  runs from the actual start. A start delayed by full slots or a starved
  generator then shows in the response time instead of vanishing.
- no ``timeout`` option (``rps`` stops an iteration by raising an exception
  in its thread, which a reused thread must not receive).
- results and iteration events go to Rally's process in batches, every
  ``FLUSH_INTERVAL`` (50 ms) rather than one queue message each: ``rps`` pays
  a pickle, a pipe write and a wake-up of the queue's feeder thread for every
  result and every event, and Rally's process one read for each. The
  parent's check of each result's shape is Rally's, without its deep copy.
  Hooks and the SLA see an iteration at most 50 ms later than under ``rps``.
- each runner process logs its counts once a second, and at once on its
  first failed iteration, as one line (``progress.PROGRESS``, parsed by
  ``progress.parse_progress``). With Rally's two ITER lines per iteration silenced
  (``rally.task.runner=WARN``, what ``RallyHome.quiet_config`` writes) that
  line is all a watcher needs, for far less of the generator's CPU.

benchmarks/generator_ceiling.py measures both runners against the mock.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from rally.common import logging, validation
from rally.plugins.task.runners import rps
from rally.task import runner

from rally_keystone_bench.plugins.runners.progress import PROGRESS

LOG = logging.getLogger(__name__)

_SCHEMA = copy.deepcopy(rps.RPSScenarioRunner.CONFIG_SCHEMA)
del _SCHEMA["properties"]["timeout"]
_SCHEMA["properties"]["rps"]["anyOf"].append(
    {
        "type": "object",
        "description": "Rates one after the other: [[rate, seconds], ...].",
        "properties": {
            "steps": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": 2,
                    "items": {"type": "number", "exclusiveMinimum": 0},
                },
            }
        },
        "required": ["steps"],
        "additionalProperties": False,
    }
)

PROGRESS_INTERVAL = 1.0
# How often a runner process sends its finished results and events to Rally's process.
FLUSH_INTERVAL = 0.05
# How often, at most, a runner process looks for an iteration due that no slot
# has claimed (every slot busy), to add a slot.
GROW_INTERVAL = 0.005
# First item of a batch on the result queue: (BATCH, events, results).
BATCH = "pooled_rps.batch"


class _Outbox:
    """A runner process's results and iteration events, sent in batches.

    ``put`` is what ``_run_scenario_once`` calls with each iteration's event
    (it takes the outbox as its event queue).
    """

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []

    def put(self, event: dict[str, Any]) -> None:
        with self.lock:
            self.events.append(event)

    def add_result(self, result: dict[str, Any]) -> None:
        with self.lock:
            self.results.append(result)

    def flush(self) -> None:
        with self.lock:
            events, self.events = self.events, []
            results, self.results = self.results, []
        if events or results:
            self.queue.put((BATCH, events, results))


def _valid_result(result: Any) -> bool:
    """Rally's ``Task.result_has_valid_schema``, without copying the atomic actions.

    Rally deep-copies every result's atomic actions to walk them; at a few
    thousand iterations a second that copy was a tenth of its process's CPU.
    """
    fields = (
        ("duration", float), ("timestamp", float), ("idle_duration", float),
        ("output", dict), ("atomic_actions", list), ("error", list),
    )  # fmt: skip
    if not isinstance(result, dict):
        return False
    for key, kind in fields:
        if not isinstance(result.get(key), kind):
            return False
    actions = list(result["atomic_actions"])
    for action in actions:
        if not isinstance(action, dict) or not all(
            k in action for k in ("name", "started_at", "finished_at", "children")
        ):
            return False
        if not isinstance(action["started_at"], float) or not isinstance(
            action["finished_at"], float
        ):
            return False
        actions.extend(action["children"] or ())
    if not all(isinstance(e, str) for e in result["error"]):
        return False
    return all(k in result["output"] for k in ("additive", "complete"))


def _iteration_context(iteration: int, context: dict[str, Any]) -> dict[str, Any]:
    """The iteration's own context: a new top-level dict, nested objects shared."""
    ctx = dict(context)
    ctx["iteration"] = iteration + 1  # numbered from 1, as Rally does
    return ctx


def rate_steps(rps_cfg: Any) -> list[tuple[float, float]] | None:
    """The ``[[rate, seconds], ...]`` of a stepped ``rps``; None for the other forms."""
    if isinstance(rps_cfg, dict) and "steps" in rps_cfg:
        return [(float(rate), float(seconds)) for rate, seconds in rps_cfg["steps"]]
    return None


def step_offset(i: int, steps: list[tuple[float, float]], processes: int) -> float:
    """Seconds after its start when a process's iteration I is due.

    Each of PROCESSES sends its share of every step's rate; iteration I is
    due when the schedule has reached I iterations (0 is due at once). Past
    the last step, the last rate goes on.
    """
    begin = done = 0.0
    for k, (rate, seconds) in enumerate(steps):
        share = rate / processes
        if k == len(steps) - 1 or i < done + share * seconds - 1e-9:
            return begin + (i - done) / share
        done += share * seconds
        begin += seconds
    raise AssertionError("unreachable: the last step returns")


def _worker_process(
    queue: Any,
    iteration_gen: Any,
    timeout: float | None,
    times: int,
    max_concurrent: int,
    context: dict[str, Any],
    cls: Any,
    method_name: str,
    args: dict[str, Any],
    event_queue: Any,
    aborted: Any,
    runs_per_second: Any,
    rps_cfg: dict[str, float] | float,
    processes_to_start: int,
    info: dict[str, Any],
) -> None:
    """One runner process: start TIMES iterations at the rate, MAX_CONCURRENT at most at once.

    The arguments are those Rally gives ``rps``'s worker process.
    """
    steps = rate_steps(rps_cfg)
    if steps is not None:
        rate = steps[0][0]
    else:
        rate = rps_cfg["start"] if isinstance(rps_cfg, dict) else rps_cfg
    runner._log_worker_info(times=times, rps=rate, cls=cls, method_name=method_name, args=args)
    # Processes start staggered over one interval, as with rps. With steps the
    # stagger is a phase of the schedule instead: a delay fixed at the first
    # rate would shift every later step of this process and blur each step's
    # boundary by a gap of the first rate (a second at 1 rps).
    phase = info["processes_counter"] / info["processes_to_start"]
    if steps is None:
        time.sleep((1.0 / rate) * phase)

    outbox = _Outbox(queue)
    start = time.time()

    def due_of(i: int) -> float:
        # iteration i no earlier than i / rate (the rate may ramp as rps does,
        # or go through steps)
        if steps is not None:
            return start + step_offset(i + phase, steps, processes_to_start)
        return start + i / runs_per_second(rps_cfg, start, processes_to_start)

    scenario = (iteration_gen, context, cls, method_name, args)
    _Slots(times, due_of, aborted, outbox, scenario).run(max_concurrent)


class _Slots:
    """One runner process's iteration slots: threads that each claim the next iteration.

    A housekeeper thread sends the outbox's batches and the counts line.
    SCENARIO: (iteration_gen, context, cls, method_name, args), as Rally gives them.
    """

    def __init__(
        self,
        times: int,
        due_of: Callable[[int], float],
        aborted: Any,
        outbox: _Outbox,
        scenario: tuple[Any, dict[str, Any], Any, str, dict[str, Any]],
    ) -> None:
        self.times = times
        self.due_of = due_of
        self.aborted = aborted
        self.outbox = outbox
        self.scenario = scenario
        self.lock = threading.Lock()
        # nxt: the next iteration of the schedule no thread has claimed yet;
        # claiming: threads started that have not claimed one yet
        self.state = {"nxt": 0, "claiming": 0}
        self.counts = {"started": 0, "done": 0, "failed": 0}
        self.threads: list[threading.Thread] = []
        self.reported = threading.Event()  # set: a line is due now (first failure)
        self.finished = threading.Event()

    def run(self, max_concurrent: int) -> None:
        """Run every iteration, MAX_CONCURRENT slots at most; send what is left; the counts."""
        watcher = threading.Thread(target=self.housekeeper, name="pooled-rps-outbox")
        watcher.start()
        self.grow(max_concurrent)
        for thread in self.threads:
            thread.join()
        self.finished.set()
        self.reported.set()
        watcher.join()
        self.outbox.flush()  # what the last iterations left
        self.report()  # the final counts
        LOG.debug(
            f"pooled_rps worker: {self.counts['started']} iterations on {len(self.threads)} threads"
        )

    def grow(self, max_concurrent: int) -> None:
        """Add slots as the schedule needs them until every iteration is claimed.

        A slot is added when an iteration is due that no slot has claimed
        (every slot is busy), never more than max_concurrent. This thread only
        looks every GROW_INTERVAL at most, not at every iteration; what a late
        start costs shows in its intended start.
        """
        self.add_slot()
        while not self.aborted.is_set():
            with self.lock:
                nxt, claiming, slots = self.state["nxt"], self.state["claiming"], len(self.threads)
            if nxt >= self.times:
                break
            wait = self.due_of(nxt) - time.time()
            if wait > 0:
                time.sleep(min(max(wait, GROW_INTERVAL), 0.05))
            elif claiming or slots >= max_concurrent:
                time.sleep(GROW_INTERVAL)
            else:
                self.add_slot()

    def report(self) -> None:
        with self.lock:
            line = PROGRESS.format(pid=os.getpid(), **self.counts)
        LOG.info(line)

    def housekeeper(self) -> None:
        # batches out every FLUSH_INTERVAL; the counts line every
        # PROGRESS_INTERVAL, or at once when the first failure asks for it
        last = time.monotonic()
        while not self.finished.is_set():
            urgent = self.reported.wait(FLUSH_INTERVAL)
            self.outbox.flush()
            if urgent or time.monotonic() - last >= PROGRESS_INTERVAL:
                self.reported.clear()
                self.report()
                last = time.monotonic()

    def add_slot(self) -> None:
        with self.lock:
            self.state["claiming"] += 1
        name = f"iteration-slot-{len(self.threads)}"
        thread = threading.Thread(target=self.slot, args=(True,), name=name)
        thread.start()
        self.threads.append(thread)

    def slot(self, first: bool) -> None:
        # Each slot claims the next iteration of the schedule, waits until it
        # is due and runs it, then claims the next: a finished iteration
        # frees its slot at once, with no hand-over to another thread.
        while True:
            with self.lock:
                if first:
                    self.state["claiming"] -= 1
                    first = False
                if self.aborted.is_set() or self.state["nxt"] >= self.times:
                    return
                i = self.state["nxt"]
                self.state["nxt"] += 1
            due = self.wait_until_due(i)
            if self.aborted.is_set():
                return
            self.run_once(due)

    def wait_until_due(self, i: int) -> float:
        """Sleep until iteration I is due (or the task is aborted); when it was due."""
        while True:
            due = self.due_of(i)
            wait = due - time.time()
            if wait <= 0 or self.aborted.is_set():
                return due
            time.sleep(min(wait, 0.05))

    def run_once(self, due: float) -> None:
        """One iteration, its result marked with its intended start DUE, counted."""
        iteration_gen, context, cls, method_name, args = self.scenario
        ctx = _iteration_context(next(iteration_gen), context)
        with self.lock:
            self.counts["started"] += 1
        result = None
        try:
            result = runner._run_scenario_once(cls, method_name, ctx, args, self.outbox)
            result["intended_start"] = due
            self.outbox.add_result(result)
        finally:
            with self.lock:
                self.counts["done"] += 1
                if result is None or result["error"]:
                    self.counts["failed"] += 1
                    if self.counts["failed"] == 1:
                        self.reported.set()


@validation.configure("check_pooled_rps")
class CheckPooledRPS(validation.Validator):
    """rps's own check (a ramp's end not below its start); steps pass the schema."""

    def validate(self, context, config, plugin_cls, plugin_cfg):  # noqa: ANN001, ANN201
        cfg = (plugin_cfg or {}).get("rps")
        if isinstance(cfg, dict) and "start" in cfg and cfg["end"] < cfg["start"]:
            self.fail("rps end value must not be less than rps start value.")


@validation.add("check_pooled_rps")
@runner.configure(name="pooled_rps")
class PooledRPSScenarioRunner(rps.RPSScenarioRunner):
    """rps, with reusable iteration threads and a one-level context copy.

    Same options and schedule as the rps runner (but no timeout); each
    runner process keeps its iteration threads and gives every iteration a
    shallow copy of the context, so the load generator spends less per
    iteration and reaches higher rates on a small machine.
    """

    CONFIG_SCHEMA = _SCHEMA

    def _send_result(self, item: Any) -> None:
        """What Rally's loop over the result queue hands on: our batches, taken apart.

        Rally's ``_send_result``, with ``_valid_result`` for its deep-copying
        check; a batch's events go to ``send_event`` first, as Rally's loop
        sends the event queue before the result queue.
        """
        if isinstance(item, tuple) and item and item[0] == BATCH:
            _, events, results = item
            for event in events:
                self.send_event(**event)
        else:
            results = [item]
        for result in results:
            if not _valid_result(result):
                LOG.warning(
                    f"Task {self.task['uuid']} | Runner `{self.get_name()}` is trying to "
                    "send results in wrong format"
                )
                continue
            self.result_batch.append(result)
            if len(self.result_batch) >= self.batch_size:
                self.result_queue.append(sorted(self.result_batch, key=lambda r: r["timestamp"]))
                del self.result_batch[:]

    @staticmethod
    def _create_process_pool(processes_to_start: int, worker_process: Any, args_gen: Any) -> Any:
        # rps's process pool and arguments, our worker function
        return rps.RPSScenarioRunner._create_process_pool(
            processes_to_start, _worker_process, args_gen
        )
