"""A/B comparison of two Rally results, with a verdict per atomic action.

Workloads are paired when they ran the same scenario with the same
arguments and runner; each atomic action of a pair gets the ratio of the
medians (candidate / base) with a bootstrap 95 % confidence interval, the
Mann-Whitney U p-value, and a verdict that reads like pyperf's.

Success is part of the verdict: each action's failure count is tested with
a one-sided Fisher exact test (:func:`judge_success`), and a significant
increase of more than ``max_failure_increase`` percentage points is a
regression, as is a candidate without one successful sample of an action the
base has (every iteration failed, or none ran). Throughput is compared the
same way as latency, on successful iterations per second in equal slices of
the load, and is informative only. The engine also works on samples in memory
(:func:`compare_samples`, then :func:`judge_success`), which is how ``gate``
compares rounds pooled per side.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verdicts import failures, family, machine, stats
from rally_keystone_bench.verdicts.results import TOTAL, ActionSamples, Workload, redact
from rally_keystone_bench.verdicts.verdict_head import (
    counters_headline,
    unknown_headline,
    verdict_fields,
)

MIN_SAMPLES = 5
THROUGHPUT = "throughput"
# Throughput is compared on per-slice rates; with fewer slices a side, the
# bootstrap interval of a ratio of medians is too coarse to print.
MIN_THROUGHPUT_SLICES = 10
EXIT_INCONCLUSIVE = 3
ADVICE = (
    "for a verdict on a change, run keystone-bench gate (both sides paired on the same "
    "seconds), or run both again on a quiet machine with the same deployment"
)


@dataclasses.dataclass
class Comparison:
    """One action (or throughput) of base against candidate."""

    name: str
    kind: str  # "latency" (lower is better) or "throughput" (higher is better)
    n_base: int
    n_cand: int
    base_median: float
    cand_median: float
    ratio: float  # cand / base
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool
    verdict: str
    regression: bool  # latency only: slower by more than the threshold and significant
    base_success: float | None = None  # percent
    cand_success: float | None = None
    base_overall: float | None = None  # throughput: successful iterations / load seconds
    cand_overall: float | None = None
    round_ratios: list[float] | None = None  # gate: cand/base median of each A/B round
    # Success (judge_success): occurrences and failures per side, the one-sided
    # Fisher exact p-value of "the candidate fails more often", and its verdict.
    base_total: int | None = None
    base_failed: int | None = None
    cand_total: int | None = None
    cand_failed: int | None = None
    failure_p_value: float | None = None
    failure_verdict: str = ""
    failure_regression: bool = False
    p_adjusted: float = math.nan  # Holm over the compare's latency tests
    tests: int = 1

    @property
    def has_interval(self) -> bool:
        """An interval worth printing: finite, holding the estimate, from enough samples."""
        if not (math.isfinite(self.ci_low) and math.isfinite(self.ci_high)):
            return False
        if self.kind == THROUGHPUT and min(self.n_base, self.n_cand) < MIN_THROUGHPUT_SLICES:
            return False
        return self.ci_low <= self.ratio <= self.ci_high

    def as_dict(self) -> dict[str, Any]:
        doc = {k: _finite(v) for k, v in dataclasses.asdict(self).items()}
        if not self.has_interval:
            doc["ci_low"] = doc["ci_high"] = None
        return doc


@dataclasses.dataclass
class WorkloadComparison:
    """Every action of one pair of workloads."""

    label: str
    scenario: str
    args: dict[str, Any]
    runner: str
    actions: list[Comparison]
    throughput: Comparison | None = None

    @property
    def regressions(self) -> list[Comparison]:
        return [c for c in self.actions if c.regression]


@dataclasses.dataclass
class CompareResult:
    """The whole comparison of two results; ``exit_code`` is what CI sees."""

    base: str
    candidate: str
    threshold: float
    alpha: float
    workloads: list[WorkloadComparison]
    only_in_base: list[str] = dataclasses.field(default_factory=list)
    only_in_candidate: list[str] = dataclasses.field(default_factory=list)
    max_failure_increase: float = 0.0  # percentage points
    tests: int = 1  # latency tests in the family (Holm)
    machines: dict[str, machine.MachineState | None] = dataclasses.field(default_factory=dict)
    deployments: dict[str, str | None] = dataclasses.field(default_factory=dict)
    inconclusive: str | None = None  # why no verdict can be drawn from these two runs
    # "workload: action" of each SQL count a traced pair has no (or too few)
    # traced requests of: unknown, so compare cannot say "no regression" for it
    counters_unknown: list[str] = dataclasses.field(default_factory=list)
    # "workload: action (SQL statements)" of each exact count that rose: a regression
    counters_failed: list[str] = dataclasses.field(default_factory=list)

    @property
    def regressions(self) -> list[tuple[WorkloadComparison, Comparison]]:
        return [(w, c) for w in self.workloads for c in w.regressions]

    @property
    def exit_code(self) -> int:
        if self.inconclusive:
            return EXIT_INCONCLUSIVE
        if self.regressions or self.counters_failed:
            return 1
        return EXIT_INCONCLUSIVE if self.counters_unknown else 0

    def advice(self) -> str | None:
        """One line of what to do when no verdict could be drawn, or None."""
        if self.inconclusive:
            return ADVICE
        if self.counters_unknown and not (self.regressions or self.counters_failed):
            return (
                "a run traced too few of a workload's requests, so a SQL statement added there "
                "would pass unseen: run both again with every timed request traced "
                "(KEYSTONE_BENCH_TRACE_RATE unset), or run keystone-bench gate"
            )
        return None

    def machine_lines(self) -> list[str]:
        """Each run's machine during its load, or that it is unknown."""
        lines = []
        for side in ("base", "candidate"):
            state = self.machines.get(side)
            if state is None:
                lines.append(f"{side} machine: unknown (no record: a report of plain rally)")
                continue
            why = state.disturbed()
            lines.append(f"{side} machine: {'DISTURBED, ' + why + '; ' if why else ''}"
                         f"{state.sentence()}")  # fmt: skip
        return lines

    def headline(self) -> str:
        """The verdict in one line, before any number; a drop in success comes first."""
        rules = (
            f"threshold {self.threshold:g}%, alpha {self.alpha:g}, "
            f"max failure increase {self.max_failure_increase:g} points"
        )
        if self.tests > 1:
            rules += f", Holm over {self.tests} tests"
        if self.inconclusive:
            seen = f"; {len(self.regressions)} action(s) would be judged slower or failing" * bool(
                self.regressions
            )
            return f"INCONCLUSIVE ({rules}): {self.inconclusive}{seen}"
        regs = self.regressions
        total = sum(len(x.actions) for x in self.workloads)
        # The whole iteration's failures say most; then each action's, in order.
        failing = sorted(
            ((w, c) for w, c in regs if c.failure_regression), key=lambda wc: wc[1].name != "total"
        )
        if failing:
            w, c = failing[0]
            subject = "iterations" if c.name == "total" else c.name
            first = f"{subject}: {c.failure_verdict} in {w.scenario} {w.runner}"
            if len(regs) == 1:
                return f"REGRESSION ({rules}): {first}"
            return f"REGRESSION ({rules}): {len(regs)} of {total} actions regressed; first: {first}"
        if regs:
            w, c = max(regs, key=lambda wc: wc[1].ratio)
            worst = f"worst: {c.name} {c.verdict} in {w.scenario} {w.runner}"
            if len(regs) == 1:
                return f"REGRESSION ({rules}): {c.name} {c.verdict} in {w.scenario} {w.runner}"
            return f"REGRESSION ({rules}): {len(regs)} of {total} actions slower; {worst}"
        if self.counters_failed:
            return counters_headline(rules, self.counters_failed)
        if self.counters_unknown:
            return unknown_headline(rules, self.counters_unknown)
        return f"no regression ({rules})"

    def as_dict(self) -> dict[str, Any]:
        return {
            **verdict_fields(self),
            "workloads": [
                {
                    "label": w.label,
                    "scenario": w.scenario,
                    "args": w.args,
                    "runner": w.runner,
                    "actions": [c.as_dict() for c in w.actions],
                    "throughput": w.throughput.as_dict() if w.throughput else None,
                }
                for w in self.workloads
            ],
            "only_in_base": self.only_in_base,
            "only_in_candidate": self.only_in_candidate,
            "inconclusive": self.inconclusive,
            "advice": self.advice(),
            "counters_unknown": self.counters_unknown,
            "counters_failed": self.counters_failed,
            "family": {"tests": self.tests, "correction": "holm",
                       "rule": family.describe(self.alpha, self.tests)},
            "machines": {side: (m.as_dict() if m else None) for side, m in self.machines.items()},
            "deployments": self.deployments,
        }  # fmt: skip


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def compare_one(
    name: str,
    base: np.ndarray | Sequence[float],
    cand: np.ndarray | Sequence[float],
    threshold: float = 10.0,
    alpha: float = 0.01,
    kind: str = "latency",
    seed: int = stats.DEFAULT_SEED,
) -> Comparison:
    """Compare two samples of one figure; ``kind`` says which way is worse."""
    b = np.asarray(base, dtype=float)
    c = np.asarray(cand, dtype=float)
    nan = math.nan
    if b.size < MIN_SAMPLES or c.size < MIN_SAMPLES:
        return Comparison(
            name, kind, int(b.size), int(c.size),
            float(np.median(b)) if b.size else nan, float(np.median(c)) if c.size else nan,
            nan, nan, nan, nan, False,
            f"too few samples ({b.size} and {c.size}, need {MIN_SAMPLES})", False,
        )  # fmt: skip
    ratio, lo, hi = stats.median_ratio_ci(b, c, confidence=0.95, seed=seed)
    p = stats.mann_whitney_u(b, c).p_value
    significant = p < alpha
    if kind == "latency":
        text = stats.verdict(ratio, p, alpha, threshold, higher_is="slower", lower_is="faster")
        is_worse = ratio > 1.0
    else:
        text = stats.verdict(ratio, p, alpha, threshold, higher_is="higher", lower_is="lower")
        is_worse = ratio < 1.0
    # Only latency gates; throughput is reported (its windows are few and
    # follow from the latencies at a fixed concurrency).
    regression = bool(
        kind == "latency"
        and significant
        and math.isfinite(ratio)
        and is_worse
        and stats.change_percent(ratio) > threshold
    )
    return Comparison(
        name, kind, int(b.size), int(c.size), float(np.median(b)), float(np.median(c)),
        ratio, lo, hi, p, significant, text, regression,
    )  # fmt: skip


