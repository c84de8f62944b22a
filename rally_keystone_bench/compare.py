"""A/B comparison of two Rally results, with a verdict per atomic action.

Workloads are paired when they ran the same scenario with the same
arguments and runner; each atomic action of a pair gets the ratio of the
medians (candidate / base) with a bootstrap 95 % confidence interval, the
Mann-Whitney U p-value, and a verdict that reads like pyperf's. Throughput is
compared the same way, on successful iterations per second in equal slices of
the load. The engine also works on samples in memory (:func:`compare_samples`),
which is how ``gate`` compares rounds pooled per side.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rally_keystone_bench import stats
from rally_keystone_bench.errors import BenchError

if TYPE_CHECKING:
    import argparse

    import numpy as np

    from rally_keystone_bench.results import Workload

MIN_SAMPLES = 5
THROUGHPUT = "throughput"


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

    def as_dict(self) -> dict[str, Any]:
        return {k: _finite(v) for k, v in dataclasses.asdict(self).items()}


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

    @property
    def regressions(self) -> list[tuple[WorkloadComparison, Comparison]]:
        return [(w, c) for w in self.workloads for c in w.regressions]

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions else 0

    def headline(self) -> str:
        """The verdict in one line, before any number."""
        rules = f"threshold {self.threshold:g}%, alpha {self.alpha:g}"
        regs = self.regressions
        if regs:
            w, c = max(regs, key=lambda wc: wc[1].ratio)
            total = sum(len(x.actions) for x in self.workloads)
            worst = f"worst: {c.name} {c.verdict} in {w.scenario} {w.runner}"
            if len(regs) == 1:
                return f"REGRESSION ({rules}): {c.name} {c.verdict} in {w.scenario} {w.runner}"
            return f"REGRESSION ({rules}): {len(regs)} of {total} actions slower; {worst}"
        return f"no regression ({rules})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "candidate": self.candidate,
            "threshold_percent": self.threshold,
            "alpha": self.alpha,
            "verdict": self.headline(),
            "regression": bool(self.regressions),
            "exit_code": self.exit_code,
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
        }


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
    import numpy as np

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


def compare_workload(
    base: Workload,
    cand: Workload,
    threshold: float = 10.0,
    alpha: float = 0.01,
    seed: int = stats.DEFAULT_SEED,
) -> WorkloadComparison:
    """Every action and the throughput of one pair of workloads."""
    from rally_keystone_bench.results import redact

    comps = []
    for name, b in base.actions.items():
        c = cand.actions.get(name)
        if c is None:
            continue
        comp = compare_one(name, b.ok_durations(), c.ok_durations(), threshold, alpha, seed=seed)
        comp.base_success = b.success_percent
        comp.cand_success = c.success_percent
        comps.append(comp)
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
) -> CompareResult:
    """Compare every shared workload; BenchError when none is shared."""
    pairs, only_b, only_c = pair_workloads(base, cand)
    if not pairs:
        raise BenchError(
            f"{cand_name} shares no workload with {base_name} "
            "(same scenario, arguments and runner needed)"
        )
    return CompareResult(
        base=base_name,
        candidate=cand_name,
        threshold=threshold,
        alpha=alpha,
        workloads=[compare_workload(b, c, threshold, alpha) for b, c in pairs],
        only_in_base=[w.label() for w in only_b],
        only_in_candidate=[w.label() for w in only_c],
    )


def _ms(v: float) -> str:
    return "n/a" if not math.isfinite(v) else f"{v * 1000:.1f} ms"


def _p_text(p: float) -> str:
    if not math.isfinite(p):
        return ""
    return "p<1e-15" if p < 1e-15 else f"p={p:.2g}"


def _numbers(c: Comparison) -> str:
    if c.kind == "latency":
        med = f"median {_ms(c.base_median)} -> {_ms(c.cand_median)}"
    elif c.base_overall is not None and c.cand_overall is not None:
        med = f"{c.base_overall:.1f} -> {c.cand_overall:.1f} it/s"
    else:
        med = f"median {c.base_median:.1f} -> {c.cand_median:.1f} it/s"
    if not math.isfinite(c.ratio):
        return f"{med}, n {c.n_base}/{c.n_cand}"
    ci = f"[{c.ci_low:.2f}, {c.ci_high:.2f}]" if math.isfinite(c.ci_low) else ""
    p = _p_text(c.p_value)
    ok = ""
    if c.base_success is not None and c.cand_success is not None:
        ok = f", success {c.base_success:.1f}% -> {c.cand_success:.1f}%"
    return f"{med}, ratio {c.ratio:.3f} {ci}, {p}, n {c.n_base}/{c.n_cand}{ok}"


def format_text(result: CompareResult) -> str:
    """The verdict first, then a line per action: its verdict, then the numbers."""
    lines = [result.headline(), f"base: {result.base}", f"candidate: {result.candidate}"]
    for w in result.workloads:
        lines.append("")
        lines.append(w.label)
        rows = [*w.actions, *([w.throughput] if w.throughput else [])]
        width = max(len(c.name) for c in rows)
        vwidth = max(len(c.verdict) for c in rows)
        for c in rows:
            mark = "!" if c.regression else " "
            lines.append(f" {mark}{c.name:<{width}}  {c.verdict:<{vwidth}}  {_numbers(c)}")
    for label in result.only_in_base:
        lines.append(f"only in base (not compared): {label}")
    for label in result.only_in_candidate:
        lines.append(f"only in candidate (not compared): {label}")
    return "\n".join(lines)


def _write(path: str, text: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def write_json(result: CompareResult, path: str) -> None:
    _write(path, json.dumps(result.as_dict(), indent=2) + "\n")


def render_html(result: CompareResult) -> str:
    """A self-contained HTML page of the comparison."""
    from rally_keystone_bench.report.render import environment

    return environment().get_template("compare.html.j2").render(r=result, numbers=_numbers)


def write_html(result: CompareResult, path: str) -> None:
    _write(path, render_html(result))


def render_junit(result: CompareResult) -> str:
    """JUnit XML: a test case per action and throughput; regressions fail."""
    from xml.sax.saxutils import quoteattr

    cases = []
    failures = 0
    for w in result.workloads:
        rows = [*w.actions, *([w.throughput] if w.throughput else [])]
        for c in rows:
            body = f"<system-out>{_xml_text(c.verdict + '; ' + _numbers(c))}</system-out>"
            if c.regression:
                failures += 1
                body = (
                    f'<failure message={quoteattr(c.verdict)} type="regression">'
                    f"{_xml_text(_numbers(c))}</failure>" + body
                )
            cases.append(
                f"  <testcase classname={quoteattr(w.label)} name={quoteattr(c.name)} "
                f'time="0">{body}</testcase>'
            )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="keystone-bench compare" tests="{len(cases)}" '
        f'failures="{failures}" errors="0" skipped="0">\n' + "\n".join(cases) + "\n</testsuite>\n"
    )


def _xml_text(text: str) -> str:
    from xml.sax.saxutils import escape

    return escape(text)


def write_junit(result: CompareResult, path: str) -> None:
    _write(path, render_junit(result))


def main(args: argparse.Namespace) -> int:
    """``keystone-bench compare BASE CAND``: 0 no regression, 1 regression, 2 bad input."""
    from rally_keystone_bench import results

    if not 0.0 < args.alpha < 1.0:
        raise BenchError(f"--alpha must be between 0 and 1, not {args.alpha}")
    if args.threshold < 0:
        raise BenchError(f"--threshold must be a positive percent, not {args.threshold}")
    base = results.load_any(args.base)
    cand = results.load_any(args.candidate)
    result = compare_workloads(
        base, cand, args.threshold, args.alpha, base_name=args.base, cand_name=args.candidate
    )
    print(format_text(result))
    if args.json:
        write_json(result, args.json)
    if args.html:
        write_html(result, args.html)
    if args.junit:
        write_junit(result, args.junit)
    return result.exit_code
