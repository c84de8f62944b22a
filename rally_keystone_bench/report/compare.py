"""compare's outputs: the text verdict, JSON, a self-contained HTML page and JUnit XML."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence

import numpy as np
from markupsafe import Markup

from rally_keystone_bench import writer
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.report import counters, junit, svg
from rally_keystone_bench.report.render import environment
from rally_keystone_bench.verdicts.compare import (
    MIN_THROUGHPUT_SLICES,
    CompareResult,
    Comparison,
    pair_workloads,
)
from rally_keystone_bench.verdicts.counters import CounterChange
from rally_keystone_bench.verdicts.failures import p_text
from rally_keystone_bench.verdicts.results import Workload
from rally_keystone_bench.version import version as tool_version

BASE_COLOR = svg.COLORS["p95"]  # orange: a color no text's anti-aliasing makes
CAND_COLOR = svg.COLORS["points"]  # blue


def ms_or_na(v: float) -> str:
    return "n/a" if not math.isfinite(v) else f"{v * 1000:.1f} ms"


def _numbers(c: Comparison) -> str:
    if c.kind == "latency":
        med = f"median {ms_or_na(c.base_median)} -> {ms_or_na(c.cand_median)}"
    elif c.base_overall is not None and c.cand_overall is not None:
        med = f"{c.base_overall:.1f} -> {c.cand_overall:.1f} it/s"
    else:
        med = f"median {c.base_median:.1f} -> {c.cand_median:.1f} it/s"
    if not math.isfinite(c.ratio):
        return f"{med}, n {c.n_base}/{c.n_cand}"
    ci = f"[{c.ci_low:.2f}, {c.ci_high:.2f}]" if c.has_interval else ""
    if c.kind != "latency" and not c.has_interval:
        ci = f"(no interval: {c.n_base}/{c.n_cand} slices, {MIN_THROUGHPUT_SLICES} needed)"
    p = p_text(c.p_value)
    if math.isfinite(c.p_adjusted) and c.tests > 1:
        p += f" ({p_text(c.p_adjusted)} after Holm over {c.tests})"
    ok = ""
    if c.base_success is not None and c.cand_success is not None:
        ok = f", success {c.base_success:.1f}% -> {c.cand_success:.1f}%"
    return f"{med}, ratio {c.ratio:.3f} {ci}, {p}, n {c.n_base}/{c.n_cand}{ok}"


def format_text(result: CompareResult) -> str:
    """The verdict first, then a line per action: its verdict, then the numbers."""
    lines = [result.headline()]
    if result.advice():
        lines.append(f"advice: {result.advice()}")
    lines += [f"base: {result.base}", f"candidate: {result.candidate}", *result.machine_lines()]
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


def check_writable(path: str, flag: str) -> None:
    """BenchError unless PATH can be written: its directory exists, and it is not one."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise BenchError(f"{flag} {path} is a directory")
    if not os.path.isdir(parent):
        raise BenchError(f"{flag} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise BenchError(f"{flag} {path} is not writable")


def save(path: str, text: str) -> None:
    """TEXT at PATH; BenchError (exit 2) when it cannot be written."""
    try:
        writer.write_text(path, text)
    except OSError as exc:
        raise BenchError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_json(result: CompareResult, path: str) -> None:
    doc = {"tool_version": tool_version(), **result.as_dict()}
    save(path, json.dumps(doc, indent=2) + "\n")


def changed_lines(result: CompareResult) -> list[str]:
    """``workload: action: verdict (numbers)`` of every change the statistics found."""
    return [
        f"{w.label}: {c.name}: {c.verdict} ({_numbers(c)})"
        for w in result.workloads
        for c in [*w.actions, *([w.throughput] if w.throughput else [])]
        if c.regression or c.significant or c.failure_regression
    ]


def distributions(
    result: CompareResult, base: Sequence[Workload], cand: Sequence[Workload]
) -> list[list[Markup]]:
    """Per compared workload, each action's latency by percentile: base and candidate
    overlaid on one scale (svg.percentile_curves), successful samples only."""
    # in the order compare_workloads compared them (two workloads may share a label)
    pairs = pair_workloads(base, cand)[0] if cand else [(b, None) for b in base]
    out = []
    for w, (b, c) in zip(result.workloads, pairs, strict=False):
        charts = []
        for comp in w.actions:
            sides = [
                (name, wl.actions[comp.name].ok_durations()
                 if wl is not None and comp.name in wl.actions else np.zeros(0), color)
                for name, wl, color in (("base", b, BASE_COLOR), ("candidate", c, CAND_COLOR))
            ]  # fmt: skip
            title = f"{comp.name}: latency by percentile, base and candidate"
            charts.append(Markup(svg.percentile_curves(title, sides)))
        out.append(charts)
    return out


def render_html(
    result: CompareResult,
    evidence: dict | None = None,
    charts: Sequence[Sequence[Markup]] | None = None,
) -> str:
    """A self-contained HTML page of the comparison: what changed first, then each workload's
    table and CHARTS (distributions'); EVIDENCE: counters.evidence_html's."""
    return (
        environment()
        .get_template("compare.html.j2")
        .render(
            r=result,
            numbers=_numbers,
            evidence=evidence,
            changed=changed_lines(result),
            charts=charts or [[] for _ in result.workloads],
        )
    )


def write_html(
    result: CompareResult,
    path: str,
    evidence: dict | None = None,
    sides: tuple[Sequence[Workload], Sequence[Workload]] | None = None,
) -> None:
    """compare.html at PATH; SIDES: the base's and candidate's workloads, for the charts."""
    charts = distributions(result, *sides) if sides else None
    save(path, render_html(result, evidence, charts))


def render_junit(result: CompareResult, changes: Sequence[CounterChange] = ()) -> str:
    """JUnit XML: a test case per action and throughput, then per counter of CHANGES;
    regressions fail."""
    cases = []
    for w in result.workloads:
        for c in [*w.actions, *([w.throughput] if w.throughput else [])]:
            outcome = junit.FAILED if c.regression else junit.PASSED
            cases.append(junit.Case(w.label, c.name, c.verdict, _numbers(c), outcome))
    return junit.render("keystone-bench compare", [*cases, *counters.junit_cases(changes)])


def write_junit(result: CompareResult, path: str, changes: Sequence[CounterChange] = ()) -> None:
    save(path, render_junit(result, changes))