def judge_success(
    c: Comparison,
    base: tuple[int, int],
    cand: tuple[int, int],
    max_increase: float = 0.0,
    alpha: float = 0.01,
) -> Comparison:
    """Add the success verdict of one action (:func:`failures.judge`) to C.

    The failure verdict then leads C's verdict, and C becomes a regression
    whatever its latency.
    """
    f = failures.judge(c.name, base, cand, max_increase, alpha)
    c.base_total, c.base_failed, c.cand_total, c.cand_failed = (
        f.base_total,
        f.base_failed,
        f.cand_total,
        f.cand_failed,
    )
    c.base_success, c.cand_success = f.base_success, f.cand_success
    c.failure_p_value, c.failure_verdict = f.p_value, f.verdict
    c.failure_regression = f.regression
    if c.failure_verdict:
        c.verdict = f"{c.failure_verdict}; {c.verdict}"
    if c.failure_regression:
        c.regression = True
    return c


def compare_samples(
    base: Mapping[str, np.ndarray | Sequence[float]],
    cand: Mapping[str, np.ndarray | Sequence[float]],
    threshold: float = 10.0,
    alpha: float = 0.01,
    seed: int = stats.DEFAULT_SEED,
) -> list[Comparison]:
    """Latency of every action present on both sides, base's order first."""
    return [
        compare_one(name, base[name], cand[name], threshold, alpha, "latency", seed)
        for name in base
        if name in cand
    ]


