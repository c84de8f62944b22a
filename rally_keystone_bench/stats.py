"""Statistics for latency samples, on numpy alone.

Percentiles, an ordinary least-squares fit with a confidence interval on its
slope, the Mann-Whitney U test, a bootstrap confidence interval of the ratio
of two medians, and a verdict that reads like pyperf's (``1.31x slower``).

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
    """y = intercept + slope * x, with a confidence interval on the slope."""

    slope: float
    intercept: float
    slope_stderr: float
    slope_ci: tuple[float, float]
    confidence: float
    n: int

    def predict(self, x: float) -> float:
        return self.intercept + self.slope * x


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
    n = int(xa.size)
    if n < 3:
        raise ValueError("a line needs at least 3 points")
    xm, ym = xa.mean(), ya.mean()
    dx = xa - xm
    sxx = float(dx @ dx)
    if sxx == 0.0:
        raise ValueError("all x values are equal")
    slope = float(dx @ (ya - ym)) / sxx
    intercept = float(ym - slope * xm)
    resid = ya - (intercept + slope * xa)
    s2 = float(resid @ resid) / (n - 2)
    se = math.sqrt(s2 / sxx)
    t = t_quantile(0.5 + confidence / 2, n - 2)
    return LinearFit(slope, intercept, se, (slope - t * se, slope + t * se), confidence, n)


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
