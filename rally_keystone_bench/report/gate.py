"""The gate's outputs: the text verdict, JSON, a self-contained HTML page and JUnit XML."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from markupsafe import Markup

from rally_keystone_bench import writer
from rally_keystone_bench.report import counters, junit, svg
from rally_keystone_bench.report.compare import ms_or_na
from rally_keystone_bench.report.render import environment
from rally_keystone_bench.verdicts import family
from rally_keystone_bench.verdicts.counters import CounterChange
from rally_keystone_bench.verdicts.pairing import CPU_ROW, GateResult, Judgement
from rally_keystone_bench.version import version as tool_version


def _p(p: float) -> str:
    return "p<1e-15" if p < 1e-15 else f"p={p:.2g}"


def _numbers(j: Judgement) -> str:
    if not math.isfinite(j.ratio):
        return ""
    p = f"Wilcoxon {_p(j.p_value)}"
    if math.isfinite(j.p_adjusted) and j.tests > 1:
        p += f" ({_p(j.p_adjusted)} after Holm over {j.tests})"
    return (
        f"median {ms_or_na(j.base)} -> {ms_or_na(j.cand)}, block ratio {j.ratio:.3f} "
        f"[{j.ci_low:.2f}, {j.ci_high:.2f}], {p}, {j.n_clean} blocks"
    )


def format_text(result: GateResult) -> str:
    """The verdict first; then clean blocks and interference; then a line per figure."""
    lines = [result.headline()]
    if result.advice():
        lines.append(f"advice: {result.advice()}")
    lines += [
        f"baseline: {result.base}",
        f"candidate: {result.candidate}",
        result.interference_summary(),
        f"family: {family.describe(result.alpha, result.tests)}; "
        f"{result.blocks_needed} clean blocks needed per workload",
    ]
    lines.extend(result.notes)
    workload = None
    for a in result.actions:
        if a.workload != workload:
            workload = a.workload
            lines += ["", workload]
        mark = "!" if a.regression else " "
        if a.failure_regression or a.inconclusive:
            lines.append(f" {'!' if a.regression else '?'}{a.action}  {a.verdict}")
            if a.failure_regression:
                lines.append(f"  kind: {a.kind}")
            continue
        rows = [(a.action, a.latency), (f"{CPU_ROW} (evidence)", a.cpu)]
        width = max(len(n) for n, _ in rows)
        for n, j in rows:
            if j is None:
                lines.append(f"  {n:<{width}}  not measured")
                continue
            m = mark if (j.regression or (n == a.action and a.regression)) else " "
            lines.append(f" {m}{n:<{width}}  {j.verdict}  {_numbers(j)}")
        if a.kind:
            lines.append(f"  kind: {a.kind_detail()}")
        aside = len(a.blocks) - a.n_clean
        if aside:
            lines.append(f"  {aside} of {len(a.blocks)} blocks set aside")
    return "\n".join(lines)


def render_junit(result: GateResult, changes: Sequence[CounterChange] = ()) -> str:
    """JUnit XML: a test case per action, then per counter of CHANGES; a regression fails,
    inconclusive is skipped."""
    cases = []
    for a in result.actions:
        numbers = "; ".join(_numbers(j) for j in (a.latency, a.cpu) if j is not None)
        outcome = junit.PASSED
        if a.regression:
            outcome = junit.FAILED
        elif a.inconclusive:
            outcome = junit.SKIPPED
        cases.append(junit.Case(a.workload, a.action, a.verdict, numbers, outcome))
    return junit.render("keystone-bench gate", [*cases, *counters.junit_cases(changes)])


def block_charts(result: GateResult) -> list[Markup]:
    """Each action's block ratios over time, for gate.html (above its block table)."""
    charts = []
    for a in result.actions:
        t0 = min((b.start for b in a.blocks), default=0.0)
        points = [(b.start - t0, b.ratio, b.set_aside is not None) for b in a.blocks]
        median = a.latency.ratio if a.latency else None
        title = f"{a.action}: candidate / baseline per block"
        charts.append(Markup(svg.block_ratios(title, points, 1 + result.threshold / 100, median)))
    return charts


def write_outputs(
    result: GateResult,
    paths: dict[str, Path],
    evidence: dict | None = None,
    changes: Sequence[CounterChange] = (),
) -> None:
    """The gate's JSON, JUnit and HTML at PATHS (keys JSON, JUnit, HTML).

    EVIDENCE: Keystone's counters and profiles for the HTML (report/counters.evidence_html);
    CHANGES: the counters, a JUnit test case each.
    """
    doc = {"tool_version": tool_version(), **result.as_dict()}
    writer.write_json(paths["JSON"], doc)
    writer.write_text(paths["JUnit"], render_junit(result, changes))
    html = (
        environment()
        .get_template("gate.html.j2")
        .render(r=result, text=format_text(result), charts=block_charts(result), evidence=evidence)
    )
    writer.write_text(paths["HTML"], html)
