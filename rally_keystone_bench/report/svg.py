"""Inline SVG charts drawn from sample arrays: no script, no external file.

Each function returns one ``<svg>`` element as a string. Points are
downsampled (the lowest and highest value of each time bin are kept, so
spikes stay visible) to keep the page small whatever the run's length.
"""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

import numpy as np

from rally_keystone_bench.verdicts.trend import LinearFit

W, H = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 40
MAX_POINTS = 2000
COLORS = {"points": "#4a78b5", "p95": "#d9822b", "fit": "#2e8b57", "target": "#888888"}


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out = []
    v = first
    while v <= hi + step * 1e-9:
        out.append(round(v, 10))
        v += step
    return out


def _fmt(v: float) -> str:
    return f"{v:.1f}"


def _tick_label(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.3g}"
    return f"{v:.2g}"


class Frame:
    """Maps data coordinates to the plot area and draws the axes."""

    def __init__(self, x0: float, x1: float, y0: float, y1: float) -> None:
        if x1 <= x0:
            x1 = x0 + 1.0
        if y1 <= y0:
            y1 = y0 + 1.0
        self.x0, self.x1, self.y0, self.y1 = x0, x1, y0, y1
        self.pw = W - LEFT - RIGHT
        self.ph = H - TOP - BOTTOM

    def x(self, v: np.ndarray | float) -> np.ndarray | float:
        return LEFT + (v - self.x0) / (self.x1 - self.x0) * self.pw

    def y(self, v: np.ndarray | float) -> np.ndarray | float:
        return TOP + self.ph - (v - self.y0) / (self.y1 - self.y0) * self.ph

    def y_axis(self, ylabel: str) -> list[str]:
        """The plot area, its horizontal grid with the y ticks, and the y label."""
        out = [
            f'<rect x="{LEFT}" y="{TOP}" width="{self.pw}" height="{self.ph}" '
            'fill="#ffffff" stroke="#bbbbbb"/>'
        ]
        for t in nice_ticks(self.y0, self.y1):
            yy = self.y(t)
            out.append(
                f'<line x1="{LEFT}" x2="{LEFT + self.pw}" y1="{_fmt(yy)}" y2="{_fmt(yy)}" '
                'stroke="#eeeeee"/>'
                f'<text x="{LEFT - 6}" y="{_fmt(yy + 4)}" text-anchor="end">{_tick_label(t)}</text>'
            )
        out.append(
            f'<text x="14" y="{TOP + self.ph / 2}" text-anchor="middle" '
            f'transform="rotate(-90 14 {TOP + self.ph / 2})">{escape(ylabel)}</text>'
        )
        return out

    def axes(self, xlabel: str, ylabel: str) -> list[str]:
        out = self.y_axis(ylabel)
        for t in nice_ticks(self.x0, self.x1, 8):
            xx = self.x(t)
            out.append(
                f'<line x1="{_fmt(xx)}" x2="{_fmt(xx)}" y1="{TOP + self.ph}" '
                f'y2="{TOP + self.ph + 4}" stroke="#888888"/>'
                f'<text x="{_fmt(xx)}" y="{TOP + self.ph + 16}" text-anchor="middle">'
                f"{_tick_label(t)}</text>"
            )
        out.append(
            f'<text x="{LEFT + self.pw / 2}" y="{H - 6}" text-anchor="middle">'
            f"{escape(xlabel)}</text>"
        )
        return out


def document(
    title: str, body: list[str], legend: list[tuple[str, str]] = (), height: int = H
) -> str:
    """A self-contained SVG chart: TITLE, BODY elements, a LEGEND of (color, text)."""
    items = []
    x = LEFT
    for color, text in legend:
        items.append(
            f'<rect x="{x}" y="8" width="12" height="4" fill="{color}"/>'
            f'<text x="{x + 16}" y="14">{escape(text)}</text>'
        )
        x += 24 + 7 * len(text)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {W} {height}" '
        f'width="{W}" height="{height}" role="img" '
        f'aria-label="{escape(title, {chr(34): "&quot;"})}" '
        'font-family="sans-serif" font-size="11" fill="#333333">'
        f"<title>{escape(title)}</title>" + "".join(body) + "".join(items) + "</svg>"
    )


