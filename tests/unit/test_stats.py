"""stats.py against figures computed another way (tables, brute force)."""

import math

import numpy as np
import pytest

from rally_keystone_bench.verdicts import stats, trend


def test_summarize_matches_numpy_and_orders_figures():
    rng = np.random.default_rng(1)
    x = rng.lognormal(-3, 0.5, 5000)
    s = stats.summarize(x)
    assert s["count"] == 5000
    assert s["p50"] == pytest.approx(np.median(x))
    assert s["p99.9"] == pytest.approx(np.percentile(x, 99.9))
    assert s["min"] <= s["p50"] <= s["p90"] <= s["p95"] <= s["p99"] <= s["p99.9"]
    assert s["p99.9"] <= s["max"] == x.max()
    assert s["mean"] == pytest.approx(x.mean())


def test_summarize_empty_gives_none():
    s = stats.summarize([])
    assert s["count"] == 0 and s["p95"] is None and s["max"] is None


@pytest.mark.parametrize(
    "df,expected",
    [(1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228), (30, 2.042)],
)
def test_t_quantile_matches_table(df, expected):
    assert trend.t_quantile(0.975, df) == pytest.approx(expected, abs=1e-3)


def test_t_quantile_two_sided_99_matches_table():
    assert trend.t_quantile(0.995, 3) == pytest.approx(5.841, abs=1e-3)
    assert trend.t_quantile(0.005, 10) == pytest.approx(-3.169, abs=1e-3)


def test_ols_recovers_slope_and_ci_covers_truth():
    rng = np.random.default_rng(2)
    covered = 0
    for _ in range(200):
        x = np.linspace(0, 60, 50)
        y = 0.05 + 0.002 * x + rng.normal(0, 0.01, x.size)
        fit = trend.ols(x, y)
        assert fit.slope == pytest.approx(np.polyfit(x, y, 1)[0])
        covered += fit.slope_ci[0] <= 0.002 <= fit.slope_ci[1]
    # A 95 % interval should cover the true slope about 190 times in 200.
    assert 180 <= covered <= 199


