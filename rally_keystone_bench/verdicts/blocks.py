"""The gate's measurements cut into blocks and judged: pairs, blocks, CPU per request.

A task run of ``KeystoneTokens.paired`` gives each iteration one timing per
side; the sampler's intervals give the CPU used meanwhile. Both are cut into
blocks of ``block_seconds``, and each (workload, action) is judged by
:func:`pairing.judge_action`, its failures by :func:`failures.judge`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verdicts import cpu, failures, family, family_verdict, pairing
from rally_keystone_bench.verdicts.cpu import Interval
from rally_keystone_bench.verdicts.pairing import Block, Bounds, GateResult
from rally_keystone_bench.verdicts.results import Workload

SIDES = ("baseline", "candidate")
SAMPLE_SECONDS = 0.5  # the sampler's interval: a block holds whole intervals


@dataclasses.dataclass(frozen=True)
class GateSettings:
    """What the gate's judging sees, made once from the command line (verbs/gate.py)."""

    threshold: float  # percent slower (or more CPU) that is a regression
    alpha: float
    block_seconds: float
    min_clean: int  # clean blocks needed for a verdict
    bounds: Bounds = dataclasses.field(default_factory=Bounds)
    max_failure_increase: float = 0.0  # percentage points


@dataclasses.dataclass
class TaskRun:
    """One measured ``rally task start``: its workloads and the /proc intervals."""

    workloads: list[Workload]
    intervals: list[Interval]


@dataclasses.dataclass
class Pair:
    start: float
    base: float
    cand: float


def workload_label(wl: Workload) -> str:
    """The workload's title in the task (its arguments name openrc paths: long)."""
    return wl.subtask or wl.label()


def paired_actions(wl: Workload) -> list[str]:
    """The actions measured on both sides of WL (names without the side prefix)."""
    names = []
    for name in wl.actions:
        if name.startswith("baseline."):
            action = name[len("baseline.") :]
            if "candidate." + action in wl.actions:
                names.append(action)
    return names


def pairs_of(wl: Workload, action: str) -> tuple[list[Pair], tuple[int, int], tuple[int, int]]:
    """Each iteration's two timings of ACTION; and (failed, count) of each side."""
    b, c = wl.actions["baseline." + action], wl.actions["candidate." + action]
    order = np.argsort(wl.iteration_started, kind="stable")
    starts = wl.iteration_started[order]
    ends = starts + wl.iteration_duration[order]

    def by_iteration(a: Any) -> dict[int, tuple[float, float, bool]]:
        found = {}
        idx = np.searchsorted(starts, a.started_at, side="right") - 1
        for i, s, d, f in zip(idx, a.started_at, a.duration, a.failed, strict=True):
            if 0 <= i < starts.size and s <= ends[i] + 1e-3:
                found[int(i)] = (float(s), float(d), bool(f))
        return found

    bi, ci = by_iteration(b), by_iteration(c)
    pairs = []
    for i in sorted(bi.keys() & ci.keys()):
        (sb, db, fb), (sc, dc, fc) = bi[i], ci[i]
        if not fb and not fc and db > 0:
            pairs.append(Pair(min(sb, sc), db, dc))
    tally = (int(b.failed.sum()), int(b.count)), (int(c.failed.sum()), int(c.count))
    return pairs, tally[0], tally[1]


def cpu_per_request(
    intervals: list[Interval],
    start: float,
    end: float,
    side: str,
    requests: Sequence[Any],
    workers: set[int],
) -> float | None:
    """SIDE's workers' CPU seconds from START to END over the requests they served then.

    The span is widened to whole sampler intervals; requests are counted by
    the share of their time inside it, as their CPU is.
    """
    t0, t1, pid_seconds = cpu.cpu_between(intervals, start, end)
    count, _ = cpu.served(requests, t0, t1)
    if count < 0.25:  # too little of a request to divide by
        return None
    seconds = sum(v for (name, pid), v in pid_seconds.items() if name == side and pid in workers)
    return seconds / count