def downsample(t: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS):
    """At most ``max_points`` of (t, y): the lowest and highest y of each time bin."""
    n = t.size
    if n <= max_points:
        return t, y
    bins = max_points // 2
    order = np.argsort(t, kind="stable")
    ts, ys = t[order], y[order]
    edges = np.linspace(0, n, bins + 1).astype(np.int64)
    keep = []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        if b <= a:
            continue
        seg = ys[a:b]
        keep.append(a + int(np.argmin(seg)))
        keep.append(a + int(np.argmax(seg)))
    idx = np.unique(np.asarray(keep))
    return ts[idx], ys[idx]


def rolling_quantile(t: np.ndarray, y: np.ndarray, q: float = 95.0, windows: int = 60):
    """The ``q`` percentile of y in sliding windows over time-ordered samples.

    Window size is 1/``windows`` of the samples (at least 20), advanced by a
    quarter window; returns (window middle time, percentile).
    """
    n = t.size
    if n < 20:
        return np.zeros(0), np.zeros(0)
    order = np.argsort(t, kind="stable")
    ts, ys = t[order], y[order]
    size = max(20, n // windows)
    step = max(1, size // 4)
    starts = np.arange(0, n - size + 1, step)
    mids = np.array([ts[s : s + size].mean() for s in starts])
    vals = np.array([np.percentile(ys[s : s + size], q) for s in starts])
    return mids, vals


def path_d(xs, ys) -> str:
    """An SVG path through the points (xs, ys)."""
    pts = " ".join(f"{_fmt(a)},{_fmt(b)}" for a, b in zip(xs, ys, strict=True))
    return f"M{pts.replace(' ', ' L', 1)}" if pts else ""


def marker_size(points: int) -> int:
    """Diameter (px) of a sample's dot: large enough to see at 20 samples, small at 2000."""
    if points <= 50:
        return 8
    if points <= 500:
        return 5
    return 3


def latency_over_time(
    t: np.ndarray, y: np.ndarray, fit: LinearFit | None, title: str, t0: float
) -> str:
    """Latency (ms) of each sample against seconds since ``t0``.

    Downsampled points, a rolling p95 and the least-squares line with its slope.
    """
    x = t - t0
    yms = y * 1000.0
    if x.size == 0:
        return document(title, [f'<text x="{W / 2}" y="{H / 2}">no samples</text>'])
    cap = float(np.percentile(yms, 99.9)) * 1.2
    cap = max(cap, float(np.percentile(yms, 50)) * 2, 1e-3)
    above = int((yms > cap).sum())
    fr = Frame(0.0, float(x.max()) or 1.0, 0.0, cap)
    body = fr.axes("seconds since the load started", "latency (ms)")
    dx, dy = downsample(x, np.minimum(yms, cap))
    dots = "".join(f"M{_fmt(a)} {_fmt(b)}h0" for a, b in zip(fr.x(dx), fr.y(dy), strict=True))
    body.append(
        f'<path class="points" d="{dots}" stroke="{COLORS["points"]}" '
        f'stroke-opacity="{0.85 if dx.size <= 200 else 0.55}" '
        f'stroke-width="{marker_size(dx.size)}" stroke-linecap="round" fill="none"/>'
    )
    legend = [(COLORS["points"], f"{x.size} samples")]
    mx, mv = rolling_quantile(x, yms)
    if mx.size >= 2:  # a p95 needs a window of 20 samples: none is drawn for fewer
        body.append(
            f'<path class="p95" d="{path_d(fr.x(mx), fr.y(np.minimum(mv, cap)))}" '
            f'stroke="{COLORS["p95"]}" stroke-width="2" fill="none"/>'
        )
        legend.append((COLORS["p95"], f"rolling p95 ({int(mx.size)} windows)"))
    if fit is not None:
        xa, xb = 0.0, float(x.max())
        ya = np.clip((fit.intercept + fit.slope * (xa + 0)) * 1000, 0, cap)
        yb = np.clip((fit.intercept + fit.slope * xb) * 1000, 0, cap)
        body.append(
            f'<path class="fit" d="M{_fmt(fr.x(xa))},{_fmt(fr.y(ya))} '
            f'L{_fmt(fr.x(xb))},{_fmt(fr.y(yb))}" stroke="{COLORS["fit"]}" '
            'stroke-width="2" stroke-dasharray="6 3" fill="none"/>'
        )
        lo, hi = fit.slope_ci
        legend.append(
            (
                COLORS["fit"],
                f"least squares: {fit.slope * 1000:+.4f} ms/s "
                f"(95% CI {lo * 1000:+.4f} to {hi * 1000:+.4f})",
            )
        )
    if above:
        body.append(
            f'<text x="{W - RIGHT}" y="{TOP - 4}" text-anchor="end">'
            f"{above} sample(s) above {cap:.1f} ms drawn at the top</text>"
        )
    return document(title, body, legend)


PERCENTILE_TICKS = ((0, "0%"), (1, "90%"), (2, "99%"), (3, "99.9%"), (4, "99.99%"), (5, "99.999%"))


def percentiles(y: np.ndarray, title: str) -> str:
    """Latency (ms) at each percentile, HDR-style: the x axis is log(1 / (1 - q)), so
    the tail (90 %, 99 %, 99.9 %) gets as much room as the body. Every sample is a
    point: nothing is binned, so 10 samples draw as well as 10,000."""
    return percentile_curves(title, [("", y, COLORS["points"])])


def percentile_curves(title: str, series: list[tuple[str, np.ndarray, str]]) -> str:
    """percentiles' chart of several SERIES (name, latencies in seconds, color) on one
    scale: compare's base and candidate, overlaid. A series without samples says so."""
    drawn = [(name, np.sort(y * 1000.0), color) for name, y, color in series]
    drawn = [(name, yms, color) for name, yms, color in drawn if yms.size]
    if not drawn:
        return document(title, [f'<text x="{W / 2}" y="{H / 2}">no samples</text>'])
    tails = [math.log10(1.0 / (0.5 / yms.size)) for _, yms, _ in drawn]
    x1 = max(1.0, math.ceil(max(tails)))
    fr = Frame(0.0, x1, 0.0, max(float(yms[-1]) for _, yms, _ in drawn) * 1.05 or 1.0)
    body = fr.y_axis("latency (ms)")
    for v, text in PERCENTILE_TICKS:
        if v > x1:
            break
        xx = fr.x(v)
        body.append(
            f'<line x1="{_fmt(xx)}" x2="{_fmt(xx)}" y1="{TOP}" y2="{TOP + fr.ph + 4}" '
            'stroke="#eeeeee"/>'
            f'<text x="{_fmt(xx)}" y="{TOP + fr.ph + 16}" text-anchor="middle">{text}</text>'
        )
    body.append(
        f'<text x="{LEFT + fr.pw / 2}" y="{H - 6}" text-anchor="middle">'
        "percentile (log scale toward the tail)</text>"
    )
    legend = []
    for i, (name, yms, color) in enumerate(drawn):
        # the first series widest: where two are the same, it shows as a border of the other
        body.extend(_percentile_curve(fr, yms, color, 2 + 2 * (len(drawn) - 1 - i)))
        n, p50, p99 = yms.size, np.percentile(yms, 50), np.percentile(yms, 99)
        if name:  # two legends side by side: the short form
            text = f"{name} (n {n}): p50 {p50:.1f}, p99 {p99:.1f} ms"
        else:
            text = f"{n} samples: median {p50:.1f} ms, p99 {p99:.1f} ms, max {yms[-1]:.1f} ms"
        legend.append((color, text))
    missing = [name for name, y, _ in series if not np.asarray(y).size]
    if missing:
        body.append(
            f'<text x="{W - RIGHT}" y="{TOP + 14}" text-anchor="end">'
            f"{escape(', '.join(missing))}: no samples</text>"
        )
    return document(title, body, legend)


def _percentile_curve(fr: Frame, yms: np.ndarray, color: str, width: int = 2) -> list[str]:
    """One series' steps through its sorted samples (YMS, ms), WIDTH px, and its dots up
    to 200."""
    n = yms.size
    q = (np.arange(n) + 0.5) / n  # each sample at the middle of its share
    px, py = fr.x(np.log10(1.0 / (1.0 - q))), fr.y(yms)
    steps = [f"M{_fmt(fr.x(0.0))},{_fmt(py[0])}"]
    steps += [f"H{_fmt(a)}V{_fmt(b)}" for a, b in zip(px, py, strict=True)]
    out = [
        f'<path class="percentiles" d="{"".join(steps)}" stroke="{color}" '
        f'stroke-width="{width}" fill="none"/>'
    ]
    if n <= 200:
        dots = "".join(f"M{_fmt(a)} {_fmt(b)}h0" for a, b in zip(px, py, strict=True))
        out.append(
            f'<path class="points" d="{dots}" stroke="{color}" '
            f'stroke-width="{marker_size(n)}" stroke-linecap="round" fill="none"/>'
        )
    return out


def rate_over_time(
    started: np.ndarray, t0: float, target: list[tuple[float, float]], title: str
) -> str:
    """Iterations started per second against the rps runner's target rate."""
    x = started - t0
    if x.size == 0:
        return document(title, [f'<text x="{W / 2}" y="{H / 2}">no samples</text>'])
    end = float(np.ceil(x.max())) or 1.0
    counts, edges = np.histogram(x, bins=int(end), range=(0.0, end))
    mids = (edges[:-1] + edges[1:]) / 2
    top = max(float(counts.max()), max((r for _, r in target), default=0.0)) * 1.15
    fr = Frame(0.0, end, 0.0, top or 1.0)
    body = fr.axes("seconds since the load started", "iterations started per second")
    mx, my = downsample(mids, counts.astype(float))
    body.append(
        f'<path class="achieved" d="{path_d(fr.x(mx), fr.y(my))}" stroke="{COLORS["points"]}" '
        'stroke-width="1.5" fill="none"/>'
    )
    if target:
        tx = np.array([a for a, _ in target])
        ty = np.array([b for _, b in target])
        body.append(
            f'<path class="target" d="{path_d(fr.x(np.minimum(tx, end)), fr.y(ty))}" '
            f'stroke="{COLORS["target"]}" stroke-width="2" stroke-dasharray="4 3" fill="none"/>'
        )
    return document(
        title, body, [(COLORS["points"], "achieved"), (COLORS["target"], "target (rps runner)")]
    )


def bars(title: str, items: list[tuple[str, float, float, float]], ylabel: str) -> str:
    """One bar per ITEM (label, value, low, high): the value, and low-high as a whisker.

    The matrix's chart per workload: a bar per deployment, the mean of its
    rounds, the whisker from the lowest round to the highest.
    """
    finite = [(n, v, lo, hi) for n, v, lo, hi in items if math.isfinite(v)]
    if not finite:
        return document(title, [f'<text x="{W / 2}" y="{H / 2}">no values</text>'])
    top = max(max(v, hi) if math.isfinite(hi) else v for _, v, _, hi in finite)
    fr = Frame(0.0, 1.0, 0.0, top * 1.15 if top > 0 else 1.0)
    body = fr.y_axis(ylabel)
    slot = fr.pw / len(finite)
    width = min(80.0, slot * 0.6)
    for i, (name, v, lo, hi) in enumerate(finite):
        cx = LEFT + slot * (i + 0.5)
        y0, yv = fr.y(0.0), fr.y(v)
        body.append(
            f'<rect class="bar" x="{_fmt(cx - width / 2)}" y="{_fmt(yv)}" width="{_fmt(width)}" '
            f'height="{_fmt(y0 - yv)}" fill="{COLORS["points"]}" fill-opacity="0.85">'
            f"<title>{escape(name)}: {v:.3g}</title></rect>"
            f'<text x="{_fmt(cx + width / 2 + 4)}" y="{_fmt(yv + 10)}">{v:.3g}</text>'
            f'<text x="{_fmt(cx)}" y="{TOP + fr.ph + 16}" text-anchor="middle">'
            f"{escape(name)}</text>"
        )
        if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
            ylo, yhi = fr.y(lo), fr.y(hi)
            body.append(
                f'<path class="whisker" d="M{_fmt(cx)},{_fmt(ylo)} L{_fmt(cx)},{_fmt(yhi)} '
                f"M{_fmt(cx - 6)},{_fmt(ylo)} L{_fmt(cx + 6)},{_fmt(ylo)} "
                f'M{_fmt(cx - 6)},{_fmt(yhi)} L{_fmt(cx + 6)},{_fmt(yhi)}" '
                f'stroke="{COLORS["p95"]}" stroke-width="1.5" fill="none"/>'
            )
    legend = [(COLORS["points"], "mean of the rounds")]
    if any(math.isfinite(hi) and hi > lo for _, _, lo, hi in finite):
        legend.append((COLORS["p95"], "lowest to highest round"))
    return document(title, body, legend)


def block_ratios(
    title: str, blocks: list[tuple[float, float, bool]], limit: float, median: float | None = None
) -> str:
    """The gate's per-block candidate/baseline ratios over time, one point a block.

    BLOCKS are (seconds since the first block, ratio, set aside?); set-aside
    blocks are drawn hollow and grey. LIMIT is the ratio a regression must
    exceed (1 + threshold), drawn dashed, with 1.0 (no change) as a thin line.
    """
    pts = [(t, r, aside) for t, r, aside in blocks if math.isfinite(r) and r > 0]
    if not pts:
        return document(title, [f'<text x="{W / 2}" y="{H / 2}">no blocks</text>'])
    ratios = [r for _, r, _ in pts] + [1.0, limit]
    lo, hi = min(ratios), max(ratios)
    pad = (hi - lo) * 0.1 or 0.05
    end = max(t for t, _, _ in pts) or 1.0
    fr = Frame(0.0, end * 1.02, max(lo - pad, 0.0), hi + pad)
    body = fr.axes("seconds since the first block", "candidate / baseline (block median)")
    for level, css, dash in ((1.0, "same", ""), (limit, "limit", ' stroke-dasharray="6 4"')):
        yy = _fmt(fr.y(level))
        body.append(
            f'<line class="{css}" x1="{LEFT}" x2="{LEFT + fr.pw}" y1="{yy}" y2="{yy}" '
            f'stroke="{COLORS["target"] if css == "same" else "#c0392b"}"{dash}/>'
        )
    if median is not None and math.isfinite(median):
        yy = _fmt(fr.y(median))
        body.append(
            f'<line class="median" x1="{LEFT}" x2="{LEFT + fr.pw}" y1="{yy}" y2="{yy}" '
            f'stroke="{COLORS["fit"]}" stroke-width="1.5"/>'
        )
    for t, r, aside in pts:
        fill = "none" if aside else COLORS["points"]
        stroke = "#999999" if aside else COLORS["points"]
        body.append(
            f'<circle class="{"aside" if aside else "clean"}" cx="{_fmt(fr.x(t))}" '
            f'cy="{_fmt(fr.y(r))}" r="3.5" fill="{fill}" stroke="{stroke}">'
            f"<title>{t:.0f} s: {r:.3f}{' (set aside)' if aside else ''}</title></circle>"
        )
    legend = [(COLORS["points"], "clean block"), ("#999999", "set aside")]
    legend.append(("#c0392b", f"regression above {limit:.3g}"))
    if median is not None and math.isfinite(median):
        legend.append((COLORS["fit"], "median of clean blocks"))
    return document(title, body, legend)


def self_time_shift(title: str, rows: list[tuple[str, float, float]], other: str) -> str:
    """Where the time went: each function's self time per request, OTHER's and the candidate's.

    ROWS are (function, OTHER's ms, candidate's ms), largest rise first: the
    function's name on a line, then its two bars (OTHER grey, candidate
    coloured) on one scale, and the change written after them.
    """
    rows = [(f, b, a) for f, b, a in rows if math.isfinite(b) and math.isfinite(a)]
    if not rows:
        return document(title, [f'<text x="{W / 2}" y="{H / 2}">no profiles</text>'])
    row_h, top = 40, TOP
    height = top + row_h * len(rows) + 12
    left, width = 12.0, W - 12.0 - 120.0
    most = max(max(b, a) for _, b, a in rows) or 1.0
    body = []
    for i, (function, before, after) in enumerate(rows):
        y = top + i * row_h
        body.append(f'<text x="{left}" y="{y + 10}">{escape(function)}</text>')
        for k, (ms, color, css) in enumerate(
            ((before, "#999999", "before"), (after, COLORS["points"], "after"))
        ):
            w = max(1.0, ms / most * width)
            body.append(
                f'<rect class="{css}" x="{left}" y="{_fmt(y + 15 + k * 11)}" width="{_fmt(w)}" '
                f'height="9" fill="{color}"><title>{escape(function)}: '
                f"{ms:.1f} ms per request</title></rect>"
            )
        body.append(
            f'<text x="{_fmt(left + max(before, after) / most * width + 6)}" y="{y + 32}">'
            f"{after - before:+.1f} ms</text>"
        )
    legend = [("#999999", f"{other}, ms per request"), (COLORS["points"], "candidate")]
    return document(title, body, legend, height)
