"""The latency_slope SLA on synthetic streams whose slope is known."""

from __future__ import annotations

import random

import numpy as np
import pytest
from rally.plugins.common import validators  # noqa: F401  (registers "jsonschema")
from rally.task import sla as rally_sla

from rally_keystone_bench.plugins.sla import latency_slope
from rally_keystone_bench.plugins.sla.latency_slope import LatencySlope
from rally_keystone_bench.verdicts import trend

T0 = 1_700_000_000.25


def make_stream(
    n: int,
    seconds: float,
    slope: float = 0.0,
    noise: float = 0.0,
    base: float = 0.05,
    seed: int = 0,
    fail_every: int = 0,
) -> list[dict]:
    """n iterations spread at random over `seconds`, latency = base + slope*t + noise."""
    rng = np.random.default_rng(seed)
    ts = T0 + np.sort(rng.uniform(0.0, seconds, n))
    ts[0] = T0
    ys = base + slope * (ts - T0) + rng.normal(0.0, noise, n) if noise else base + slope * (ts - T0)
    out = []
    for i, (t, y) in enumerate(zip(ts.tolist(), ys.tolist(), strict=True)):
        failed = fail_every and i % fail_every == fail_every - 1
        out.append(
            {
                "timestamp": t,
                "duration": y,
                "idle_duration": 0.0,
                "error": ["HttpError", "500", "tb"] if failed else [],
                "output": {"additive": [], "complete": []},
                "atomic_actions": [],
            }
        )
    return out


def out_of_order(its: list[dict], processes: int = 4, batch: int = 23, seed: int = 1) -> list:
    """Rally's delivery: per-process sorted batches, interleaved; the first iteration last."""
    first, rest = its[0], its[1:]
    batches = []
    for p in range(processes):
        mine = rest[p::processes]
        batches += [mine[i : i + batch] for i in range(0, len(mine), batch)]
    random.Random(seed).shuffle(batches)
    return [it for b in batches for it in b] + [first]


def feed(config: dict, its: list[dict]) -> tuple[LatencySlope, list[bool]]:
    s = LatencySlope(config)
    returned = [s.add_iteration(it) for it in its]
    return s, returned


def reference(its: list[dict], warmup: float) -> tuple[np.ndarray, np.ndarray]:
    """The post-warm-up points of successful iterations, x relative to T0."""
    first = min(it["timestamp"] for it in its)
    pts = [
        (it["timestamp"], it["duration"])
        for it in its
        if not it["error"] and it["timestamp"] >= first + warmup
    ]
    x = np.array([p[0] for p in pts]) - T0
    y = np.array([p[1] for p in pts])
    return x, y


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def test_flat_stream_passes_with_a_slope_near_zero():
    its = make_stream(2000, 120, slope=0.0, noise=0.005)
    s, returned = feed({"warmup": 20}, its)
    res = s.result()
    fit = s.fit()
    assert res["success"] is True
    assert all(returned)
    assert fit.ci[0] <= 0.0 <= fit.ci[1]
    assert abs(fit.slope) < 1e-4
    assert "Passed (max 0.01)" in res["detail"]


def test_five_ms_per_second_is_measured_and_judged_against_max_slope():
    its = make_stream(3000, 100, slope=0.005, noise=0.002)
    ok, _ = feed({"warmup": 10}, its)
    strict, _ = feed({"warmup": 10, "max_slope": 0.001}, its)
    assert ok.fit().slope == pytest.approx(0.005, rel=0.02)
    assert ok.result()["success"] is True
    res = strict.result()
    assert res["success"] is False
    assert float(res["detail"].split()[1]) == pytest.approx(0.005, rel=0.02)
    assert "Failed (max 0.001)" in res["detail"]
    # 90 s window at 5 ms/s: the fit predicts about +450 ms
    growth = float(res["detail"].split(", +")[1].split(" ms")[0])
    assert growth == pytest.approx(450, rel=0.03)


