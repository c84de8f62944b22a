"""Statistics for latency samples, on numpy alone.

Percentiles, the one least-squares fit (from moments, so that a streaming
fit and a batch fit are the same line) with a confidence interval on its
slope, the streaming slope of latency over time (``StreamingSlope``: add /
merge / result, as Rally's streaming_algorithms), the Mann-Whitney U test,
a bootstrap confidence interval of the ratio of two medians, and a verdict
that reads like pyperf's (``1.31x slower``).

Mann-Whitney U uses the normal approximation with the tie correction and a
continuity correction of 0.5. For samples of 20 or more on each side the
approximation's p-value is within about 0.005 of the exact one at the usual
levels (alpha 0.05 and 0.01); below that it is only indicative, and
:func:`mann_whitney_u` says so with ``exact_enough=False``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported inside functions: Rally imports us at start
    import numpy as np

# The percentiles every report quotes, as (label, q in percent).
PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99.9", 99.9),
)

DEFAULT_SEED = 20240611
MIN_SAMPLES_FOR_NORMAL = 20


def summarize(values: Sequence[float] | np.ndarray) -> dict[str, float | int | None]:
    """count, min, mean, p50, p90, p95, p99, p99.9 and max of ``values``.

    Empty input gives a count of 0 and None for every figure.
    """
    import numpy as np

    a = np.asarray(values, dtype=float)
    out: dict[str, float | int | None] = {"count": int(a.size)}
    keys = ["min", "mean", *(label for label, _ in PERCENTILES), "max"]
    if a.size == 0:
        out.update(dict.fromkeys(keys))
        return out
    qs = np.percentile(a, [q for _, q in PERCENTILES])
    out["min"] = float(a.min())
    out["mean"] = float(a.mean())
    for (label, _), v in zip(PERCENTILES, qs, strict=True):
        out[label] = float(v)
    out["max"] = float(a.max())
    return out


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

    def predict(self, x: float) -> float:
        return self.intercept + self.slope * x

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


@dataclasses.dataclass(frozen=True)
class MannWhitney:
    """Two-sided Mann-Whitney U test of ``a`` against ``b``."""

    u: float  # U statistic of the first sample
    z: float
    p_value: float
    exact_enough: bool  # both samples have >= MIN_SAMPLES_FOR_NORMAL values


def rank_average(values: np.ndarray) -> tuple[np.ndarray, float]:
    """Ranks from 1, ties given their average rank; and sum(t^3 - t) over ties."""
    import numpy as np

    order = np.argsort(values, kind="mergesort")
    sv = values[order]
    n = sv.size
    # Start index of each run of equal values.
    starts = np.flatnonzero(np.r_[True, sv[1:] != sv[:-1]])
    lengths = np.diff(np.r_[starts, n])
    avg = starts + (lengths + 1) / 2.0  # average 1-based rank of each run
    ranks = np.empty(n, dtype=float)
    ranks[order] = np.repeat(avg, lengths)
    t = lengths.astype(float)
    return ranks, float(np.sum(t**3 - t))


def mann_whitney_u(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> MannWhitney:
    """Mann-Whitney U, normal approximation with tie and continuity correction."""
    import numpy as np

    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    n1, n2 = int(xa.size), int(xb.size)
    if n1 == 0 or n2 == 0:
        raise ValueError("both samples need at least one value")
    ranks, ties = rank_average(np.concatenate([xa, xb]))
    r1 = float(ranks[:n1].sum())
    u1 = r1 - n1 * (n1 + 1) / 2.0
    mu = n1 * n2 / 2.0
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    exact_enough = min(n1, n2) >= MIN_SAMPLES_FOR_NORMAL
    if var <= 0:  # every value equal: nothing tells the samples apart
        return MannWhitney(u1, 0.0, 1.0, exact_enough)
    d = u1 - mu
    d = math.copysign(max(abs(d) - 0.5, 0.0), d)
    z = d / math.sqrt(var)
    p = min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))
    return MannWhitney(u1, z, p, exact_enough)


def bootstrap_medians(
    sorted_values: np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """Medians of ``n_boot`` bootstrap resamples of ``sorted_values``.

    A resample of size n drawn with replacement is F_n^-1(U_1..U_n) with U
    uniform, and F_n^-1 keeps order, so its middle order statistics are
    F_n^-1 of the middle order statistics of n uniforms, which are Beta
    distributed. Drawing those gives the bootstrap distribution of the
    median exactly, in O(n_boot) whatever n is.
    """
    import numpy as np

    n = sorted_values.size
    k = (n + 1) // 2  # 1-based rank of the (lower) middle value
    u_k = rng.beta(k, n - k + 1, size=n_boot)
    idx_k = np.minimum((u_k * n).astype(np.int64), n - 1)
    lo = sorted_values[idx_k]
    if n % 2:
        return lo
    # Next order statistic: U_(k+1) = U_(k) + (1 - U_(k)) * Beta(1, n - k).
    u_k1 = u_k + (1.0 - u_k) * rng.beta(1, n - k, size=n_boot)
    idx_k1 = np.minimum((u_k1 * n).astype(np.int64), n - 1)
    return (lo + sorted_values[idx_k1]) / 2.0


def median_ratio_ci(
    base: Sequence[float] | np.ndarray,
    cand: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    n_boot: int = 10000,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float, float]:
    """median(cand) / median(base) and its bootstrap percentile CI.

    The random generator is seeded, so the same input gives the same interval.
    Returns (ratio, low, high); ratio is nan when the base median is 0.
    """
    import numpy as np

    b = np.sort(np.asarray(base, dtype=float))
    c = np.sort(np.asarray(cand, dtype=float))
    if b.size == 0 or c.size == 0:
        raise ValueError("both samples need at least one value")
    mb, mc = float(np.median(b)), float(np.median(c))
    if mb == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    bb = bootstrap_medians(b, n_boot, rng)
    bc = bootstrap_medians(c, n_boot, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = bc / bb
    ratios = ratios[np.isfinite(ratios)]
    alpha = 1.0 - confidence
    lo, hi = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
    return mc / mb, float(lo), float(hi)


def format_ratio(ratio: float, higher_is: str = "slower", lower_is: str = "faster") -> str:
    """``1.31x slower`` for ratio 1.31, ``1.12x faster`` for ratio 1/1.12."""
    if not math.isfinite(ratio) or ratio <= 0:
        return "not comparable"
    if ratio >= 1.0:
        return f"{ratio:.2f}x {higher_is}"
    return f"{1.0 / ratio:.2f}x {lower_is}"


def change_percent(ratio: float) -> float:
    """Size of a change in percent, the same both ways: 1.25 and 0.8 give 25."""
    if ratio >= 1.0:
        return (ratio - 1.0) * 100.0
    return (1.0 / ratio - 1.0) * 100.0


def verdict(
    ratio: float,
    p_value: float,
    alpha: float = 0.01,
    threshold: float = 10.0,
    higher_is: str = "slower",
    lower_is: str = "faster",
) -> str:
    """A sentence for a change, like pyperf's.

    ``no significant change`` when the test cannot tell the samples apart at
    ``alpha``; a significant change smaller than ``threshold`` percent says so
    (``1.04x slower, below the 10% threshold``); otherwise ``1.31x slower``.
    """
    if not math.isfinite(ratio) or ratio <= 0:
        return "not comparable"
    if not (p_value < alpha):
        return "no significant change"
    text = format_ratio(ratio, higher_is, lower_is)
    if change_percent(ratio) <= threshold:
        return f"{text}, below the {threshold:g}% threshold"
    return text


@dataclasses.dataclass(frozen=True)
class SignedRank:
    """Two-sided Wilcoxon signed-rank test of paired differences against 0."""

    w_plus: float  # sum of the ranks of the positive differences
    n: int  # differences left after dropping zeros
    p_value: float
    exact: bool  # exact null distribution (n <= EXACT_SIGNED_RANK_N, no ties)


EXACT_SIGNED_RANK_N = 30


def _signed_rank_exact_cdf(w: int, n: int) -> float:
    """P(W+ <= w) under the null for n differences without ties (exact count)."""
    top = n * (n + 1) // 2
    counts = [0] * (top + 1)
    counts[0] = 1
    for k in range(1, n + 1):  # add rank k, positive or negative
        for s in range(top, k - 1, -1):
            counts[s] += counts[s - k]
    return sum(counts[: max(0, w) + 1]) / 2.0**n


def wilcoxon_signed_rank(differences: Sequence[float] | np.ndarray) -> SignedRank:
    """Wilcoxon signed-rank test: are paired differences centred on 0?

    Zero differences are dropped (Wilcoxon's rule). Up to
    EXACT_SIGNED_RANK_N differences without tied magnitudes get the exact
    null distribution; otherwise the normal approximation with the tie and
    continuity corrections. No difference left gives p = 1.
    """
    import numpy as np

    d = np.asarray(differences, dtype=float)
    d = d[np.isfinite(d) & (d != 0.0)]
    n = int(d.size)
    if n == 0:
        return SignedRank(0.0, 0, 1.0, True)
    ranks, ties = rank_average(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    if n <= EXACT_SIGNED_RANK_N and ties == 0.0:
        top = n * (n + 1) / 2.0
        low = min(w_plus, top - w_plus)
        p = min(1.0, 2.0 * _signed_rank_exact_cdf(int(round(low)), n))
        return SignedRank(w_plus, n, p, True)
    mu = n * (n + 1) / 4.0
    var = n * (n + 1) * (2 * n + 1) / 24.0 - ties / 48.0
    if var <= 0:
        return SignedRank(w_plus, n, 1.0, False)
    dev = max(abs(w_plus - mu) - 0.5, 0.0)
    p = min(1.0, math.erfc(dev / math.sqrt(var) / math.sqrt(2.0)))
    return SignedRank(w_plus, n, p, False)


def median_ci(
    values: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    n_boot: int = 10000,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float, float]:
    """The median of VALUES and its bootstrap percentile CI: (median, low, high).

    Seeded, so the same input gives the same interval; empty input gives nans.
    """
    import numpy as np

    a = np.sort(np.asarray(values, dtype=float))
    a = a[np.isfinite(a)]
    if a.size == 0:
        return math.nan, math.nan, math.nan
    meds = bootstrap_medians(a, n_boot, np.random.default_rng(seed))
    alpha = 1.0 - confidence
    lo, hi = np.quantile(meds, [alpha / 2, 1 - alpha / 2])
    return float(np.median(a)), float(lo), float(hi)


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact_greater(failed_a: int, n_a: int, failed_b: int, n_b: int) -> float:
    """One-sided Fisher exact test: is B's failure proportion greater than A's?

    The p-value is P(X >= failed_b) for X hypergeometric with the table's
    margins (n_a + n_b trials, failed_a + failed_b failures, n_b drawn). The
    sum walks away from the mode with the ratio of neighbouring terms and
    stops when they no longer count, so 10^5 trials a side take milliseconds.
    """
    if not (0 <= failed_a <= n_a and 0 <= failed_b <= n_b):
        raise ValueError("failures must be between 0 and the number of trials")
    k = failed_a + failed_b
    n = n_a + n_b
    lo, hi = max(0, k - n_a), min(k, n_b)
    if failed_b <= lo:
        return 1.0
    log_denominator = _log_comb(n, k)

    def pmf(x: int) -> float:
        return math.exp(_log_comb(n_b, x) + _log_comb(n_a, k - x) - log_denominator)

    mode = (n_b + 1) * (k + 1) // (n + 2)
    if failed_b > mode:  # upper tail, terms decreasing from failed_b on
        x, term, total = failed_b, pmf(failed_b), 0.0
        while x <= hi:
            total += term
            if term < total * 1e-17:
                break
            term *= (n_b - x) * (k - x) / ((x + 1) * (n_a - k + x + 1))
            x += 1
        return min(1.0, total)
    # failed_b at or below the mode: 1 - P(X <= failed_b - 1), terms decreasing downwards.
    x, term, total = failed_b - 1, pmf(failed_b - 1), 0.0
    while x >= lo:
        total += term
        if term < total * 1e-17:
            break
        term *= x * (n_a - k + x) / ((n_b - x + 1) * (k - x + 1))
        x -= 1
    return min(1.0, max(0.0, 1.0 - total))


# -- the streaming slope ---------------------------------------------------------
_FLUSH_POINTS = 4096  # raw points are folded into the per-second moments in numpy chunks


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


def _add_grouped(seconds: dict[int, list], keys: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """Merge points into per-second records [moments, min_x, max_x]."""
    uk, rows, lo, hi = _group_moments(keys, x, y)
    for k, row, mn, mx in zip(uk.tolist(), rows, lo, hi, strict=True):
        cur = seconds.get(int(k))
        if cur is None:
            seconds[int(k)] = [row, mn, mx]
        else:
            cur[0] = merge_moments(cur[0], row)
            cur[1] = min(cur[1], mn)
            cur[2] = max(cur[2], mx)


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
    latency); ``merge(other)`` takes in another engine's points;
    ``result()`` is the line over every point with ``x >= first + warmup``,
    the same line as ``ols`` on those points whatever the arrival order.

    It keeps, per whole second of x (from a fixed origin), the moments of
    the points whose second lies wholly after the boundary ``first +
    warmup`` (which can only move earlier, so such a point is past the
    warm-up for good), and the raw points of the seconds not yet wholly past
    it (the warm-up's). When an earlier first start arrives, the points now
    wholly past the boundary move into the seconds.

    ``x_mode="iteration"``: x is the rank by start time among the points;
    all points of one second get that second's mid-rank.
    """

    def __init__(self, warmup: float, x_mode: str = "time") -> None:
        self.warmup = warmup
        self.x_mode = x_mode
        self.first = math.inf  # earliest iteration start seen
        self.origin: float | None = None  # fixed x origin: floor of the first start seen
        self._buf_x: list[float] = []
        self._buf_y: list[float] = []
        self._seconds: dict[int, list] = {}  # second -> [moments, min_x, max_x]
        self._zone_x: list = []  # raw points not yet wholly past the boundary (absolute x)
        self._zone_y: list = []
        self._zone_key: float = math.inf  # boundary second at the last fold
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
        self._buf_x.append(x)
        self._buf_y.append(y)

    @property
    def pending(self) -> int:
        """Points added since the last fold."""
        return len(self._buf_x)

    def merge(self, other: StreamingSlope) -> StreamingSlope:
        """Take in OTHER's starts and points (same warm-up and x mode)."""
        import numpy as np

        if other.origin is None:
            return self
        self._version += 1
        other._flush()
        self.start(other.first)
        self._flush()
        shift = other.origin - self.origin  # whole seconds: both origins are floors
        for k, (m, lo, hi) in other._seconds.items():
            row = [m[0], m[1] + shift, *m[2:]]
            key = int(k + shift)
            cur = self._seconds.get(key)
            if cur is None:
                self._seconds[key] = [row, lo + shift, hi + shift]
            else:
                cur[0] = merge_moments(cur[0], row)
                cur[1], cur[2] = min(cur[1], lo + shift), max(cur[2], hi + shift)
        if other._zone_x:
            self._buf_x.extend(np.concatenate(other._zone_x).tolist())
            self._buf_y.extend(np.concatenate(other._zone_y).tolist())
        self._flush()
        return self

    def result(self) -> SlopeResult | None:
        """The line over every point past the warm-up so far; None without points."""
        self._flush()
        if self.origin is None:
            return None
        if self._cache is not None and self._cache[0] == self._version:
            return self._cache[1]
        seconds = self._post_warmup_seconds()
        total: Moments = list(NO_MOMENTS)
        lo, hi = math.inf, -math.inf
        if self.x_mode == "iteration":
            offset = 0
            for k in sorted(seconds):
                row = seconds[k][0]
                nb = row[0]
                mid = offset + (nb - 1) / 2.0
                total = merge_moments(total, [nb, mid, row[2], 0.0, row[4], 0.0])
                offset += int(nb)
            lo, hi = 0.0, float(max(offset - 1, 0))
        else:
            for v in seconds.values():
                total = merge_moments(total, v[0])
                lo, hi = min(lo, v[1]), max(hi, v[2])
        out = SlopeResult(line(total), hi - lo) if total[0] else None
        self._cache = (self._version, out)
        return out

    # -- internals -----------------------------------------------------------
    def _boundary(self) -> float:
        return self.first + self.warmup

    def _boundary_key(self) -> float:
        return math.floor(self._boundary() - self.origin)

    def _flush(self) -> None:
        """Fold buffered points into the seconds, or keep them raw in the zone."""
        import numpy as np

        if self.origin is None:
            return
        bkey = self._boundary_key()
        if bkey < self._zone_key:
            # an earlier first start arrived: the zone shrinks
            self._fold_zone(bkey)
            self._zone_key = bkey
        if self._buf_x:
            x = np.array(self._buf_x)
            y = np.array(self._buf_y)
            self._buf_x = []
            self._buf_y = []
            keys = np.floor(x - self.origin)
            out = keys > bkey
            if out.any():
                _add_grouped(self._seconds, keys[out], x[out] - self.origin, y[out])
                x, y = x[~out], y[~out]
            if x.size:
                self._zone_x.append(x)
                self._zone_y.append(y)

    def _fold_zone(self, bkey: float) -> None:
        """Move zone points whose second lies wholly after the boundary into the seconds."""
        import numpy as np

        if not self._zone_x:
            return
        x = np.concatenate(self._zone_x) if len(self._zone_x) > 1 else self._zone_x[0]
        y = np.concatenate(self._zone_y) if len(self._zone_y) > 1 else self._zone_y[0]
        keys = np.floor(x - self.origin)
        out = keys > bkey
        if out.any():
            _add_grouped(self._seconds, keys[out], x[out] - self.origin, y[out])
            keep = ~out
            x, y = x[keep], y[keep]
        self._zone_x = [x] if x.size else []
        self._zone_y = [y] if y.size else []

    def _post_warmup_seconds(self) -> dict[int, list]:
        """Seconds plus the zone points at or past the boundary, grouped by second."""
        import numpy as np

        merged = {k: [list(v[0]), v[1], v[2]] for k, v in self._seconds.items()}
        if self._zone_x:
            x = np.concatenate(self._zone_x)
            y = np.concatenate(self._zone_y)
            past = x >= self._boundary()
            if past.any():
                xs = x[past] - self.origin
                _add_grouped(merged, np.floor(xs), xs, y[past])
        return merged
