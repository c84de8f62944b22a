"""What ``keystone-bench history`` prints and writes: the runs, a series as a table, the
change points, history.html, and the exports dashboards read (OpenMetrics, InfluxDB).

RUNS are the store's runs as dicts (``Store.runs()``: the run's columns and
its ``rows``). Exports keep each percentile its own series and never average
across runs: OpenMetrics carries the newest run of each series (a scrape, or a
Pushgateway, keeps the history), InfluxDB line protocol every run at its time.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rally_keystone_bench import writer
from rally_keystone_bench.report import render, svg
from rally_keystone_bench.verdicts.series import ANY_DEPLOYMENT, Found, Series

PERCENTILES = ("p50", "p95", "p99")  # a label of their own: "quantile" is a summary's
CHANGE_COLOR = "#b00020"


def _short(text: str | None, width: int) -> str:
    text = text or "-"
    return text if len(text) <= width else text[: width - 1] + "~"


def format_runs(runs: Sequence[Mapping[str, Any]]) -> str:
    """One line per run: id, when, verb, Keystone, rows, deployment."""
    if not runs:
        return "no runs recorded (or none matched)"
    lines = [
        f"{'run':>5}  {'recorded (UTC)':<20} {'verb':<9} {'keystone':<28} {'rows':>4}  deployment"
    ]
    for r in runs:
        keystone = r.get("keystone_describe") or r.get("keystone")
        lines.append(
            f"{r['id']:>5}  {r['recorded_at']:<20} {r['verb']:<9} {_short(keystone, 28):<28}"
            f" {len(r['rows']):>4}  {r.get('deployment') or '-'}"
        )
    return "\n".join(lines)


def _value(metric: str, v: float) -> str:
    if metric in ("p50", "p95", "p99"):
        return f"{v * 1000:.2f} ms"
    if metric == "success_percent":
        return f"{v:.1f}%"
    return f"{v:.3g}"


def change_sentence(metric: str, f: Found) -> str:
    """pyperf's phrasing, in the metric's unit: ``15.4% higher from run 11 (137.16 ms ->
    158.24 ms, p = 0.005)``."""
    c = f.change
    word = "higher" if c.relative_change > 0 else "lower"
    return (
        f"{abs(c.relative_change) * 100:.1f}% {word} from run {f.run_after.run_id} "
        f"({_value(metric, c.mean_before)} -> {_value(metric, c.mean_after)}, "
        f"p = {c.p_value:.3f})"
    )


def format_series(series: Series, found: Sequence[Found]) -> str:
    """SERIES run by run, a marker on the run where a change point starts."""
    starts = {f.run_after.run_id: f for f in found}
    lines = [f"{series.key}", f"machine: {series.machine}"]
    lines.append(f"    {'run':>5}  {'recorded (UTC)':<20} {'keystone':<28} {series.metric:>12}")
    across = series.deployment == ANY_DEPLOYMENT
    for p in series.points:
        mark = (
            f"  <- {change_sentence(series.metric, starts[p.run_id])}" if p.run_id in starts else ""
        )
        line = f"  {p.deployment}" if across else ""
        lines.append(
            f"    {p.run_id:>5}  {p.recorded_at:<20} {_short(p.keystone, 28):<28}"
            f" {_value(series.metric, p.value):>12}{line}{mark}"
        )
    return "\n".join(lines)


def format_change_points(analysed: Sequence[tuple[Series, Sequence[Found]]]) -> str:
    """The verdict first: how many series changed; then each change point."""
    changed = [(s, f) for s, f in analysed if f]
    lines = [
        f"{len(changed)} of {len(analysed)} series with a change point"
        if changed
        else f"no change point in {len(analysed)} series"
    ]
    for series, found in changed:
        lines.append(f"  {series.key}")
        for f in found:
            lines.append(
                f"    run {f.run_after.run_id} ({f.run_after.keystone}): "
                f"{change_sentence(series.metric, f)}"
            )
            for commit in f.commits:
                lines.append(f"      {commit}")
    return "\n".join(lines)


def series_chart(series: Series, found: Sequence[Found]) -> str:
    """The series' values run by run, its segments' means, a red line at each change point."""
    y = np.array([p.value for p in series.points])
    scale, unit = (1000.0, "ms") if series.metric in ("p50", "p95", "p99") else (1.0, "")
    y = y * scale
    x = np.arange(1, y.size + 1, dtype=float)
    lo, hi = float(y.min()), float(y.max())
    pad = (hi - lo) * 0.15 or abs(hi) * 0.1 or 1.0
    fr = svg.Frame(0.5, y.size + 0.5, max(0.0, lo - pad), hi + pad)
    body = fr.axes("run (in the order recorded)", f"{series.metric} {unit}".strip())
    body.append(
        f'<path class="series" d="{svg.path_d(fr.x(x), fr.y(y))}" '
        f'stroke="{svg.COLORS["points"]}" stroke-width="1.5" fill="none"/>'
    )
    for xx, yy in zip(fr.x(x), fr.y(y), strict=True):
        body.append(f'<circle cx="{xx:.1f}" cy="{yy:.1f}" r="2.5" fill="{svg.COLORS["points"]}"/>')
    edges = [0, *(f.change.index for f in found), y.size]
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        mean = float(y[a:b].mean())
        body.append(
            f'<line class="mean" x1="{fr.x(a + 0.5):.1f}" x2="{fr.x(b + 0.5):.1f}" '
            f'y1="{fr.y(mean):.1f}" y2="{fr.y(mean):.1f}" stroke="{svg.COLORS["fit"]}" '
            'stroke-dasharray="4 3"/>'
        )
    for f in found:
        xx = fr.x(f.change.index + 0.5)
        body.append(
            f'<line class="change" x1="{xx:.1f}" x2="{xx:.1f}" y1="{svg.TOP}" '
            f'y2="{svg.H - svg.BOTTOM}" stroke="{CHANGE_COLOR}" stroke-width="1.5"/>'
        )
    legend = [(svg.COLORS["points"], series.metric), (svg.COLORS["fit"], "segment mean")]
    if found:
        legend.append((CHANGE_COLOR, "change point"))
    return svg.document(series.key, body, legend)


def _found_row(metric: str, f: Found) -> dict[str, Any]:
    """A change point for the page: its numbers, and its means in the metric's unit."""
    return f.as_dict() | {
        "before": _value(metric, f.change.mean_before),
        "after": _value(metric, f.change.mean_after),
    }


