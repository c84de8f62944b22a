"""The Locust engine's Rally JSON report, from the raw material its master writes.

The master sends raw samples only: ``samples.json`` (every sample, as the
workers sent them) and ``run.json`` (the run's settings and counts, and
what only the master knows: the warm-up cut, the start of the load's
window, the setup's span). ``write`` turns them into ``locust-report.json``
on the load host, after the master exits, with the same percentile code as
every other report (``verdicts.stats.summarize``).

A sample is a plain list (samples.json's format, and what msgpack carries
from a worker to the master, unrounded):

``[request, action, intended, sent, answered, status, error]``

- ``request``: the global request number of the schedule (an iteration);
  the lifecycle scenario sends several actions under one number;
- ``action``: ``keystone.issue_token``, ``keystone.validate_token``, ...;
- ``intended``, ``sent``, ``answered``: epoch seconds on the worker's clock;
  service time is ``answered - sent``, response time ``answered - intended``;
- ``status``: the HTTP status (0 when no answer came);
- ``error``: "" or "Type: message" (already scrubbed of secrets).

The layout lives here, with its reader, because report/ may not import the
engine; the engine (engines/locust: its worker makes the samples, its table
of scenarios names the Rally scenario each runs) imports this module and
hands over the Rally scenario, so that nothing here knows the engine.

The report is Rally's JSON, format 1.2 (what ``rally task report --json``
writes): one workload, one iteration per request number, an atomic action
per request (its ``started_at`` the send, ``finished_at`` the answer) and,
in each iteration, ``intended_start``, which Rally ignores and
``results`` reads. Each iteration's output also charts its response time
and send lag (Rally's HTML shows them in its "Scenario Data" tab).
"""

from __future__ import annotations

import datetime as dt
import uuid as uuid_mod
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rally_keystone_bench import writer
from rally_keystone_bench.verdicts import stats

RUNNER = "locust"  # the runner type the report names