def test_noisy_stream_equals_polyfit_and_its_ci_covers_the_truth():
    its = make_stream(5000, 300, slope=0.0007, noise=0.05, seed=3)
    s, _ = feed({"warmup": 60}, its)
    x, y = reference(its, 60)
    slope, intercept = np.polyfit(x, y, 1)
    fit = s.fit()
    assert fit.n == x.size
    assert rel(fit.slope, slope) < 1e-9
    assert fit.ci[0] < 0.0007 < fit.ci[1]
    r2 = np.corrcoef(x, y)[0, 1] ** 2
    assert fit.r2 == pytest.approx(r2, rel=1e-9)


def test_out_of_order_batches_with_the_first_iteration_last_are_exact():
    its = make_stream(6000, 200, slope=0.001, noise=0.01, seed=7)
    # points on and around the warm-up boundary, which lies inside a second
    for i, it in enumerate(its[1:40]):
        it["timestamp"] = T0 + 30.0 + (i - 20) * 1e-3
    its.sort(key=lambda it: it["timestamp"])
    shuffled = out_of_order(its)
    assert shuffled[-1]["timestamp"] == T0  # the boundary moves at the very end
    s, returned = feed({"warmup": 30}, shuffled)
    in_order, _ = feed({"warmup": 30}, its)
    x, y = reference(its, 30)
    slope, _ = np.polyfit(x, y, 1)
    assert all(returned)
    assert s.fit().n == in_order.fit().n == x.size
    assert rel(s.fit().slope, slope) < 1e-9
    assert rel(in_order.fit().slope, slope) < 1e-9


def test_warmup_is_measured_from_the_first_iteration_even_a_failed_one():
    its = make_stream(1000, 100, seed=2)
    its[0]["error"] = ["HttpError", "500", "tb"]
    s, _ = feed({"warmup": 50}, out_of_order(its))
    x, _ = reference(its, 50)
    assert s.fit().n == x.size
    assert "1 failed iterations not fitted" in s.result()["detail"]


def test_all_iterations_failed_is_a_failure_for_lack_of_data():
    its = make_stream(200, 60, fail_every=1)
    s, returned = feed({"warmup": 10}, its)
    res = s.result()
    assert all(returned)
    assert res["success"] is False
    assert res["detail"].startswith("not enough data: 0 of 30 points past the 10 s warm-up")
    assert "200 failed iterations not fitted" in res["detail"]


def test_fewer_than_min_iterations_neither_passes_nor_aborts(monkeypatch):
    monkeypatch.setattr(latency_slope, "_FLUSH_POINTS", 1)
    monkeypatch.setattr(latency_slope, "_CHECK_INTERVAL_S", 0.0)
    # a steep slope, but only 12 points past the warm-up
    its = make_stream(24, 20, slope=1.0)
    s, returned = feed({"warmup": 10}, its)
    res = s.result()
    assert all(returned)  # never asks Rally to abort on too little data
    assert res["success"] is False
    n = s.fit().n
    assert 0 < n < 30
    assert res["detail"].startswith(f"not enough data: {n} of 30 points")


def test_a_clear_degradation_aborts_once_there_is_enough_data(monkeypatch):
    monkeypatch.setattr(latency_slope, "_FLUSH_POINTS", 10)
    monkeypatch.setattr(latency_slope, "_CHECK_INTERVAL_S", 0.0)
    its = make_stream(400, 40, slope=0.05, noise=0.001)
    s, returned = feed({"warmup": 5}, its)
    assert returned[0] is True
    assert returned[-1] is False
    first_false = returned.index(False)
    first = its[0]["timestamp"]
    past = sum(1 for it in its[: first_false + 1] if it["timestamp"] >= first + 5)
    assert past >= 30


def test_nested_atomic_actions_are_points_at_their_own_start():
    rng = np.random.default_rng(4)
    its = []
    expected = []
    for i in range(300):
        t0 = T0 + i * 0.2
        children = []
        for j in range(3):
            st = t0 + 0.01 + j * 0.05
            d = 0.02 + 0.002 * (st - T0) + rng.normal(0, 0.001)
            children.append(
                {
                    "name": "keystone.issue_token",
                    "started_at": st,
                    "finished_at": st + d,
                    "children": [],
                }
            )
            expected.append((st, d))
        its.append(
            {
                "timestamp": t0,
                "duration": 0.2,
                "error": [],
                "atomic_actions": [
                    {
                        "name": "concurrent",
                        "started_at": t0,
                        "finished_at": t0 + 0.2,
                        "children": children,
                    }
                ],
            }
        )
    s, _ = feed({"warmup": 10, "action": "keystone.issue_token"}, its)
    pts = [(st, d) for st, d in expected if st >= T0 + 10]
    x = np.array([p[0] for p in pts]) - T0
    y = np.array([st + d - st for st, d in pts])
    slope, _ = np.polyfit(x, y, 1)
    assert s.fit().n == len(pts) == 3 * 250
    assert rel(s.fit().slope, slope) < 1e-9
    assert s.result()["detail"].startswith("keystone.issue_token: slope 0.002")


