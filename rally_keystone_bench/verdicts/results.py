"""Read Rally's JSON report into per-workload, per-atomic-action numpy arrays.

The input is what ``rally task report --json`` writes (format_version 1.x;
Rally 5.1.1 writes 1.2). The file is read as a stream: iterations are parsed
one at a time and folded into compact arrays, so a report of 200,000
iterations needs tens of megabytes, not the gigabyte that the whole JSON tree
would. Nested atomic actions are flattened: each nested action is a sample
under its own name (``KeystoneTokens.concurrent_create`` gives many
``keystone.issue_token`` samples per iteration).

Response time. An iteration run under a target rate by ``pooled_rps`` or
the Locust engine carries ``intended_start`` (epoch seconds): when the
schedule wanted it to start. Rally ignores the key; here it gives each
action a response time beside its duration (the service time, from the
actual send): the first timed action of the iteration and the iteration
itself (``total``) are timed from the intended start, so a late send counts
against them; later actions of the iteration run when the one before them
ends, as intended, and their response time is their service time.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from array import array
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verdicts.error_text import http_status, redact, shorten_secrets
from rally_keystone_bench.verdicts.jsonstream import JsonStream

if TYPE_CHECKING:
    import numpy as np

TASK_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
TOTAL = "total"  # pseudo action: the whole iteration, as in Rally's tables
# Runners whose config holds a target rate: Rally's rps, our pooled_rps and the
# Locust engine's open model (engines/locust).
RPS_RUNNERS = ("rps", "pooled_rps", "locust")


@dataclasses.dataclass
class ActionSamples:
    """Every timed occurrence of one atomic action in one workload."""

    name: str
    duration: np.ndarray  # seconds
    started_at: np.ndarray  # epoch seconds
    failed: np.ndarray  # bool
    intended: np.ndarray | None = None  # epoch seconds each was due; NaN where unknown

    @property
    def count(self) -> int:
        return int(self.duration.size)

    @property
    def success_percent(self) -> float:
        if self.count == 0:
            return 0.0
        return 100.0 * (1.0 - float(self.failed.mean()))

    def ok_durations(self) -> np.ndarray:
        """Durations of the occurrences that did not fail."""
        return self.duration[~self.failed]

    @property
    def has_response_time(self) -> bool:
        """True when some occurrences know when they were due."""
        import numpy as np

        return self.intended is not None and bool(np.isfinite(self.intended).any())

    def response_times(self) -> np.ndarray:
        """Seconds from the intended start to the answer, of successful occurrences
        that know their intended start (empty when none do)."""
        import numpy as np

        if self.intended is None:
            return np.zeros(0)
        keep = ~self.failed & np.isfinite(self.intended)
        return (self.started_at[keep] - self.intended[keep]) + self.duration[keep]

    def send_lags(self) -> np.ndarray:
        """Seconds each occurrence was sent after it was due (all that know it)."""
        import numpy as np

        if self.intended is None:
            return np.zeros(0)
        keep = np.isfinite(self.intended)
        return self.started_at[keep] - self.intended[keep]


@dataclasses.dataclass
class ErrorGroup:
    """Failed iterations with one error type and HTTP status."""

    type: str
    status: int | None
    count: int
    example: str  # one message, with secrets shortened


@dataclasses.dataclass
class Workload:
    """One workload of a Rally task, with its samples as arrays."""

    scenario: str
    args: dict[str, Any]
    runner_type: str
    runner: dict[str, Any]
    contexts: dict[str, Any]
    sla: list[dict[str, Any]]
    pass_sla: bool
    description: str
    task_uuid: str
    env_name: str
    subtask: str
    position: int
    start_time: float | None
    load_duration: float
    full_duration: float
    iteration_started: np.ndarray
    iteration_duration: np.ndarray
    iteration_failed: np.ndarray
    actions: dict[str, ActionSamples]  # atomic actions in order of appearance, then TOTAL
    errors: list[ErrorGroup]
    source: str = ""
    iteration_intended: np.ndarray | None = None  # epoch seconds; NaN where unknown
    setup_duration: float | None = None  # the contexts' setup, before the load (s)

    @property
    def iterations(self) -> int:
        return int(self.iteration_duration.size)

    @property
    def failed_iterations(self) -> int:
        return int(self.iteration_failed.sum())

    @property
    def successful_iterations(self) -> int:
        return self.iterations - self.failed_iterations

    @property
    def throughput(self) -> float:
        """Successful iterations per second of load."""
        if self.load_duration <= 0:
            return 0.0
        return self.successful_iterations / self.load_duration

    def key(self) -> tuple[str, str, str, str]:
        """What must match for two workloads to be compared."""
        return (
            self.scenario,
            json.dumps(self.args, sort_keys=True, default=str),
            self.runner_type,
            json.dumps(self.runner, sort_keys=True, default=str),
        )

    def runner_text(self) -> str:
        """``constant(concurrency=2, times=100)``."""
        inner = ", ".join(f"{k}={v}" for k, v in sorted(self.runner.items()) if k != "type")
        return f"{self.runner_type}({inner})"

    def label(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in sorted(redact(self.args).items()))
        return f"{self.scenario}({args}) {self.runner_text()}"

    def window_throughput(self, windows: int | None = None) -> np.ndarray:
        """Successful iterations per second in equal slices of the load.

        Gives throughput a distribution, so two runs can be compared with the
        same test as latencies. Default: one slice per 10 iterations, 5 to 50.
        """
        import numpy as np

        n = self.iterations
        if n == 0:
            return np.zeros(0)
        if windows is None:
            windows = int(min(50, max(5, n // 10)))
        ends = self.iteration_started + self.iteration_duration
        t0 = float(self.iteration_started.min())
        t1 = float(ends.max())
        if t1 <= t0:
            return np.zeros(0)
        edges = np.linspace(t0, t1, windows + 1)
        counts, _ = np.histogram(ends[~self.iteration_failed], bins=edges)
        return counts / np.diff(edges)


_NAN = float("nan")


def _or_none(values: np.ndarray) -> np.ndarray | None:
    """VALUES, or None when no element is known (no intended starts at all)."""
    import numpy as np

    return values if values.size and bool(np.isfinite(values).any()) else None


def _finite(value: Any, where: str, it_index: int, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise BenchError(
            f"{where}: iteration {it_index}: atomic action {name} has a time that is not "
            f"a finite number: {value!r}"
        )
    return number


class _ActionAcc:
    __slots__ = ("duration", "started", "failed", "intended")

    def __init__(self) -> None:
        self.duration = array("d")
        self.started = array("d")
        self.failed = array("b")
        self.intended = array("d")


class _WorkloadBuilder:
    """Folds one workload's iterations into arrays as they are parsed."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.meta: dict[str, Any] = {}
        self.ts = array("d")
        self.dur = array("d")
        self.failed = array("b")
        self.intended = array("d")
        self.actions: dict[str, _ActionAcc] = {}
        self.errors: dict[tuple[str, int | None], list] = {}

    def _walk(self, atomics: Any, it_index: int, due: float = _NAN) -> None:
        if not isinstance(atomics, list):
            raise BenchError(f"{self.where}: iteration {it_index}: atomic_actions is not a list")
        for a in atomics:
            try:
                name = a["name"]
                started = a.get("started_at")
                finished = a.get("finished_at")
                children = a.get("children") or []
            except (TypeError, KeyError, AttributeError):
                raise BenchError(
                    f"{self.where}: iteration {it_index}: an atomic action lacks its name"
                ) from None
            if started is not None and finished is not None:
                started, finished = (
                    _finite(started, self.where, it_index, name),
                    _finite(finished, self.where, it_index, name),
                )
                acc = self.actions.get(name)
                if acc is None:
                    acc = self.actions[name] = _ActionAcc()
                acc.duration.append(float(finished) - float(started))
                acc.started.append(float(started))
                acc.failed.append(1 if a.get("failed") else 0)
                # the first timed action is due at the iteration's intended
                # start; the next ones when they started (see the docstring)
                acc.intended.append(min(due, float(started)) if due == due else _NAN)
                if due == due:
                    due = float(finished)  # known from here on: not NaN
            if children:
                self._walk(children, it_index, _NAN)

    def add_iteration(self, it: Any) -> None:
        i = len(self.dur)
        try:
            ts = float(it["timestamp"])
            dur = float(it["duration"])
            idle = float(it.get("idle_duration") or 0.0)
            error = it.get("error") or []
            atomics = it.get("atomic_actions") or []
            due = float(it["intended_start"]) if it.get("intended_start") is not None else _NAN
        except (TypeError, KeyError, ValueError, AttributeError):
            raise BenchError(
                f"{self.where}: iteration {i} is not a Rally iteration "
                "(needs timestamp and duration)"
            ) from None
        if not all(math.isfinite(v) for v in (ts, dur, idle)):
            raise BenchError(
                f"{self.where}: iteration {i} has a timestamp or duration that is not a "
                "finite number (NaN or Infinity)"
            )
        self.ts.append(ts)
        self.dur.append(dur + idle)
        self.failed.append(1 if error else 0)
        self.intended.append(min(due, ts) if due == due else _NAN)
        if error:
            etype = str(error[0]) if len(error) > 0 else "Error"
            msg = str(error[1]) if len(error) > 1 else ""
            key = (etype, http_status(etype, msg))
            grp = self.errors.get(key)
            if grp is None:
                self.errors[key] = [1, shorten_secrets(msg)]
            else:
                grp[0] += 1
        self._walk(atomics, i, due)

    def build(self, task: Mapping[str, Any], subtask: Mapping[str, Any], source: str) -> Workload:
        import numpy as np

        m = self.meta
        try:
            ((scenario, args),) = m["scenario"].items()
            ((runner_type, runner),) = m["runner"].items()
        except (KeyError, ValueError, AttributeError):
            raise BenchError(
                f"{self.where}: not a Rally workload (needs one scenario and one runner)"
            ) from None
        ts = np.frombuffer(self.ts, dtype=float).copy()
        dur = np.frombuffer(self.dur, dtype=float).copy()
        failed = np.frombuffer(self.failed, dtype=np.int8).astype(bool)
        actions: dict[str, ActionSamples] = {}
        for name, acc in self.actions.items():
            actions[name] = ActionSamples(
                name,
                np.frombuffer(acc.duration, dtype=float).copy(),
                np.frombuffer(acc.started, dtype=float).copy(),
                np.frombuffer(acc.failed, dtype=np.int8).astype(bool),
                _or_none(np.frombuffer(acc.intended, dtype=float).copy()),
            )
        intended = _or_none(np.frombuffer(self.intended, dtype=float).copy())
        actions[TOTAL] = ActionSamples(TOTAL, dur, ts, failed, intended)
        start_time = m.get("start_time")
        if start_time is not None and start_time > 1e12:  # microseconds, as Rally's DB keeps
            start_time = start_time / 1e6
        load = float(m.get("load_duration") or 0.0)
        if load <= 0 and ts.size:
            load = float((ts + dur).max() - ts.min())
        sla_results = m.get("sla_results") or {}
        errors = [
            ErrorGroup(etype, status, count, example)
            for (etype, status), (count, example) in sorted(
                self.errors.items(), key=lambda kv: -kv[1][0]
            )
        ]
        return Workload(
            scenario=str(scenario),
            args=dict(args or {}),
            runner_type=str(runner_type),
            runner=dict(runner or {}),
            contexts=dict(m.get("contexts") or {}),
            sla=list(sla_results.get("sla", [])) if isinstance(sla_results, Mapping) else [],
            pass_sla=bool(m.get("pass_sla", True)),
            description=str(m.get("description") or ""),
            task_uuid=str(task.get("uuid", "")),
            env_name=str(task.get("env_name", "")),
            subtask=str(subtask.get("title", "")),
            position=int(m.get("position") or 0),
            start_time=start_time,
            load_duration=load,
            full_duration=float(m.get("full_duration") or 0.0),
            iteration_started=ts,
            iteration_duration=dur,
            iteration_failed=failed,
            actions=actions,
            errors=errors,
            source=source,
            iteration_intended=intended,
            setup_duration=setup_seconds(m.get("contexts_results")),
        )


