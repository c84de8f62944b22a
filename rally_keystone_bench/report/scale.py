"""keystone-bench scale's outputs: the per-point table, scale.json, and scale.html's chart."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.report import svg
from rally_keystone_bench.verdicts.growth import Dimension, Growth, Point
from rally_keystone_bench.version import version as tool_version


def _ms(v: float) -> str:
    return "-" if v != v else f"{v * 1000:.1f}"  # NaN: no sample


def point_line(dim: Dimension, point: Point, setup_s: float | None, counters: str = "") -> str:
    """One point: its size, p50, p95, success, samples, setup time (and counters)."""
    setup = f"  setup {setup_s:.1f} s" if setup_s is not None else ""
    return (
        f"    {point.size:>9,} {dim.unit:<20} p50 {_ms(point.percentile(50)):>8} ms"
        f"  p95 {_ms(point.percentile(95)):>8} ms  ok {point.success_percent:5.1f}%"
        f"  n {len(point.latencies)}{setup}{counters}"
    )


def _point(p: Point) -> dict[str, Any]:
    return {
        "size": p.size,
        "p50_ms": p.percentile(50) * 1000,
        "p95_ms": p.percentile(95) * 1000,
        "success_percent": p.success_percent,
        "samples": len(p.latencies),
    }


def summary(
    dim: Dimension,
    action: str,
    points: Sequence[Point],
    setups: Sequence[float | None],
    growth: Growth | None,
    stopped: str | None,
    deployment: str,
    again: Point | None = None,
    drift: float | None = None,
) -> dict[str, Any]:
    """What scale.json holds: each point's percentiles, the fit and its verdict, and the
    first point measured again at the end with how far it moved (None: not measured)."""
    return {
        "dimension": dim.name,
        "unit": dim.unit,
        "action": action,
        "deployment": deployment,
        "points": [{**_point(p), "setup_seconds": s} for p, s in zip(points, setups, strict=True)],
        "growth": None
        if growth is None
        else {
            "ms_per_unit": growth.slope * 1000,
            "interval_ms_per_unit": [growth.low * 1000, growth.high * 1000],
            "shape": growth.shape,
            "reason": growth.reason,
            "sentence": growth.sentence(dim),
        },
        "stopped_early": stopped,
        "first_point_again": None if again is None else _point(again),
        "machine_drift": drift,
    }


def chart(dim: Dimension, action: str, points: Sequence[Point], growth: Growth | None) -> str:
    """p50 and p95 (ms) against the size, with the fitted line through the medians."""
    pts = [p for p in points if p.latencies]
    title = f"{action} latency against {dim.unit}"
    if not pts:
        return svg.document(title, [f'<text x="{svg.W / 2}" y="{svg.H / 2}">no samples</text>'])
    sizes = [p.size for p in pts]
    top = max(p.percentile(95) for p in pts) * 1000 * 1.1 or 1.0
    fr = svg.Frame(min(sizes), max(sizes) or 1, 0.0, top)
    body = fr.axes(dim.unit, "latency (ms)")
    for q, color, dash in (
        (50, svg.COLORS["points"], ""),
        (95, svg.COLORS["p95"], ' stroke-dasharray="5 3"'),
    ):
        xs = [fr.x(p.size) for p in pts]
        ys = [fr.y(p.percentile(q) * 1000) for p in pts]
        body.append(
            f'<path d="{svg.path_d(xs, ys)}" stroke="{color}" stroke-width="1.5" '
            f'fill="none"{dash}/>'
        )
        for p, x, y in zip(pts, xs, ys, strict=True):
            body.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"><title>{p.size:,} '
                f"{html.escape(dim.unit)}: p{q} {p.percentile(q) * 1000:.2f} ms</title></circle>"
            )
    legend = [(svg.COLORS["points"], "p50"), (svg.COLORS["p95"], "p95 (dashed)")]
    if growth is not None:
        base = pts[0].percentile(50) - growth.slope * pts[0].size
        xs = [fr.x(s) for s in (min(sizes), max(sizes))]
        ys = [fr.y((base + growth.slope * s) * 1000) for s in (min(sizes), max(sizes))]
        body.append(
            f'<path class="fit" d="{svg.path_d(xs, ys)}" stroke="{svg.COLORS["fit"]}" '
            'stroke-width="1" stroke-dasharray="2 3" fill="none"/>'
        )
        legend.append((svg.COLORS["fit"], f"fit: {growth.shape}"))
    return svg.document(title, body, legend)


def _row(p: dict[str, Any]) -> str:
    setup = "-" if p["setup_seconds"] is None else f"{p['setup_seconds']:.1f} s"
    return (
        f"<tr><td>{p['size']:,}</td><td>{p['p50_ms']:.2f}</td><td>{p['p95_ms']:.2f}</td>"
        f"<td>{p['success_percent']:.1f}%</td><td>{p['samples']}</td><td>{setup}</td></tr>"
    )


def write(out_dir: Path, doc: dict[str, Any], chart_svg: str) -> tuple[Path, Path]:
    """scale.json and scale.html in OUT_DIR."""
    json_path, html_path = out_dir / "scale.json", out_dir / "scale.html"
    doc = {"tool_version": tool_version(), **doc}
    writer.write_json(json_path, doc)
    growth = doc["growth"]
    verdict = growth["sentence"] if growth else "no growth fitted (fewer than two points)"
    rows = "".join(_row(p) for p in doc["points"])
    stopped = (
        f"<p><b>Stopped early:</b> {html.escape(doc['stopped_early'])}</p>"
        if doc["stopped_early"]
        else ""
    )
    again = doc.get("first_point_again")
    drift = (
        f"<p>The first point measured again at the end: p50 {again['p50_ms']:.2f} ms; "
        f"the machine moved it {doc['machine_drift']:.1%}.</p>"
        if again and doc.get("machine_drift") is not None
        else ""
    )
    reason = f"<p>{html.escape(growth['reason'])}</p>" if growth else ""
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>keystone-bench scale: {html.escape(doc['dimension'])}</title></head><body>"
        f"<h1>{html.escape(doc['action'])} against {html.escape(doc['unit'])}</h1>"
        f"<p><b>{html.escape(verdict)}</b></p>{reason}{stopped}{drift}"
        f"<p>deployment: {html.escape(doc['deployment'])}</p>{chart_svg}"
        "<table border='1' cellpadding='4'><tr><th>size</th><th>p50 ms</th><th>p95 ms</th>"
        f"<th>success</th><th>samples</th><th>setup</th></tr>{rows}</table></body></html>\n"
    )
    writer.write_text(html_path, page)
    return json_path, html_path