def test_ols_rejects_degenerate_input():
    with pytest.raises(ValueError):
        trend.ols([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError):
        trend.ols([1, 2], [1, 2])


def test_rank_average_gives_ties_their_mean_rank():
    ranks, ties = stats.rank_average(np.array([3.0, 1.0, 3.0, 2.0]))
    assert ranks.tolist() == [3.5, 1.0, 3.5, 2.0]
    assert ties == 6.0  # one pair: 2^3 - 2


def _permutation_p(a, b, n_perm, rng):
    both = np.concatenate([a, b])
    n1 = a.size
    # U is a monotone function of the rank sum; test on ranks like MWU does.
    ranks, _ = stats.rank_average(both)
    obs = abs(ranks[:n1].sum() - n1 * (both.size + 1) / 2)
    hits = 0
    for _ in range(n_perm):
        perm = rng.permutation(ranks)
        hits += abs(perm[:n1].sum() - n1 * (both.size + 1) / 2) >= obs
    return hits / n_perm


@pytest.mark.parametrize("shift", [0.0, 0.3, 0.6])
def test_mann_whitney_agrees_with_permutation_test_at_n20(shift):
    rng = np.random.default_rng(3)
    a = rng.normal(0, 1, 20)
    b = rng.normal(shift, 1, 20)
    mw = stats.mann_whitney_u(a, b)
    assert mw.exact_enough
    assert mw.p_value == pytest.approx(_permutation_p(a, b, 20000, rng), abs=0.015)


def test_mann_whitney_with_heavy_ties_agrees_with_permutation_test():
    rng = np.random.default_rng(4)
    a = rng.integers(0, 4, 30).astype(float)
    b = rng.integers(1, 5, 30).astype(float)
    mw = stats.mann_whitney_u(a, b)
    assert mw.p_value == pytest.approx(_permutation_p(a, b, 20000, rng), abs=0.015)


def test_mann_whitney_identical_constant_samples_is_not_significant():
    assert stats.mann_whitney_u([1.0] * 30, [1.0] * 30).p_value == 1.0


def test_mann_whitney_u_statistic_counts_pairs():
    # Every a below every b: U of a is 0.
    mw = stats.mann_whitney_u([1, 2, 3], [4, 5, 6, 7])
    assert mw.u == 0.0 and not mw.exact_enough


@pytest.mark.parametrize("n", [51, 50])
def test_beta_bootstrap_medians_match_brute_force_resampling(n):
    rng = np.random.default_rng(5)
    x = np.sort(rng.lognormal(0, 1, n))
    fast = stats.bootstrap_medians(x, 40000, np.random.default_rng(6))
    slow = np.median(x[rng.integers(0, n, (40000, n))], axis=1)
    for q in (0.025, 0.25, 0.5, 0.75, 0.975):
        assert np.quantile(fast, q) == pytest.approx(np.quantile(slow, q), rel=0.03)


def test_median_ratio_ci_is_reproducible_and_brackets_ratio():
    rng = np.random.default_rng(7)
    base = rng.lognormal(-3, 0.3, 300)
    cand = base * 1.3
    r1 = stats.median_ratio_ci(base, cand)
    r2 = stats.median_ratio_ci(base, cand)
    assert r1 == r2
    ratio, lo, hi = r1
    assert ratio == pytest.approx(1.3)
    assert lo <= ratio <= hi


def test_median_ratio_ci_of_different_runs_covers_one_for_same_distribution():
    rng = np.random.default_rng(8)
    ratio, lo, hi = stats.median_ratio_ci(rng.lognormal(0, 0.5, 400), rng.lognormal(0, 0.5, 400))
    assert lo < 1.0 < hi


def test_verdict_reads_like_pyperf():
    assert stats.verdict(1.31, 1e-9) == "1.31x slower"
    assert stats.verdict(1 / 1.12, 1e-9) == "1.12x faster"
    assert stats.verdict(1.31, 0.2) == "no significant change"
    assert stats.verdict(1.04, 1e-9) == "1.04x slower, below the 10% threshold"
    assert stats.verdict(math.nan, 0.0) == "not comparable"


def test_change_percent_is_symmetric():
    assert stats.change_percent(1.25) == pytest.approx(25)
    assert stats.change_percent(0.8) == pytest.approx(25)


def test_signed_rank_exact_matches_the_published_table():
    # n = 10, W- = 8: two-sided p 0.0488 (the 5 % critical value in the tables).
    r = stats.wilcoxon_signed_rank([1, 2, 3, 4, 5, 6, 7, -8, 9, 10.5])
    assert r.exact and r.n == 10
    assert abs(r.p_value - 0.048828125) < 1e-12
    # Eight differences all of one sign: p = 2 / 2**8.
    assert stats.wilcoxon_signed_rank([0.1 * i for i in range(1, 9)]).p_value == 2 / 256


def test_signed_rank_normal_approximation_for_many_pairs():
    import numpy as np

    x = np.random.default_rng(1).normal(0.3, 1, 40)
    r = stats.wilcoxon_signed_rank(x)
    assert not r.exact
    assert abs(r.p_value - 0.0183268) < 1e-6  # scipy.stats.wilcoxon(x, correction=True)


def test_signed_rank_drops_zeros_and_gives_p_1_without_differences():
    assert stats.wilcoxon_signed_rank([0.0, 0.0]).p_value == 1.0
    assert stats.wilcoxon_signed_rank([0.0, 1.0, 2.0]).n == 2


def test_median_ci_holds_the_median():
    med, lo, hi = stats.median_ci(list(range(1, 10)))
    assert med == 5.0 and lo <= 5.0 <= hi


# -- the streaming slope: add / merge / result against the batch fit -------------
def _points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = 1_700_000_000.25 + np.sort(rng.uniform(0, 120, n))
    y = 0.02 + 0.003 * (x - x[0]) + rng.normal(0, 0.004, n)
    return x, y


@pytest.mark.parametrize("x_mode", ["time"])
def test_merged_halves_give_the_batch_fit_of_all_points_past_the_warmup(x_mode):
    x, y = _points(5000, 11)
    warmup = 15.0
    rng = np.random.default_rng(12)
    half = rng.random(x.size) < 0.5
    parts = []
    for mask in (half, ~half):
        engine = trend.StreamingSlope(warmup, x_mode)
        for i in rng.permutation(np.flatnonzero(mask)):  # out of order, as Rally feeds
            engine.start(x[i])
            engine.add(x[i], y[i])
        parts.append(engine)
    merged = parts[0].merge(parts[1]).result()
    past = x >= x.min() + warmup
    batch = trend.ols(x[past] - x.min(), y[past])
    assert merged.n == int(past.sum())
    assert merged.fit.slope == pytest.approx(batch.slope, rel=1e-9)
    assert merged.fit.slope_ci[0] == pytest.approx(batch.slope_ci[0], rel=1e-9)
    assert merged.fit.slope == pytest.approx(0.003, rel=0.05)


def test_merge_moves_the_warmup_to_the_earlier_first_start():
    x, y = _points(600, 13)
    early = trend.StreamingSlope(10.0)
    late = trend.StreamingSlope(10.0)
    for xi, yi in zip(x, y, strict=True):
        target = early if xi < x[0] + 5 else late
        target.start(xi)
        target.add(xi, yi)
    alone = late.result().n  # its warm-up runs from its own first start, 5 s later
    merged = late.merge(early).result()
    assert merged.n == int((x >= x[0] + 10).sum()) > alone
    assert merged.fit.slope == pytest.approx(trend.ols(x[x >= x[0] + 10], y[x >= x[0] + 10]).slope)


def test_merging_an_empty_engine_changes_nothing():
    x, y = _points(100, 14)
    engine = trend.StreamingSlope(0.0)
    for xi, yi in zip(x, y, strict=True):
        engine.start(xi)
        engine.add(xi, yi)
    before = engine.result().fit.slope
    assert engine.merge(trend.StreamingSlope(0.0)).result().fit.slope == before