def setup_seconds(contexts_results: Any) -> float | None:
    """From the first context's setup start to the last one's end (they run in turn)."""
    spans = []
    for c in contexts_results if isinstance(contexts_results, list) else []:
        setup = c.get("setup") if isinstance(c, Mapping) else None
        if isinstance(setup, Mapping):
            start, end = setup.get("started_at"), setup.get("finished_at")
            if isinstance(start, (int, float)) and isinstance(end, (int, float)):
                spans.append((float(start), float(end)))
    if not spans:
        return None
    return max(0.0, max(e for _, e in spans) - min(s for s, _ in spans))


def _not_rally(name: str, why: str) -> BenchError:
    return BenchError(
        f"{name}: not a Rally JSON report ({why}); make one with rally task report --json"
    )


def _expect_start(s: JsonStream, char: str, why: str) -> None:
    """The next value must open with ``char``: else truncated, or not Rally's."""
    c = s.peek()
    if c == "":
        raise s.truncated()
    if c != char:
        raise _not_rally(s.name, why)


def _read_stream(s: JsonStream) -> list[Workload]:
    first = s.peek()
    if first == "":
        raise BenchError(f"{s.name}: empty file, not a Rally JSON report")
    if first == "[":
        raise _not_rally(s.name, "a list: the old 'rally task results' format")
    if first != "{":
        raise _not_rally(s.name, "not a JSON object")
    info: Any = None
    workloads: list[Workload] = []
    saw_tasks = False
    for key in s.members():
        if key == "tasks":
            saw_tasks = True
            _expect_start(s, "[", "'tasks' is not a list")
            for _ in s.items():
                workloads.extend(_read_task(s, len(workloads)))
        elif key == "info":
            info = s.value()
        else:
            s.value()
    if s.peek() != "":
        raise BenchError(f"{s.name}: invalid JSON: text after the report's end")
    if not saw_tasks or not isinstance(info, Mapping) or "format_version" not in info:
        raise _not_rally(s.name, "no 'info.format_version' and 'tasks'")
    version = str(info["format_version"])
    if not version.startswith("1."):
        raise _not_rally(s.name, f"format_version {version}, this reads 1.x")
    for wl in workloads:
        wl.source = s.name
    return workloads