def write_html(
    path: Path,
    analysed: Sequence[tuple[Series, Sequence[Found]]],
    runs: Sequence[Mapping[str, Any]],
    store: str,
) -> Path:
    """history.html: the verdict, each series' chart and change points, the runs."""
    page = (
        render.environment()
        .get_template("history.html.j2")
        .render(
            verdict=format_change_points(analysed).splitlines()[0],
            any_change=any(f for _, f in analysed),
            series=[
                {
                    "key": s.key,
                    "machine": s.machine,
                    "chart": render.Markup(series_chart(s, f)),
                    "found": [_found_row(s.metric, x) for x in f],
                }
                for s, f in analysed
            ],  # fmt: skip
            runs=runs,
            store=store,
            generated_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        )
    )
    writer.write_text(path, page)
    return path


# -- exports ----------------------------------------------------------------------
def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(run: Mapping[str, Any], row: Mapping[str, Any], **extra: str) -> str:
    labels = {
        "workload": row["workload"],
        "action": row["action"],
        "deployment": run.get("deployment") or "",
        "machine": run.get("machine") or "",
        "keystone": run.get("keystone_describe") or run.get("keystone") or "",
        **extra,
    }
    return ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())


def _newest_rows(runs: Sequence[Mapping[str, Any]]) -> list[tuple[Mapping, Mapping]]:
    """(run, row) of the newest run of each series: one sample per label set."""
    newest: dict[tuple, tuple[Mapping, Mapping]] = {}
    for run in runs:
        for row in run["rows"]:
            key = (row["workload"], row["action"], run.get("deployment"), run.get("machine"))
            newest[key] = (run, row)
    return list(newest.values())


