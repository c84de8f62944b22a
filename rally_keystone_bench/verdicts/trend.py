"""The slope of latency over time: one least-squares fit, batch or streaming, on numpy alone.

The fit is drawn from moments, so that a streaming fit and a batch fit are
the same line, with a confidence interval on its slope (Student's t). The
streaming slope (``StreamingSlope``: add / merge / result, as Rally's
streaming_algorithms) keeps per-second moments, not the raw points.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported inside functions: Rally imports us at start
    import numpy as np


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Cumulative distribution function of Student's t."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Quantile ``p`` of Student's t distribution with ``df`` degrees of freedom.

    Starts from the Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5) and
    refines it with Newton steps on :func:`t_cdf`.
    """
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if df <= 0:
        raise ValueError("df must be positive")
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = NormalDist().inv_cdf(p)
    z3, z5, z7, z9 = z**3, z**5, z**7, z**9
    g1 = (z3 + z) / 4
    g2 = (5 * z5 + 16 * z3 + 3 * z) / 96
    g3 = (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / 384
    g4 = (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / 92160
    t = z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    for _ in range(8):
        pdf = math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = (t_cdf(t, df) - p) / pdf
        t -= step
        if abs(step) < 1e-12 * max(1.0, abs(t)):
            break
    return t


@dataclasses.dataclass(frozen=True)
class LinearFit:
    """y = intercept + slope * x, with a confidence interval on the slope.

    A fit of fewer than 3 points, or of points all at one x, has NaN
    figures; ``n`` says how many points it saw.
    """

    slope: float
    intercept: float
    slope_stderr: float
    slope_ci: tuple[float, float]
    confidence: float
    n: int
    r2: float = math.nan

    @property
    def defined(self) -> bool:
        return not math.isnan(self.slope)


# -- least squares from moments --------------------------------------------------
# A moment record: [n, mean_x, mean_y, M_xx, M_yy, C_xy]; the one least-squares
# fit of the package (batch and streaming) is drawn from it.
Moments = list
NO_MOMENTS: Moments = [0, 0.0, 0.0, 0.0, 0.0, 0.0]


def merge_moments(a: Moments, b: Moments) -> Moments:
    """Chan et al.'s pairwise update of counts, means and co-moments."""
    na, nb = a[0], b[0]
    if nb == 0:
        return a
    if na == 0:
        return list(b)
    n = na + nb
    dx = b[1] - a[1]
    dy = b[2] - a[2]
    f = na * nb / n
    return [
        n,
        a[1] + dx * nb / n,
        a[2] + dy * nb / n,
        a[3] + b[3] + dx * dx * f,
        a[4] + b[4] + dy * dy * f,
        a[5] + b[5] + dx * dy * f,
    ]


def moments_of(x: np.ndarray, y: np.ndarray) -> Moments:
    """The moment record of points (x, y), two-pass (centred) for accuracy."""
    n = int(x.size)
    if n == 0:
        return list(NO_MOMENTS)
    xm, ym = float(x.mean()), float(y.mean())
    dx, dy = x - xm, y - ym
    return [n, xm, ym, float(dx @ dx), float(dy @ dy), float(dx @ dy)]


def line(m: Moments, confidence: float = 0.95) -> LinearFit:
    """The least-squares line of a moment record, with a CONFIDENCE CI of its slope."""
    n = int(m[0])
    if n < 3 or m[3] <= 0.0:
        nan = math.nan
        return LinearFit(nan, nan, nan, (nan, nan), confidence, n)
    slope = m[5] / m[3]
    intercept = m[2] - slope * m[1]
    sse = max(m[4] - slope * m[5], 0.0)
    r2 = (m[5] * m[5] / (m[3] * m[4])) if m[4] > 0 else 1.0
    se = math.sqrt(sse / (n - 2) / m[3])
    half = t_quantile(0.5 + confidence / 2, n - 2) * se
    return LinearFit(slope, intercept, se, (slope - half, slope + half), confidence, n, r2)


def ols(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
) -> LinearFit:
    """Least-squares line through (x, y) and a ``confidence`` CI of its slope.

    Needs at least 3 points and two distinct x values.
    """
    import numpy as np

    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    if xa.shape != ya.shape:
        raise ValueError("x and y differ in length")
    if xa.size < 3:
        raise ValueError("a line needs at least 3 points")
    fit = line(moments_of(xa, ya), confidence)
    if not fit.defined:
        raise ValueError("all x values are equal")
    return fit


# -- the streaming slope ---------------------------------------------------------
_FLUSH_POINTS = 4096  # added points are folded in numpy chunks of this size
RAW_POINTS = 32768  # at most this many raw warm-up points are kept (512 KiB)
BUCKETS = 1024  # at most this many buckets of moments; their width doubles past it


def _group_moments(keys: np.ndarray, x: np.ndarray, y: np.ndarray):
    """Per distinct key: (keys, moments rows, min x, max x), two-pass in numpy."""
    import numpy as np

    order = np.argsort(keys, kind="stable")
    keys, x, y = keys[order], x[order], y[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    n = np.diff(np.r_[starts, keys.size]).astype(float)
    idx = np.repeat(np.arange(starts.size), n.astype(int))
    mx = np.add.reduceat(x, starts) / n
    my = np.add.reduceat(y, starts) / n
    dx = x - mx[idx]
    dy = y - my[idx]
    # second pass: correct the means by the mean residual, then re-centre
    mx += np.add.reduceat(dx, starts) / n
    my += np.add.reduceat(dy, starts) / n
    dx = x - mx[idx]
    dy = y - my[idx]
    rows = np.column_stack(
        [
            n,
            mx,
            my,
            np.add.reduceat(dx * dx, starts),
            np.add.reduceat(dy * dy, starts),
            np.add.reduceat(dx * dy, starts),
        ]
    )
    return (
        keys[starts],
        rows.tolist(),
        np.minimum.reduceat(x, starts).tolist(),
        np.maximum.reduceat(x, starts).tolist(),
    )


def _merge_bucket(table: dict[int, list], key: int, row: Moments, lo: float, hi: float) -> None:
    """Merge one bucket [moments, min_x, max_x] into TABLE at KEY."""
    cur = table.get(key)
    if cur is None:
        table[key] = [row, lo, hi]
    else:
        cur[0] = merge_moments(cur[0], row)
        cur[1] = min(cur[1], lo)
        cur[2] = max(cur[2], hi)


def _add_grouped(table: dict[int, list], keys: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """Merge points into TABLE's buckets, one per distinct key."""
    if not keys.size:
        return
    uk, rows, lo, hi = _group_moments(keys, x, y)
    for k, row, mn, mx in zip(uk.tolist(), rows, lo, hi, strict=True):
        _merge_bucket(table, int(k), row, mn, mx)


def _coarsened(table: dict[int, list], ratio: int) -> dict[int, list]:
    """TABLE with buckets RATIO times wider (keys floor-divided by RATIO)."""
    if ratio == 1:
        return table
    out: dict[int, list] = {}
    for k, (m, lo, hi) in table.items():
        _merge_bucket(out, k // ratio, m, lo, hi)
    return out


@dataclasses.dataclass(frozen=True)
class SlopeResult:
    """The streaming slope's line over the points past the warm-up."""

    fit: LinearFit
    span: float  # x range of the points: seconds, or iterations - 1

    @property
    def n(self) -> int:
        return self.fit.n


class StreamingSlope:
    """Least-squares slope of latency over time past a warm-up, in bounded memory.

    ``start(ts)`` notes an iteration's start (failed ones too: the warm-up
    runs from the earliest); ``add(x, y)`` a point (a start time and a
    latency); ``merge(other)`` takes in another engine's starts and points;
    ``result()`` is the line over every point with ``x >= first + warmup``.

    State, whatever the number of points: the moments of the points past
    the boundary ``first + warmup`` in buckets of whole seconds (at most
    ``BUCKETS``; past that every bucket doubles in width), and the warm-up
    points nearest the boundary raw (at most ``RAW_POINTS``; older warm-up
    points go into buckets too). The boundary only moves earlier (Rally may
    deliver the first iteration last); while the earliest start arrives
    within the kept raw points, the line is that of ``ols`` on the same
    points, whatever the arrival order. Beyond it, the one bucket the
    boundary cuts counts wholly or not at all, by its mean start.

    ``x_mode="iteration"``: x is the rank by start time among the points;
    all points of one bucket (one second) get that bucket's mid-rank.
    """

    def __init__(self, warmup: float, x_mode: str = "time") -> None:
        from array import array

        self.warmup = warmup
        self.x_mode = x_mode
        self.first = math.inf  # earliest iteration start seen
        self.origin: float | None = None  # x origin of the moments: floor of the first start seen
        self.width = 1  # bucket width in seconds; key = floor(x / width), x absolute
        self.added = 0  # points added, ever
        self._buf_x = array("d")
        self._buf_y = array("d")
        self._past: dict[int, list] = {}  # key -> [moments, min_x, max_x], x - origin
        self._early: dict[int, list] = {}  # warm-up points beyond RAW_POINTS, same shape
        self._raw_x: list = []  # raw warm-up points (absolute x), arrays
        self._raw_y: list = []
        self._raw_n = 0
        self._sorted_at = math.inf  # the boundary when raw points were last sorted out
        self._version = 0
        self._cache: tuple[int, SlopeResult | None] | None = None

    # -- add / merge / result ------------------------------------------------
    def start(self, ts: float) -> None:
        self._version += 1
        if ts < self.first:
            self.first = ts
            if self.origin is None:
                self.origin = float(math.floor(ts))

    def add(self, x: float, y: float) -> None:
        self._version += 1
        self.added += 1
        self._buf_x.append(x)
        self._buf_y.append(y)
        if len(self._buf_x) >= _FLUSH_POINTS:
            self._flush()

    def merge(self, other: StreamingSlope) -> StreamingSlope:
        """Take in OTHER's starts and points (same warm-up and x mode)."""
        import numpy as np

        if other.origin is None:
            return self
        self._version += 1
        self.added += other.added
        other._flush()
        self.start(other.first)
        self._flush()
        if other.width > self.width:
            self._coarsen(other.width // self.width)
        ratio = self.width // other.width
        shift = other.origin - self.origin  # whole seconds: both origins are floors
        for mine, theirs in ((self._past, other._past), (self._early, other._early)):
            for k, (m, lo, hi) in theirs.items():
                row = [m[0], m[1] + shift, *m[2:]]
                _merge_bucket(mine, k // ratio, row, lo + shift, hi + shift)
        if other._raw_x:
            self._buf_x.extend(np.concatenate(other._raw_x).tolist())
            self._buf_y.extend(np.concatenate(other._raw_y).tolist())
        self._flush()
        return self

    def result(self) -> SlopeResult | None:
        """The line over every point past the warm-up so far; None without points."""
        self._flush()
        if self.origin is None:
            return None
        if self._cache is not None and self._cache[0] == self._version:
            return self._cache[1]
        buckets = self._post_warmup_buckets()
        total: Moments = list(NO_MOMENTS)
        lo, hi = math.inf, -math.inf
        if self.x_mode == "iteration":
            offset = 0
            for k in sorted(buckets):
                row = buckets[k][0]
                nb = row[0]
                mid = offset + (nb - 1) / 2.0
                total = merge_moments(total, [nb, mid, row[2], 0.0, row[4], 0.0])
                offset += int(nb)
            lo, hi = 0.0, float(max(offset - 1, 0))
        else:
            for v in buckets.values():
                total = merge_moments(total, v[0])
                lo, hi = min(lo, v[1]), max(hi, v[2])
        out = SlopeResult(line(total), hi - lo) if total[0] else None
        self._cache = (self._version, out)
        return out

    def held(self) -> dict[str, int]:
        """What the engine holds: raw points and buckets (bounded), and the bucket width."""
        return {
            "raw": self._raw_n + len(self._buf_x),
            "buckets": len(self._past) + len(self._early),
            "width": self.width,
        }

    # -- internals -----------------------------------------------------------
    def _boundary(self) -> float:
        return self.first + self.warmup

    def _flush(self) -> None:
        """Fold added points into the buckets, or keep them raw while in the warm-up."""
        import numpy as np

        if self.origin is None:
            return
        bound = self._boundary()
        if bound < self._sorted_at:  # an earlier first start: some raw points are past now
            self._sorted_at = bound
            self._sort_raw(bound)
        if self._buf_x:
            x = np.array(self._buf_x)
            y = np.array(self._buf_y)
            del self._buf_x[:], self._buf_y[:]
            self._keep(x, y, bound)
        if len(self._past) + len(self._early) > BUCKETS:
            self._coarsen(2)

    def _keep(self, x: np.ndarray, y: np.ndarray, bound: float) -> None:
        """Points whose bucket lies wholly past BOUND into buckets, the others raw."""
        import numpy as np

        keys = np.floor(x / self.width)
        out = keys > math.floor(bound / self.width)
        _add_grouped(self._past, keys[out], x[out] - self.origin, y[out])
        x, y = x[~out], y[~out]
        if x.size:
            self._raw_x.append(x)
            self._raw_y.append(y)
            self._raw_n += int(x.size)
        if self._raw_n > RAW_POINTS:
            self._spill()

    def _raw(self) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        if not self._raw_x:
            return np.empty(0), np.empty(0)
        if len(self._raw_x) > 1:
            self._raw_x = [np.concatenate(self._raw_x)]
            self._raw_y = [np.concatenate(self._raw_y)]
        return self._raw_x[0], self._raw_y[0]

    def _sort_raw(self, bound: float) -> None:
        """Raw points whose bucket now lies wholly past BOUND go into the buckets."""
        x, y = self._raw()
        self._raw_x, self._raw_y, self._raw_n = [], [], 0
        if x.size:
            self._keep(x, y, bound)

    def _spill(self) -> None:
        """Keep the RAW_POINTS // 2 latest raw points; bucket the earlier ones."""
        import numpy as np

        x, y = self._raw()
        order = np.argsort(x, kind="stable")
        cut = x.size - RAW_POINTS // 2
        early, late = order[:cut], order[cut:]
        _add_grouped(self._early, np.floor(x[early] / self.width), x[early] - self.origin, y[early])
        self._raw_x, self._raw_y, self._raw_n = [x[late]], [y[late]], int(late.size)

    def _coarsen(self, ratio: int) -> None:
        """Buckets RATIO (a power of two) times wider, until at most BUCKETS are left."""
        while True:
            self.width *= ratio
            self._past = _coarsened(self._past, ratio)
            self._early = _coarsened(self._early, ratio)
            if len(self._past) + len(self._early) <= BUCKETS:
                return
            ratio = 2

    def _post_warmup_buckets(self) -> dict[int, list]:
        """Buckets of every point past the boundary (copies: the state is left alone)."""
        import numpy as np

        merged = {k: [list(v[0]), v[1], v[2]] for k, v in self._past.items()}
        bound = self._boundary() - self.origin
        for k, (m, lo, hi) in self._early.items():
            if lo >= bound or (hi >= bound and m[1] >= bound):
                _merge_bucket(merged, k, list(m), lo, hi)
        x, y = self._raw()
        past = x >= self._boundary()
        if past.any():
            _add_grouped(merged, np.floor(x[past] / self.width), x[past] - self.origin, y[past])
        return merged