def blocks_of_run(
    run: TaskRun,
    per_block: int,
    access: dict[str, list[Any]],
    first_index: dict[tuple[str, str], int],
) -> dict[tuple[str, str], list[Block]]:
    """Blocks per (workload label, action) of one task run."""
    workers = {side: {r.pid for r in access[side]} for side in SIDES}
    wins = cpu.windows(run.intervals, per_block)
    series: dict[tuple[str, str], list[Pair]] = {}
    for wl in run.workloads:
        for action in paired_actions(wl):
            series[(workload_label(wl), action)] = pairs_of(wl, action)[0]
    out: dict[tuple[str, str], list[Block]] = {key: [] for key in series}
    for w in wins:
        inside = {
            key: [p for p in pairs if w.start <= p.start < w.end] for key, pairs in series.items()
        }
        busy = [key for key, pairs in inside.items() if pairs]
        workloads = {key[0] for key in busy}
        if len(workloads) != 1:
            continue  # no load, or the change from one workload to the next
        for key in busy:
            pairs = inside[key]
            if len(pairs) < pairing.MIN_PAIRS_PER_BLOCK:
                continue
            # Server CPU over the block's pairs to their end: one side's
            # request of a pair may finish after the window (a slow token).
            end = max(w.end, max(p.start + p.base + p.cand for p in pairs))
            per_request = {
                side: cpu_per_request(
                    run.intervals, w.start, end, side, access[side], workers[side]
                )
                for side in SIDES
            }
            index = first_index.get(key, 0) + len(out[key])
            block = pairing.make_block(
                index, w.start, w.end, [p.base for p in pairs], [p.cand for p in pairs],
                per_request["baseline"] if len(busy) == 1 else None,
                per_request["candidate"] if len(busy) == 1 else None,
                pairing.Interference(w.other, w.other_swing, w.steal, w.generator),
            )  # fmt: skip
            out[key].append(block)
    return out


def judge_runs(
    runs: Sequence[TaskRun],
    access: dict[str, list[Any]],
    settings: GateSettings,
    base_name: str,
    cand_name: str,
) -> GateResult:
    """Every paired action of every run, cut into blocks and judged."""
    s = settings
    per_block = max(1, round(s.block_seconds / SAMPLE_SECONDS))
    blocks: dict[tuple[str, str], list[Block]] = {}
    tallies: dict[tuple[str, str], list[int]] = {}
    for run in runs:
        first = {key: len(v) for key, v in blocks.items()}
        for key, found in blocks_of_run(run, per_block, access, first).items():
            blocks.setdefault(key, []).extend(found)
        for wl in run.workloads:
            for action in paired_actions(wl):
                _, (bf, bn), (cf, cn) = pairs_of(wl, action)
                t = tallies.setdefault((workload_label(wl), action), [0, 0, 0, 0])
                for i, v in enumerate((bf, bn, cf, cn)):
                    t[i] += v
    if not blocks:
        raise BenchError("the task has no KeystoneTokens.paired workload: nothing to judge")
    needed = max(s.min_clean, family.blocks_needed(s.alpha, len(blocks)))
    verdicts = []
    for (label, action), found in blocks.items():
        v = pairing.judge_action(label, action, found, s.threshold, s.alpha, s.bounds, needed)
        bf, bn, cf, cn = tallies[(label, action)]
        f = failures.judge(action, (bf, bn), (cf, cn), s.max_failure_increase, s.alpha)
        v.base_success, v.cand_success = f.base_success, f.cand_success
        v.failure_verdict, v.failure_regression = f.verdict, f.regression
        verdicts.append(v)
    tests = family_verdict.judge_family(verdicts, s.alpha, s.threshold)
    return pairing.GateResult(
        base_name, cand_name, s.threshold, s.alpha, s.block_seconds, s.bounds, verdicts,
        len(runs), s.max_failure_increase, tests=tests, blocks_needed=needed,
    )  # fmt: skip