FAMILIES = (
    # name, type, unit, help, value of (row)
    ("keystone_bench_latency_seconds", "seconds",
     "service time percentile of successful requests, one series per percentile", None),
    ("keystone_bench_throughput", "",
     "successful iterations (or actions) per second", lambda r: r.get("rate")),
    ("keystone_bench_success_ratio", "ratio",
     "share of iterations that succeeded",
     lambda r: None if r.get("success_percent") is None else r["success_percent"] / 100),
    ("keystone_bench_sql_statements", "",
     "median SQL statements per traced request",
     lambda r: (r.get("counters") or {}).get("sql_statements_median")),
    ("keystone_bench_db_seconds", "seconds",
     "median database time per traced request",
     lambda r: None if (r.get("counters") or {}).get("db_ms_median") is None
     else r["counters"]["db_ms_median"] / 1000),
)  # fmt: skip


def _num(v: float) -> str:
    return repr(float(v)) if math.isfinite(v) else ("NaN" if v != v else "+Inf")


def openmetrics(runs: Sequence[Mapping[str, Any]]) -> str:
    """OpenMetrics text of the newest run of each series (no timestamps: node_exporter's
    textfile collector refuses them), ending ``# EOF``."""
    newest = _newest_rows(runs)
    lines = []
    for name, unit, text, value_of in FAMILIES:
        samples = []
        for run, row in newest:
            if value_of is None:
                for key in PERCENTILES:
                    if row.get(key) is not None:
                        labels = _labels(run, row, percentile=key)
                        samples.append(f"{name}{{{labels}}} {_num(row[key])}")
            elif (v := value_of(row)) is not None:
                samples.append(f"{name}{{{_labels(run, row)}}} {_num(v)}")
        if samples:
            lines += [f"# TYPE {name} gauge"] + ([f"# UNIT {name} {unit}"] if unit else [])
            lines += [f"# HELP {name} {text}", *samples]
    return "\n".join([*lines, "# EOF"]) + "\n"


def _tag(value: Any) -> str:
    return (
        str(value).replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")
    )


def _timestamp_ns(recorded_at: str) -> int:
    when = dt.datetime.strptime(recorded_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp()) * 1_000_000_000


def influx(runs: Sequence[Mapping[str, Any]]) -> str:
    """InfluxDB line protocol: one point per run and action, at the run's time."""
    lines = []
    for run in runs:
        for row in run["rows"]:
            tags = {
                "workload": row["workload"], "action": row["action"],
                "deployment": run.get("deployment") or "-", "machine": run.get("machine") or "-",
                "keystone": run.get("keystone_describe") or run.get("keystone") or "-",
            }  # fmt: skip
            fields = {k: row.get(k) for k in ("p50", "p95", "p99", "rate", "success_percent")}
            fields["run"] = run["id"]
            cells = [
                f"{k}={v}i" if isinstance(v, int) else f"{k}={float(v)!r}"
                for k, v in fields.items()
                if v is not None and (isinstance(v, int) or math.isfinite(v))
            ]
            tagtext = ",".join(f"{k}={_tag(v)}" for k, v in tags.items())
            lines.append(
                f"keystone_bench,{tagtext} {','.join(cells)} {_timestamp_ns(run['recorded_at'])}"
            )
    return "\n".join(lines) + ("\n" if lines else "")


def save_export(path: Path, text: str) -> Path:
    """An export at PATH, written whole under a temporary name and renamed (a collector
    never reads half a file)."""
    return writer.write_text(path, text)
