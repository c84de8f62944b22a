"""The matrix's outputs: text tables, a self-contained HTML page with bar charts, JSON."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.report import svg
from rally_keystone_bench.report.render import environment
from rally_keystone_bench.verdicts.rounds import across_rounds
from rally_keystone_bench.version import version as tool_version


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The table as text, seconds as in the study (min avg max p90 p95)."""

    def sec(v: float | None) -> str:
        return "n/a" if v is None or not math.isfinite(v) else f"{v:.3f}"

    w = max([15, *(len(r["setting"]) for r in rows)])
    d = max([16, *(len(r["deployment"]) for r in rows)])
    ldap = any("ldap_connections" in r for r in rows)
    head = (
        f"{'deployment':<{d}} {'workload':<{w}} {'action':<20} {'min':>7} {'avg':>7} {'max':>7}"
        f" {'p90':>7} {'p95':>7} {'success':>8} {'count':>6} {'it/s':>7}"
        + (f" {'ldap conns':>10}" if ldap else "")
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        conns = r.get("ldap_connections")
        lines.append(
            f"{r['deployment']:<{d}} {r['setting']:<{w}} {r['action']:<20} {sec(r['min']):>7}"
            f" {sec(r['avg']):>7} {sec(r['max']):>7} {sec(r['p90']):>7} {sec(r['p95']):>7}"
            f" {r['success_percent']:>7.1f}% {r['count']:>6} {r['throughput']:>7.2f}"
            + (f" {'-' if conns is None else conns:>10}" if ldap else "")
        )
    if ldap:
        lines.append(
            "ldap conns: LDAP connections slapd accepted during the workload's load "
            "(its log's ACCEPT lines)"
        )
    return "\n".join(lines)


def format_rounds(summary: Sequence[dict[str, Any]]) -> str:
    """The across-rounds table: requests per second, mean and range of the rounds."""
    w = max([15, *(len(r["setting"]) for r in summary)])
    d = max([16, *(len(r["deployment"]) for r in summary)])
    a = max([20, *(len(r["action"]) for r in summary)])
    head = (
        f"{'deployment':<{d}} {'workload':<{w}} {'action':<{a}} {'rounds':>6} {'req/s':>8}"
        f" {'min':>8} {'max':>8} {'spread':>7}"
    )
    lines = ["requests per second, mean of the rounds (min, max: the lowest and highest round)"]
    lines += [head, "-" * len(head)]
    for r in summary:
        lines.append(
            f"{r['deployment']:<{d}} {r['setting']:<{w}} {r['action']:<{a}} {r['rounds']:>6}"
            f" {r['requests_per_second']:>8.2f} {r['min']:>8.2f} {r['max']:>8.2f}"
            f" {r['spread_percent']:>6.1f}%"
        )
    return "\n".join(lines)


def round_charts(summary: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """One bar chart per workload, a bar per deployment (mean of rounds, min-max whisker).

    Each as ``{"title", "svg"}``.
    """
    charts = []
    for setting in dict.fromkeys(r["setting"] for r in summary):
        mine = [r for r in summary if r["setting"] == setting]
        rounds = max(r["rounds"] for r in mine)
        title = f"{setting}: {mine[0]['action']}, requests per second"
        if rounds > 1:
            title += f" ({rounds} rounds)"
        items = [(r["deployment"], r["requests_per_second"], r["min"], r["max"]) for r in mine]
        charts.append({"title": title, "svg": svg.bars(title, items, "requests per second")})
    return charts


def render_html(
    rows: Sequence[dict[str, Any]],
    title: str,
    deployments: dict[str, str],
    errors: dict[str, str] | None = None,
    summary: Sequence[dict[str, Any]] | None = None,
) -> str:
    """A self-contained HTML page of the table, and of the runs that failed.

    SUMMARY: across_rounds(ROWS), when the caller has it already.
    """
    template = environment().get_template("matrix.html.j2")
    summary = across_rounds(rows) if summary is None else summary
    return template.render(
        title=title,
        rows=rows,
        deployments=deployments,
        errors=errors or {},
        rounds=summary if any(r["rounds"] > 1 for r in summary) else [],
        charts=round_charts(summary),
    )


def write_report(
    rows: Sequence[dict[str, Any]],
    out_dir: Path,
    task: str,
    deployments: dict[str, str],
    errors: dict[str, str] | None = None,
    per_node: dict[str, dict[str, int]] | None = None,
) -> tuple[Path, Path]:
    """matrix.html and matrix.json in OUT_DIR; PER_NODE: token requests per node, if any."""
    title = f"keystone-bench matrix: {task}"
    html, js = out_dir / "matrix.html", out_dir / "matrix.json"
    summary = across_rounds(rows)
    writer.write_text(html, render_html(rows, title, deployments, errors or {}, summary))
    doc = {
        "task": task,
        "tool_version": tool_version(),
        "units": {"latency": "seconds", "throughput": "successful iterations per second"},
        "deployments": deployments,
        "rows": list(rows),
        "across_rounds": summary,
        "failed": dict(errors or {}),
    }
    if per_node:
        doc["token_requests_per_node"] = per_node
    writer.write_json(js, doc)
    return html, js