def compare_actions(
    base: Mapping[str, np.ndarray | Sequence[float]],
    cand: Mapping[str, np.ndarray | Sequence[float]],
    base_counts: Mapping[str, tuple[int, int]],
    cand_counts: Mapping[str, tuple[int, int]],
    threshold: float = 10.0,
    alpha: float = 0.01,
    max_failure_increase: float = 0.0,
    seed: int = stats.DEFAULT_SEED,
    check_latency: Callable[[Comparison], None] | None = None,
) -> list[Comparison]:
    """Latency and success of every action of the base, in its order.

    BASE and CAND hold each action's successful durations, the counts its
    (failed, total) occurrences. An action the candidate lacks is compared
    with nothing (a regression) when the base has a successful sample of it.
    CHECK_LATENCY may revise a latency verdict before success is judged.
    """
    comps = []
    for name, b in base.items():
        bf, bn = base_counts.get(name, (0, len(b)))
        cf, cn = cand_counts.get(name, (0, len(cand.get(name, ()))))
        if cn == 0 and bf == bn:
            continue  # no successful sample on either side: nothing to compare
        comp = compare_one(name, b, cand.get(name, ()), threshold, alpha, "latency", seed)
        if check_latency is not None:
            check_latency(comp)
        comps.append(judge_success(comp, (bf, bn), (cf, cn), max_failure_increase, alpha))
    return comps


