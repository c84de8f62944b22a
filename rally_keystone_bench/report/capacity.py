"""capacity.json, capacity.html and the probe table: the reports of a capacity search.

The charts are drawn with report/svg.py's public helpers; the page comes
from templates/capacity.html.j2, in the style of every other page.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from rally_keystone_bench import writer
from rally_keystone_bench.report import svg
from rally_keystone_bench.report.render import environment
from rally_keystone_bench.verdicts.capacity import Outcome, Settings, fmt
from rally_keystone_bench.verdicts.probe_verdict import (
    CLIENT_BOUND,
    ERRORS,
    GENERATOR,
    GENERATOR_SHARE,
    OK,
    SATURATED,
    SLOPE,
    Probe,
)
from rally_keystone_bench.version import version as tool_version


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"arch": platform.machine(), "cores": os.cpu_count(), "cpu": model}


def build_summary(
    outcome: Outcome, settings: Settings, target: str, started_at: str, elapsed: float
) -> dict[str, Any]:
    """Everything capacity.json holds."""
    return {
        "scenario": settings.scenario,
        "rally_scenario": settings.rally_scenario,
        "action": settings.action,
        "target": target,
        "settings": dataclasses.asdict(settings),
        "result": {
            "n_rps": outcome.n,
            "status": outcome.status,
            "limited_by": outcome.limited_by,
            "confirmed": outcome.confirmed,
            "n_spread_rps": list(outcome.spread) if outcome.spread else None,
            "message": outcome.message,
            "prediction": outcome.prediction,
            "prediction_held": outcome.prediction_held,
        },
        "probes": [p.to_json() for p in outcome.probes],
        "started_at": started_at,
        "elapsed_s": round(elapsed, 1),
        "machine": machine(),
    }


VERDICT_COLORS = {
    OK: "#1b7a3a",
    ERRORS: "#b00020",
    SLOPE: "#d9822b",
    SATURATED: "#8e44ad",
    GENERATOR: "#888888",
    CLIENT_BOUND: "#aaaaaa",
}


def latency_against_rate_svg(probes: Sequence[Probe], n: float | None) -> str:
    """p50 and p95 latency (ms) of each probe's window against its target rate."""
    pts = [p for p in probes if p.p50 is not None]
    title = "latency against target rate"
    if not pts:
        return svg.document(title, [f'<text x="{svg.W / 2}" y="{svg.H / 2}">no samples</text>'])
    ok95 = [p.p95 for p in pts if p.passed and p.p95 is not None]
    all95 = [p.p95 or p.p50 for p in pts]
    cap = (max(ok95) * 4 if ok95 else max(all95) * 1.1) or 1e-3
    cap = min(cap, max(all95) * 1.1) * 1000
    rates = [p.rps for p in pts]
    fr = svg.Frame(0.0, max(rates) * 1.05, 0.0, cap)
    body = fr.axes("target rate (rps)", "latency in the window (ms)")
    above = 0
    for key, dash in (("p50", ""), ("p95", ' stroke-dasharray="5 3"')):
        ordered = sorted(pts, key=lambda p: (p.rps, p.number))
        xs = [fr.x(p.rps) for p in ordered]
        ys = [fr.y(min(getattr(p, key) * 1000, cap)) for p in ordered]
        body.append(
            f'<path class="{key}" d="{svg.path_d(xs, ys)}" stroke="#4a78b5" '
            f'stroke-width="1.5" fill="none"{dash}/>'
        )
        for p, x, y in zip(ordered, xs, ys, strict=True):
            above += key == "p95" and p.p95 * 1000 > cap
            body.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{4 if key == "p95" else 3}" '
                f'fill="{VERDICT_COLORS.get(p.verdict, "#333333")}">'
                f"<title>probe {p.number}: {fmt(p.rps)} rps, {key} "
                f"{getattr(p, key) * 1000:.1f} ms, {p.verdict}</title></circle>"
            )
    if n is not None:
        x = fr.x(n)
        body.append(
            f'<path class="n" d="M{x:.1f},{svg.TOP} L{x:.1f},{svg.TOP + fr.ph}" '
            'stroke="#2e8b57" stroke-width="1.5" stroke-dasharray="2 3" fill="none"/>'
            f'<text x="{x + 4:.1f}" y="{svg.TOP + 12}">N = {fmt(n)}</text>'
        )
    if above:
        body.append(
            f'<text x="{svg.W - svg.RIGHT}" y="{svg.TOP - 4}" text-anchor="end">'
            f"{above} p95 above {cap:.0f} ms drawn at the top</text>"
        )
    legend = [("#4a78b5", "p50 (solid), p95 (dashed)")] + [
        (c, v) for v, c in VERDICT_COLORS.items() if any(p.verdict == v for p in pts)
    ]
    return svg.document(title, body, legend)


