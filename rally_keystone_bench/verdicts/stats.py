"""Statistics for latency samples, on numpy alone.

Percentiles, the Mann-Whitney U test, the Wilcoxon signed-rank test,
Fisher's exact test,
a bootstrap confidence interval of the ratio of two medians, and a verdict
that reads like pyperf's (``1.31x slower``). The slope of latency over time
is :mod:`verdicts.trend`.

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