def compare_throughput(
    base: np.ndarray | Sequence[float],
    cand: np.ndarray | Sequence[float],
    threshold: float = 10.0,
    alpha: float = 0.01,
    seed: int = stats.DEFAULT_SEED,
) -> Comparison:
    """Throughput samples (iterations per second in slices of the load)."""
    return compare_one(THROUGHPUT, base, cand, threshold, alpha, "throughput", seed)


def pair_workloads(
    base: Sequence[Workload], cand: Sequence[Workload]
) -> tuple[list[tuple[Workload, Workload]], list[Workload], list[Workload]]:
    """Pairs with the same scenario, arguments and runner, in order of appearance."""
    waiting: dict[tuple, list[Workload]] = {}
    for w in cand:
        waiting.setdefault(w.key(), []).append(w)
    pairs, only_base = [], []
    for w in base:
        queue = waiting.get(w.key())
        if queue:
            pairs.append((w, queue.pop(0)))
        else:
            only_base.append(w)
    only_cand = [w for q in waiting.values() for w in q]
    return pairs, only_base, only_cand


def _nothing_ran(base: Workload) -> Workload:
    """BASE's workload as a candidate that ran no iteration of it."""
    empty = ActionSamples(TOTAL, np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool))
    return dataclasses.replace(
        base,
        iteration_started=np.zeros(0),
        iteration_duration=np.zeros(0),
        iteration_failed=np.zeros(0, dtype=bool),
        actions={TOTAL: empty},
        errors=[],
        load_duration=0.0,
        pass_sla=False,
    )


