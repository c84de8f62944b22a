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
  context for it; ``pooled_rps`` hands the iteration to an idle thread of the
  process (a thread is added only when none is idle, up to the per-process
  concurrency) and copies the context one level deep: the iteration gets its
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
import queue as queue_module
import threading
import time
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

    slots = threading.BoundedSemaphore(max_concurrent)
    work: queue_module.SimpleQueue = queue_module.SimpleQueue()
    lock = threading.Lock()
    idle = [0]
    counts = {"started": 0, "done": 0, "failed": 0}
    threads: list[threading.Thread] = []
    reported = threading.Event()  # set: a line is due now (first failure)
    finished = threading.Event()

    def report() -> None:
        with lock:
            line = PROGRESS.format(pid=os.getpid(), **counts)
        LOG.info(line)

    def reporter() -> None:
        while not finished.is_set():
            reported.wait(PROGRESS_INTERVAL)
            reported.clear()
            report()

    def serve() -> None:
        while True:
            job = work.get()
            if job is None:
                return
            ctx, intended = job
            result = None
            try:
                result = runner._run_scenario_once(cls, method_name, ctx, args, event_queue)
                result["intended_start"] = intended
                queue.put(result)
            finally:
                with lock:
                    idle[0] += 1
                    counts["done"] += 1
                    if result is None or result["error"]:
                        counts["failed"] += 1
                        if counts["failed"] == 1:
                            reported.set()
                slots.release()

    watcher = threading.Thread(target=reporter, name="pooled-rps-progress")
    watcher.start()
    start = time.time()
    started = 0
    due = start
    while started < times and not aborted.is_set():
        # The schedule: iteration i no earlier than i / rate (the rate may ramp
        # as rps does, or go through steps).
        while not aborted.is_set():
            if steps is not None:
                due = start + step_offset(started + phase, steps, processes_to_start)
            else:
                due = start + started / runs_per_second(rps_cfg, start, processes_to_start)
            wait = due - time.time()
            if wait <= 0:
                break
            time.sleep(min(wait, 0.05))
        # A free slot: never more than max_concurrent in flight.
        while not aborted.is_set() and not slots.acquire(timeout=0.1):
            pass
        if aborted.is_set():
            break
        with lock:
            reuse = idle[0] > 0
            if reuse:
                idle[0] -= 1
        if not reuse:
            thread = threading.Thread(target=serve, name=f"iteration-slot-{len(threads)}")
            thread.start()
            threads.append(thread)
        work.put((_iteration_context(next(iteration_gen), context), due))
        started += 1
        with lock:
            counts["started"] = started

    for _ in threads:
        work.put(None)
    for thread in threads:
        thread.join()
    finished.set()
    reported.set()
    watcher.join()
    report()  # the final counts
    LOG.debug(f"pooled_rps worker: {started} iterations on {len(threads)} threads")


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

    @staticmethod
    def _create_process_pool(processes_to_start: int, worker_process: Any, args_gen: Any) -> Any:
        # rps's process pool and arguments, our worker function
        return rps.RPSScenarioRunner._create_process_pool(
            processes_to_start, _worker_process, args_gen
        )