class Sample(NamedTuple):
    request: int
    action: str
    intended: float
    sent: float
    answered: float
    status: int
    error: str


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def iterations(samples: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Rally iteration records, one per request number, in order of intended start."""
    by_request: dict[int, list[Sample]] = {}
    for raw in samples:
        s = Sample(*raw)
        by_request.setdefault(int(s.request), []).append(s)
    out = []
    for group in by_request.values():
        group.sort(key=lambda s: s.sent)
        first, last = group[0], group[-1]
        failed = next((s for s in group if s.error), None)
        atomics = []
        for s in group:
            action: dict[str, Any] = {
                "name": s.action,
                "children": [],
                "started_at": s.sent,
                "finished_at": s.answered,
            }
            if s.error:
                action["failed"] = True
            atomics.append(action)
        error: list[str] = []
        if failed is not None:
            etype, _, message = failed.error.partition(": ")
            error = [etype or "Error", message, ""]
        response = last.answered - first.intended
        out.append(
            {
                "timestamp": first.sent,
                "duration": last.answered - first.sent,
                "idle_duration": 0.0,
                "intended_start": first.intended,
                "error": error,
                "output": {
                    "additive": [
                        {
                            "title": "Response time from the intended start",
                            "description": "seconds from when the schedule wanted the "
                            "request sent to its answer; send lag: how late it was sent",
                            "chart_plugin": "StatsTable",
                            "data": [
                                ["response time", response],
                                ["send lag", first.sent - first.intended],
                            ],
                        }
                    ],
                    "complete": [],
                },
                "atomic_actions": atomics,
            }
        )
    out.sort(key=lambda it: it["intended_start"])
    return out


def _stats(values: Sequence[float], count: int, failed: int) -> dict[str, Any]:
    """Rally's row of figures, from the summary every report quotes (verdicts.stats)."""
    summary = stats.summarize(values)

    def ms(key: str) -> float | None:
        value = summary[key]
        return None if value is None else round(float(value), 3)

    return {
        "iteration_count": count,
        "min": ms("min"),
        "median": ms("p50"),
        "90%ile": ms("p90"),
        "95%ile": ms("p95"),
        "max": ms("max"),
        "avg": ms("mean"),
        "success": f"{100.0 * (count - failed) / count:.1f}%" if count else "n/a",
    }


def _entry(name: str, values: Sequence[float], count: int, failed: int, children=()) -> dict:
    return {
        "data": _stats(values, count, failed),
        "count_per_iteration": 1,
        "name": name,
        "display_name": name,
        "children": list(children),
    }


def statistics(data: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Rally's ``statistics.durations`` table for these iterations (its rounding: ms)."""
    ok = [it for it in data if not it["error"]]
    count, failed = len(data), len(data) - len(ok)
    durations = [it["duration"] for it in ok]
    total = _entry(
        "total",
        durations,
        count,
        failed,
        [
            _entry("duration", durations, count, failed),
            _entry("idle_duration", [0.0] * len(ok), count, failed),
        ],
    )
    atomics: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    for it in data:
        for a in it["atomic_actions"]:
            c = counts.setdefault(a["name"], [0, 0])
            c[0] += 1
            if a.get("failed"):
                c[1] += 1
            else:
                atomics.setdefault(a["name"], []).append(a["finished_at"] - a["started_at"])
    return {
        "durations": {
            "total": total,
            "atomics": [
                _entry(name, atomics.get(name, []), c[0], c[1]) for name, c in counts.items()
            ],
        }
    }


def rally_report(
    samples: Iterable[Sequence[Any]],
    *,
    scenario: str,
    rally_scenario: tuple[str, Mapping[str, Any]],
    runner: Mapping[str, Any],
    contexts: Mapping[str, Any] | None = None,
    sla_results: Sequence[Mapping[str, Any]] = (),
    title: str = "",
    description: str = "",
    env_name: str = "locust",
    load_window: tuple[float, float] | None = None,
    full_duration: float | None = None,
    setup: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """A Rally JSON report (format 1.2) with one workload of these samples.

    SCENARIO is the engine's name of the load (the task's title),
    RALLY_SCENARIO the Rally scenario it runs and its arguments.
    ``sla_results`` are criteria as Rally writes them ({criterion, success,
    detail}); the workload passes when all of them do. ``load_window`` is
    (first send, last answer) when known, else taken from the samples.
    ``setup`` is (start, end) of making the users and their tokens, written
    as Rally writes a context's setup.
    """
    name, args = rally_scenario
    data = iterations(samples)
    now = dt.datetime.now(dt.timezone.utc).timestamp()
    first, last = load_window if load_window is not None else _window(data, now)
    load = max(0.0, last - first)
    durations = [it["duration"] for it in data]
    failed = sum(1 for it in data if it["error"])
    passed = all(c.get("success", True) for c in sla_results)
    created, updated = _iso(first), _iso(max(last, first))
    workload = {
        "uuid": str(uuid_mod.uuid4()),
        "description": description or f"{name} under an open-model load (Locust engine)",
        "runner": {RUNNER: dict(runner)},
        "hooks": [],
        "scenario": {name: dict(args)},
        "min_duration": min(durations) if durations else None,
        "max_duration": max(durations) if durations else None,
        "start_time": first if data else None,
        "load_duration": load,
        "full_duration": full_duration if full_duration is not None else load,
        "statistics": statistics(data),
        "data": data,
        "failed_iteration_count": failed,
        "total_iteration_count": len(data),
        "created_at": created,
        "updated_at": updated,
        "contexts": dict(contexts or {}),
        "contexts_results": [_context_result(contexts, setup)] if setup else [],
        "position": 0,
        "pass_sla": passed,
        "sla_results": {"sla": [dict(c) for c in sla_results]},
        "sla": {c["criterion"]: {} for c in sla_results},
    }
    return _one_task_report(workload, scenario, title, description, env_name, now)


def _window(data: Sequence[Mapping[str, Any]], now: float) -> tuple[float, float]:
    """(first send, last answer) of the iterations; (NOW, NOW) without any."""
    if not data:
        return now, now
    first = min(it["timestamp"] for it in data)
    last = max(it["timestamp"] + it["duration"] for it in data)
    return first, last


def _one_task_report(
    workload: dict[str, Any], scenario: str, title: str, description: str, env_name: str, now: float
) -> dict[str, Any]:
    """Rally's report around WORKLOAD: one task of one subtask, generated at NOW."""
    from rally_keystone_bench import __name__ as pkg

    created, updated = workload["created_at"], workload["updated_at"]
    passed = workload["pass_sla"]
    return {
        "info": {
            "rally_version": "n/a",
            "generated_at": _iso(now),
            "format_version": "1.2",
            "generated_by": f"{pkg} (Locust engine)",
        },
        "tasks": [
            {
                "uuid": str(uuid_mod.uuid4()),
                "title": title or f"{scenario} on the Locust engine",
                "description": description,
                "status": "finished",
                "tags": ["locust"],
                "env_uuid": "n/a",
                "env_name": env_name,
                "created_at": created,
                "updated_at": updated,
                "pass_sla": passed,
                "subtasks": [
                    {
                        "uuid": str(uuid_mod.uuid4()),
                        "title": title or scenario,
                        "description": "",
                        "status": "finished",
                        "created_at": created,
                        "updated_at": updated,
                        "sla": {},
                        "workloads": [workload],
                    }
                ],
            }
        ],
    }


def failure_rate_sla(samples_failed: int, total: int) -> dict[str, Any]:
    """Rally's ``failure_rate: max 0`` criterion, as Rally words it."""
    rate = 100.0 * samples_failed / total if total else 0.0
    ok = samples_failed == 0
    return {
        "criterion": "failure_rate",
        "success": ok,
        "detail": f"Failure rate criteria 0.00% <= {rate:.2f}% <= 0.00% - "
        + ("Passed" if ok else "Failed"),
    }


def complete_sla(lost: Sequence[str], expected: int, received: int) -> dict[str, Any]:
    """Whether every worker's samples came back: a lost worker fails the report."""
    ok = not lost and received == expected
    if ok:
        detail = f"all {received} samples of every worker came back"
    else:
        who = f"lost worker(s) {', '.join(lost)}; " if lost else ""
        detail = f"{who}{received} samples came back of {expected} the workers reported"
    return {"criterion": "samples_complete", "success": ok, "detail": detail}


def _context_result(contexts: Mapping[str, Any] | None, setup: tuple[float, float]) -> dict:
    """The load's users and tokens as Rally reports a context: its setup's start and end."""
    return {
        "plugin_name": "keystone_users@locust",
        "plugin_cfg": dict((contexts or {}).get("keystone_users") or {}),
        "setup": {
            "started_at": setup[0],
            "finished_at": setup[1],
            "atomic_actions": [],
            "error": None,
        },
        "cleanup": {"started_at": None, "finished_at": None, "atomic_actions": [], "error": None},
    }


def from_run(
    samples: Sequence[Sequence[Any]],
    run: Mapping[str, Any],
    rally_scenario: tuple[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """The report of a master's run: SAMPLES (samples.json) after RUN's (run.json) warm-up cut.

    Its criteria: no failed request, and every worker's samples back (a
    lost worker fails the report).
    """
    cut = run.get("warmup_cut")
    kept = samples if cut is None else [s for s in samples if s[2] >= cut]
    requests = {s[0] for s in kept}
    failed_requests = {s[0] for s in kept if s[6]}
    sla = [
        failure_rate_sla(len(failed_requests), len(requests)),
        complete_sla(run["lost"], run["samples_reported"], run["samples_total"]),
    ]
    window = None
    if run.get("load_start") is not None and kept:
        window = (min(s[3] for s in kept), max(s[4] for s in kept))
        window = (min(window[0], run["load_start"]), window[1])
    setup = run.get("setup")
    return rally_report(
        kept,
        scenario=run["scenario"],
        rally_scenario=rally_scenario,
        runner=run["runner"],
        contexts={"keystone_users": {"users": run["keystone_users"]}},
        sla_results=sla,
        load_window=window,
        setup=(setup[0], setup[1]) if setup else None,
    )


def write(
    path: Path,
    samples: Sequence[Sequence[Any]],
    run: Mapping[str, Any],
    rally_scenario: tuple[str, Mapping[str, Any]],
) -> Path:
    """The report of a master's run (``from_run``) written at PATH (locust-report.json)."""
    writer.write_json(path, from_run(samples, run, rally_scenario), indent=None, newline=False)
    return path