def compare_workload(
    base: Workload,
    cand: Workload,
    threshold: float = 10.0,
    alpha: float = 0.01,
    seed: int = stats.DEFAULT_SEED,
    max_failure_increase: float = 0.0,
) -> WorkloadComparison:
    """Every action and the throughput of one pair of workloads."""
    comps = compare_actions(
        {n: a.ok_durations() for n, a in base.actions.items()},
        {n: a.ok_durations() for n, a in cand.actions.items()},
        {n: (int(a.failed.sum()), a.count) for n, a in base.actions.items()},
        {n: (int(a.failed.sum()), a.count) for n, a in cand.actions.items()},
        threshold,
        alpha,
        max_failure_increase,
        seed,
    )
    thr = compare_throughput(
        base.window_throughput(), cand.window_throughput(), threshold, alpha, seed
    )
    thr.base_overall, thr.cand_overall = base.throughput, cand.throughput
    return WorkloadComparison(
        label=base.label(),
        scenario=base.scenario,
        args=redact(base.args),
        runner=base.runner_text(),
        actions=comps,
        throughput=thr,
    )


def compare_workloads(
    base: Sequence[Workload],
    cand: Sequence[Workload],
    threshold: float = 10.0,
    alpha: float = 0.01,
    base_name: str = "base",
    cand_name: str = "candidate",
    max_failure_increase: float = 0.0,
    machines: Mapping[str, machine.MachineState | None] | None = None,
    deployments: Mapping[str, str | None] | None = None,
) -> CompareResult:
    """Compare every shared workload; BenchError when none is shared.

    A candidate without any workload ran nothing: each of the base's
    workloads is compared with no iteration, a regression. The latency
    tests are Holm-corrected together (:func:`apply_family`). MACHINES
    (side -> its run's record) and DEPLOYMENTS (side -> its deployment's
    line) make the result inconclusive when a run was disturbed or the
    deployments differ: two unpaired runs cannot carry a verdict then.
    """
    if base and not cand:
        pairs, only_b, only_c = [(b, _nothing_ran(b)) for b in base], [], []
    else:
        pairs, only_b, only_c = pair_workloads(base, cand)
    if not pairs:
        raise BenchError(
            f"{cand_name} shares no workload with {base_name} "
            "(same scenario, arguments and runner needed)"
        )
    result = CompareResult(
        base=base_name,
        candidate=cand_name,
        threshold=threshold,
        alpha=alpha,
        workloads=[
            compare_workload(b, c, threshold, alpha, max_failure_increase=max_failure_increase)
            for b, c in pairs
        ],
        only_in_base=[w.label() for w in only_b],
        only_in_candidate=[w.label() for w in only_c],
        max_failure_increase=max_failure_increase,
        machines=dict(machines or {}),
        deployments=dict(deployments or {}),
    )
    result.tests = apply_family([c for w in result.workloads for c in w.actions], alpha, threshold)
    result.inconclusive = why_inconclusive(result.machines, result.deployments)
    return result


def apply_family(comps: Sequence[Comparison], alpha: float, threshold: float) -> int:
    """Decide the latency of COMPS on Holm-adjusted p-values; returns the family's size.

    A failure verdict stays as judged (:func:`judge_success`) and still leads.
    """
    tested = [c for c in comps if c.kind == "latency" and math.isfinite(c.p_value)]
    for c, p_adj in zip(tested, family.holm([c.p_value for c in tested]), strict=True):
        c.p_adjusted, c.tests = p_adj, len(tested)
        c.significant = p_adj < alpha
        text = stats.verdict(c.ratio, p_adj, alpha, threshold, "slower", "faster")
        c.verdict = f"{c.failure_verdict}; {text}" if c.failure_verdict else text
        slower = c.significant and c.ratio > 1.0 and stats.change_percent(c.ratio) > threshold
        c.regression = bool(slower or c.failure_regression)
    return len(tested)


def why_inconclusive(
    machines: Mapping[str, machine.MachineState | None], deployments: Mapping[str, str | None]
) -> str | None:
    """Why two unpaired runs cannot carry a verdict: a disturbed machine, another deployment."""
    why = machine.compare_states(machines.get("base"), machines.get("candidate"))
    if why:
        return why
    base, cand = deployments.get("base"), deployments.get("candidate")
    if base and cand and base != cand:
        return f"the runs differ in deployment ({base} | {cand})"
    return None