def _read_task(s: JsonStream, first_index: int) -> list[Workload]:
    _expect_start(s, "{", "a task is not an object")
    task: dict[str, Any] = {}
    pending: list[tuple[_WorkloadBuilder, dict[str, Any]]] = []
    for key in s.members():
        if key == "subtasks":
            _expect_start(s, "[", "'subtasks' is not a list")
            for _ in s.items():
                pending.extend(_read_subtask(s, first_index + len(pending)))
        else:
            task[key] = s.value()
    return [b.build(task, sub, s.name) for b, sub in pending]


def _read_subtask(s: JsonStream, first_index: int) -> list[tuple[_WorkloadBuilder, dict[str, Any]]]:
    _expect_start(s, "{", "a subtask is not an object")
    sub: dict[str, Any] = {}
    builders: list[_WorkloadBuilder] = []
    for key in s.members():
        if key == "workloads":
            _expect_start(s, "[", "'workloads' is not a list")
            for _ in s.items():
                b = _WorkloadBuilder(f"{s.name}: workload {first_index + len(builders)}")
                _expect_start(s, "{", "a workload is not an object")
                for wkey in s.members():
                    if wkey == "data":
                        _expect_start(s, "[", "a workload's 'data' is not a list")
                        for _ in s.items():
                            b.add_iteration(s.value())
                    else:
                        b.meta[wkey] = s.value()
                builders.append(b)
        else:
            sub[key] = s.value()
    return [(b, sub) for b in builders]