def test_x_iteration_uses_the_rank_by_start_time():
    # at most one start per second: the mid-rank is the true rank
    sparse = make_stream(200, 1000, slope=0.0001, noise=0.001, seed=5)
    for i, it in enumerate(sparse):
        it["timestamp"] = T0 + i * 1.0 + 0.5
        it["duration"] = 0.05 + 0.0001 * i + random.Random(i).gauss(0, 0.001)
    s, _ = feed({"warmup": 20, "x": "iteration"}, out_of_order(sparse))
    _, y = reference(sparse, 20)
    slope, _ = np.polyfit(np.arange(y.size, dtype=float), y, 1)
    assert rel(s.fit().slope, slope) < 1e-9
    assert s.fit().slope == pytest.approx(0.0001, rel=0.05)  # 1 iteration per second
    assert "s/iteration" in s.result()["detail"]

    # many starts per second: every point of a second gets that second's mid-rank
    dense = make_stream(3000, 60, slope=0.001, noise=0.001, seed=6)
    s, _ = feed({"warmup": 10, "x": "iteration"}, out_of_order(dense))
    x, y = reference(dense, 10)
    keys = np.floor(x + T0 - s.engine.origin)
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    offsets = np.r_[0, np.cumsum(counts)[:-1]]
    mid = offsets[inverse] + (counts[inverse] - 1) / 2
    slope, _ = np.polyfit(mid, y, 1)
    assert rel(s.fit().slope, slope) < 1e-9


def test_what_the_sla_holds_is_bounded_whatever_the_run_length():
    held = []
    for n, seconds in ((4_000, 400), (16_000, 1600)):
        s, _ = feed({"warmup": 20}, make_stream(n, seconds, seed=8))
        s.fit()
        held.append(s.engine.held())
    for h in held:
        assert h["raw"] <= 250  # the warm-up's 20 s at 10 per second, under the cap
        assert h["buckets"] <= trend.BUCKETS
    assert held[1]["width"] == 2  # 1600 s: buckets of 2 s keep at most BUCKETS


@pytest.mark.parametrize(
    "config, field",
    [
        ({"max_slope": -1}, "max_slope"),
        ({"warmup": "soon"}, "warmup"),
        ({"min_iterations": 1}, "min_iterations"),
        ({"x": "rank"}, "x"),
        ({"action": ""}, "action"),
        ({"max_slop": 0.1}, "max_slop"),
    ],
)
def test_bad_config_is_rejected_naming_the_field(config, field):
    errors = rally_sla.SLA.validate(
        name="latency_slope", context={}, config=None, plugin_cfg=config
    )
    assert errors
    assert f"'{field}'" in str(errors[0])


def test_good_config_validates():
    cfg = {
        "max_slope": 0.02,
        "warmup": 2,
        "action": "keystone.issue_token",
        "min_iterations": 10,
        "x": "iteration",
    }
    assert (
        rally_sla.SLA.validate(name="latency_slope", context={}, config=None, plugin_cfg=cfg) == []
    )


def test_two_slas_merged_judge_as_one_that_saw_every_iteration():
    its = out_of_order(make_stream(4000, 200, slope=0.002, noise=0.002, seed=21))
    whole, _ = feed({"warmup": 20}, its)
    a, _ = feed({"warmup": 20}, its[::2])
    b, _ = feed({"warmup": 20}, its[1::2])
    a.merge(b)
    assert a.fit().n == whole.fit().n
    assert rel(a.fit().slope, whole.fit().slope) < 1e-9
    assert a.result()["success"] == whole.result()["success"]