def sent_against_target_svg(probes: Sequence[Probe]) -> str:
    """Achieved (sent) rate of each probe against its target, with the 95 % line."""
    pts = [p for p in probes if p.sent_rate is not None]
    title = "sent rate against target rate"
    if not pts:
        return svg.document(title, [f'<text x="{svg.W / 2}" y="{svg.H / 2}">no samples</text>'])
    top = max(max(p.rps for p in pts), max(p.sent_rate for p in pts)) * 1.05
    fr = svg.Frame(0.0, top, 0.0, top)
    body = fr.axes("target rate (rps)", "sent rate in the window (rps)")
    body.append(
        f'<path class="target" d="M{fr.x(0):.1f},{fr.y(0):.1f} L{fr.x(top):.1f},{fr.y(top):.1f}" '
        'stroke="#888888" stroke-width="1" fill="none"/>'
        f'<path class="limit" d="M{fr.x(0):.1f},{fr.y(0):.1f} '
        f'L{fr.x(top):.1f},{fr.y(top * GENERATOR_SHARE):.1f}" stroke="#888888" '
        'stroke-width="1" stroke-dasharray="4 3" fill="none"/>'
    )
    for p in pts:
        body.append(
            f'<circle cx="{fr.x(p.rps):.1f}" cy="{fr.y(p.sent_rate):.1f}" r="4" '
            f'fill="{VERDICT_COLORS.get(p.verdict, "#333333")}">'
            f"<title>probe {p.number}: target {fmt(p.rps)}, sent {p.sent_rate:.1f} rps</title>"
            "</circle>"
        )
    return svg.document(
        title,
        body,
        [("#888888", "sent = target (solid), 95 % of it (dashed): below, generator-limited")],
    )


def n_pair(probes: Sequence[Probe], n: float | None) -> list[Probe]:
    """The last whole probe that passed at N and the last that did not at the lowest rate
    above N: the confirmations, or the walk's probes at the predicted knee."""
    whole = [p for p in probes if not p.role.startswith("ramp") and p.report]
    if n is None:
        return []
    pair = [p for p in whole if abs(p.rps - n) < 1e-6 and p.passed][-1:]
    above = [p for p in whole if p.rps > n + 1e-6 and not p.passed]
    if above:
        lowest = min(p.rps for p in above)
        pair += [p for p in above if p.rps == lowest][-1:]
    return pair


def n_pair_svgs(probes: Sequence[Probe], action: str | None, n: float | None) -> list[str]:
    """Latency over time of the probes at N and at N + 1, side by side.

    The ISP RAS paper's figures 1 to 3: one request per second more, and the
    latency turns upward. Drawn from each of the two probes' Rally reports.
    """
    from rally_keystone_bench.report.render import latency_fit
    from rally_keystone_bench.verdicts import results

    out = []
    for probe in n_pair(probes, n):
        role = probe.role
        if not Path(probe.report).is_file():
            continue
        workloads = results.load(probe.report)
        if not workloads or not workloads[0].iterations:
            continue
        wl = workloads[0]
        name = action if action in wl.actions else results.TOTAL
        a, t0 = wl.actions[name], float(wl.iteration_started.min())
        ok = ~a.failed
        title = f"{probe.rps:g} rps ({role}): {name} latency over time"
        chart = svg.latency_over_time(
            a.started_at[ok], a.duration[ok], latency_fit(a, t0), title, t0
        )
        out.append(f"<figcaption>{html.escape(title)}</figcaption>{chart}")
    return out


def render_html(summary: dict[str, Any], probes: Sequence[Probe], n: float | None) -> str:
    charts = [
        Markup(latency_against_rate_svg(probes, n)),
        Markup(sent_against_target_svg(probes)),
        *(Markup(c) for c in n_pair_svgs(probes, summary.get("action"), n)),
    ]
    return environment().get_template("capacity.html.j2").render(s=summary, charts=charts)


def write_reports(
    outcome: Outcome,
    settings: Settings,
    target: str,
    out_dir: Path,
    started_at: str,
    elapsed: float,
) -> tuple[Path, Path]:
    """capacity.json and capacity.html in OUT_DIR."""
    summary = build_summary(outcome, settings, target, started_at, elapsed)
    json_path, html_path = out_dir / "capacity.json", out_dir / "capacity.html"
    doc = {"tool_version": tool_version(), **summary}
    writer.write_json(json_path, doc)
    writer.write_text(html_path, render_html(summary, outcome.probes, outcome.n))
    return json_path, html_path


def format_table(probes: Sequence[Probe]) -> str:
    """The probe table for the terminal."""

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1000:.1f}"

    lines = [
        f"{'#':>3} {'role':<12} {'target':>7} {'sent':>7} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'resp p99':>9} "
        f"{'slope s/s':>10} {'failed':>6} {'setup':>5} {'time':>5}  verdict"
    ]
    for p in probes:
        sent = "-" if p.sent_rate is None else f"{p.sent_rate:.1f}"
        slope = "-" if p.slope is None else f"{p.slope:.3g}"
        setup = "-" if p.setup is None else f"{p.setup:.0f}s"
        lines.append(
            f"{p.number:>3} {p.role:<12} {fmt(p.rps):>7} {sent:>7} {ms(p.p50):>8} "
            f"{ms(p.p95):>8} {ms(p.resp_p99):>9} {slope:>10} {p.failed:>6} {setup:>5} "
            f"{p.elapsed:>4.0f}s  {p.verdict}"
        )
    return "\n".join(lines)
