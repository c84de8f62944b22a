"""Change points in a series of runs: E-divisive means with a permutation test.

The method of Matteson and James ("A Nonparametric Approach for Multiple
Change Point Analysis of Multivariate Data", 2014) as Apache Otava (Hunter)
and MongoDB's signal-processing-algorithms apply it to benchmark history:
split a segment where the energy distance between its two sides, weighted by
their sizes, is largest; keep the split only when fewer than ``alpha`` of
random shuffles of that segment reach as large a statistic; repeat on every
segment until no split is significant. Numbers only: no store, no output.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class ChangePointSettings:
    """alpha: the permutation test's level; permutations: shuffles per test;
    min_size: fewest runs on each side of a split; min_change: the smallest
    relative change of the mean reported (0: every significant one); seed:
    the shuffles' seed, so that one history gives one answer."""

    alpha: float = 0.01
    permutations: int = 199
    min_size: int = 3
    min_change: float = 0.0
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class ChangePoint:
    """A change before run ``index`` (0-based): runs [start, index) vs [index, end)."""

    index: int
    mean_before: float
    mean_after: float
    p_value: float
    statistic: float

    @property
    def relative_change(self) -> float:
        if self.mean_before == 0:
            return float("inf") if self.mean_after else 0.0
        return (self.mean_after - self.mean_before) / abs(self.mean_before)


def _q_grid(dist: np.ndarray, min_size: int) -> np.ndarray:
    """Q(tau, kappa) of a segment from its distance matrix: the left side [0, tau) against
    the right side [tau, kappa), for every pair; -inf where a side is too small.

    Letting the right side end before the segment does (kappa) is what finds a
    step that goes up and comes back: the whole rest would mix both levels.
    """
    n = dist.shape[0]
    size = max(min_size, 2)
    s = np.zeros((n + 1, n + 1))
    s[1:, 1:] = dist.cumsum(axis=0).cumsum(axis=1)
    tau, kappa = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    ok = (tau >= size) & (kappa - tau >= size)
    t, k = tau[ok], kappa[ok]
    within_x = s[t, t]
    cross = s[t, k] - within_x
    within_y = s[k, k] - 2 * s[t, k] + within_x
    m, r = t.astype(float), (k - t).astype(float)
    energy = 2 * cross / (m * r) - within_x / (m * (m - 1)) - within_y / (r * (r - 1))
    q = np.full((n + 1, n + 1), -np.inf)
    q[ok] = m * r / (m + r) * energy
    return q


def best_split(values: np.ndarray, min_size: int) -> tuple[int, float] | None:
    """The split of VALUES with the largest statistic, as (tau, Q); None when too short."""
    if values.size < 2 * max(min_size, 2):
        return None
    dist = np.abs(values[:, None] - values[None, :])
    q = _q_grid(dist, min_size)
    tau, _ = np.unravel_index(int(np.argmax(q)), q.shape)
    return int(tau), float(q.max())


def permutation_p_value(
    values: np.ndarray, observed: float, settings: ChangePointSettings, rng: np.random.Generator
) -> float:
    """The share of shuffles of VALUES whose best split reaches OBSERVED (with the +1 of
    a permutation test, so never 0)."""
    dist = np.abs(values[:, None] - values[None, :])
    reached = 0
    for _ in range(settings.permutations):
        order = rng.permutation(values.size)
        q = _q_grid(dist[np.ix_(order, order)], settings.min_size)
        if float(q.max()) >= observed - 1e-12 * max(1.0, abs(observed)):
            reached += 1
    return (reached + 1) / (settings.permutations + 1)


def _bounds(points: Sequence[int], n: int) -> list[tuple[int, int]]:
    edges = [0, *sorted(points), n]
    return list(zip(edges[:-1], edges[1:], strict=True))


def find_change_points(
    series: Sequence[float], settings: ChangePointSettings | None = None
) -> list[ChangePoint]:
    """Every significant change point of SERIES, in run order."""
    settings = settings or ChangePointSettings()
    values = np.asarray(series, dtype=float)
    rng = np.random.default_rng(settings.seed)
    found: dict[int, tuple[float, float]] = {}
    refused: set[tuple[int, int]] = set()
    while True:
        candidates = []
        for start, end in _bounds(list(found), values.size):
            if (start, end) in refused:
                continue
            split = best_split(values[start:end], settings.min_size)
            if split is not None:
                candidates.append((split[1], start, end, start + split[0]))
        if not candidates:
            break
        q, start, end, index = max(candidates)
        p = permutation_p_value(values[start:end], q, settings, rng)
        if p > settings.alpha:
            refused.add((start, end))
            continue
        found[index] = (p, q)
    return _described(values, found, settings)


def _described(
    values: np.ndarray, found: dict[int, tuple[float, float]], settings: ChangePointSettings
) -> list[ChangePoint]:
    """Each change point with the means of the segments on either side of it."""
    points = sorted(found)
    edges = [0, *points, values.size]
    out = []
    for i, index in enumerate(points, 1):
        before = values[edges[i - 1] : index]
        after = values[index : edges[i + 1]]
        p, q = found[index]
        cp = ChangePoint(index, float(before.mean()), float(after.mean()), p, q)
        if abs(cp.relative_change) >= settings.min_change:
            out.append(cp)
    return out