def load(path: str | os.PathLike[str]) -> list[Workload]:
    """Every workload of the Rally JSON report at ``path``.

    Raises BenchError (exit 2) naming the file and the reason when it cannot
    be read, is truncated, is not JSON or is not a Rally report.
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8-sig") as f:  # a BOM is not part of the JSON
            return _read_stream(JsonStream(f, name))
    except OSError as e:
        raise BenchError(f"{name}: cannot read: {e.strerror or e}") from None


def from_report(report: Mapping[str, Any], name: str = "<report>") -> list[Workload]:
    """Workloads of a JSON report already in memory (a dict as Rally writes it)."""
    if not isinstance(report, Mapping) or "tasks" not in report:
        raise _not_rally(name, "no 'tasks'")
    workloads: list[Workload] = []
    for task in report["tasks"]:
        for sub in task.get("subtasks", []):
            for wl in sub.get("workloads", []):
                b = _WorkloadBuilder(f"{name}: workload {len(workloads)}")
                for it in wl.get("data") or []:
                    b.add_iteration(it)
                b.meta = {k: v for k, v in wl.items() if k != "data"}
                workloads.append(b.build(task, sub, name))
    return workloads


def is_task_uuid(text: str) -> bool:
    return bool(TASK_UUID_RE.match(text))


def pool(arrays: Iterable[np.ndarray]) -> np.ndarray:
    """One array of the samples of several runs."""
    import numpy as np

    arrays = list(arrays)
    return np.concatenate(arrays) if arrays else np.zeros(0)
