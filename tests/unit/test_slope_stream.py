"""The streaming slope in bounded memory, tested as Rally tests its streaming algorithms.

Each figure is compared with the same figure computed from the full list of
points in one go (``trend.ols``), and two halves merged must give the whole.
The caps (raw warm-up points, buckets) are made small here so that short
streams cross them; the real caps only change how long a stream must be.
"""

from __future__ import annotations

import numpy as np
import pytest

from rally_keystone_bench.verdicts import trend

T0 = 1_700_000_000.25


@pytest.fixture
def small_caps(monkeypatch):
    monkeypatch.setattr(trend, "RAW_POINTS", 200)
    monkeypatch.setattr(trend, "BUCKETS", 16)
    monkeypatch.setattr(trend, "_FLUSH_POINTS", 64)


def points(n: int, seconds: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = T0 + np.sort(rng.uniform(0.0, seconds, n))
    x[0] = T0
    y = 0.02 + 0.002 * (x - T0) + rng.normal(0.0, 0.004, n)
    return x, y


def rally_order(idx: np.ndarray, seed: int, chunk: int = 10, block: int = 4) -> np.ndarray:
    """Rally's delivery: chunks of CHUNK in order, shuffled within blocks; the first last."""
    rng = np.random.default_rng(seed)
    first, rest = idx[0], idx[1:]
    chunks = [rest[i : i + chunk] for i in range(0, rest.size, chunk)]
    out = []
    for i in range(0, len(chunks), block):
        group = chunks[i : i + block]
        out += [group[j] for j in rng.permutation(len(group))]
    return np.concatenate([*out, [first]])


def fed(order, x, y, warmup: float, x_mode: str = "time") -> trend.StreamingSlope:
    engine = trend.StreamingSlope(warmup, x_mode)
    for i in order:
        engine.start(x[i])
        engine.add(x[i], y[i])
    return engine


def batch(x: np.ndarray, y: np.ndarray, warmup: float) -> trend.LinearFit:
    past = x >= x.min() + warmup
    return trend.ols(x[past] - x.min(), y[past])


def test_in_order_stream_past_both_caps_gives_the_batch_fit(small_caps):
    x, y = points(3000, 300, 1)  # 300 s: buckets double to 32 s; the warm-up spills
    engine = fed(range(x.size), x, y, warmup=40.0)
    got, want = engine.result(), batch(x, y, 40.0)
    assert engine.width >= 16
    assert engine.held()["raw"] <= trend.RAW_POINTS
    assert engine.held()["buckets"] <= trend.BUCKETS
    assert got.n == want.n
    assert got.fit.slope == pytest.approx(want.slope, rel=1e-9)
    assert got.fit.slope_ci[1] == pytest.approx(want.slope_ci[1], rel=1e-9)
    assert got.fit.r2 == pytest.approx(want.r2, rel=1e-9)


def test_first_start_arriving_last_is_exact_while_its_bucket_is_raw(small_caps):
    x, y = points(3000, 300, 2)
    engine = fed(rally_order(np.arange(x.size), 3), x, y, warmup=40.0)
    assert engine.held()["raw"] <= trend.RAW_POINTS
    got, want = engine.result(), batch(x, y, 40.0)
    assert got.n == want.n
    assert got.fit.slope == pytest.approx(want.slope, rel=1e-9)


def test_a_spilled_boundary_bucket_counts_whole_or_not_at_all(small_caps, monkeypatch):
    # The points from 20 s on arrive first, so the boundary first sits at 50 s;
    # the bucket that the true boundary (30.3 s) cuts is spilled before the
    # earlier points arrive, so it counts by its mean start: one second's points.
    monkeypatch.setattr(trend, "BUCKETS", 1024)
    x, y = points(3000, 150, 4)
    late = x >= T0 + 20
    engine = fed(np.r_[np.flatnonzero(late), np.flatnonzero(~late)], x, y, warmup=30.3)
    got, want = engine.result(), batch(x, y, 30.3)
    assert engine.width == 1
    in_bucket = int(((x >= T0 + 30) & (x < T0 + 31)).sum())
    assert got.n != want.n
    assert abs(got.n - want.n) <= in_bucket
    assert got.fit.slope == pytest.approx(want.slope, rel=0.01)


@pytest.mark.parametrize("x_mode", ["time", "iteration"])
def test_merged_halves_give_the_fit_of_the_whole(small_caps, x_mode):
    x, y = points(4000, 400, 5)
    rng = np.random.default_rng(6)
    half = rng.random(x.size) < 0.5
    a = fed(rally_order(np.flatnonzero(half), 1), x, y, 50.0, x_mode)
    b = fed(rally_order(np.flatnonzero(~half), 2), x, y, 50.0, x_mode)
    whole = fed(rally_order(np.arange(x.size), 3), x, y, 50.0, x_mode)
    merged = a.merge(b)
    assert merged.held()["buckets"] <= trend.BUCKETS
    assert merged.width == whole.width
    got, want = merged.result(), whole.result()
    assert got.n == want.n
    assert got.fit.slope == pytest.approx(want.fit.slope, rel=1e-9)
    if x_mode == "time":
        assert got.fit.slope == pytest.approx(batch(x, y, 50.0).slope, rel=1e-9)


def test_merge_of_a_short_half_into_a_long_one_takes_the_wider_buckets(small_caps):
    x, y = points(3000, 600, 7)
    short = x < T0 + 60
    a = fed(np.flatnonzero(short), x, y, 20.0)
    b = fed(np.flatnonzero(~short), x, y, 20.0)
    assert a.width < b.width
    got = a.merge(b).result()
    assert a.width == b.width
    want = batch(x, y, 20.0)
    assert got.n == want.n
    assert got.fit.slope == pytest.approx(want.slope, rel=1e-9)


def test_iteration_ranks_are_mid_ranks_of_the_buckets(small_caps):
    x, y = points(2000, 200, 8)
    engine = fed(rally_order(np.arange(x.size), 9), x, y, 10.0, "iteration")
    got = engine.result()
    past = x >= T0 + 10
    keys = np.floor(x[past] / engine.width)
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    mid = np.r_[0, np.cumsum(counts)[:-1]][inverse] + (counts[inverse] - 1) / 2
    assert got.n == int(past.sum())
    assert got.fit.slope == pytest.approx(trend.ols(mid, y[past]).slope, rel=1e-9)


def test_what_it_holds_does_not_grow_with_the_stream():
    held = []
    for n in (100_000, 400_000):
        x, y = points(n, n / 2000, 10)  # 2000 points per second
        engine = fed(range(n), x, y, warmup=30.0)
        engine.result()
        held.append(engine.held())
    for h in held:
        assert h["raw"] <= trend.RAW_POINTS
        assert h["buckets"] <= trend.BUCKETS
    assert held[1]["raw"] <= held[0]["raw"]
