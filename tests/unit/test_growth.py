"""keystone-bench scale's pure parts: the sweep's plan, the growth fit, saturation."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verdicts import growth


def points(sizes, median_of, n=200, noise=0.0005, seed=3):
    """Points whose latencies scatter (normally, NOISE s) around MEDIAN_OF(size)."""
    rng = np.random.default_rng(seed)
    return [
        growth.Point(s, tuple(median_of(s) + rng.normal(0, noise, n).clip(-0.004, None)))
        for s in sizes
    ]


def test_plan_sorts_and_deduplicates_the_sizes_of_a_known_dimension():
    plan = growth.plan_sweep("revocation-events", "10000,0, 1000,1000")
    assert plan.values == (0, 1000, 10000)
    assert plan.describe() == "revocation-events: 0, 1,000, 10,000 revocation events"
    assert plan.dimension.contexts(1000) == {"revocation_events": {"events": 1000}}


@pytest.mark.parametrize(
    ("dimension", "values", "message"),
    [
        ("revocations", "0,1", "unknown --dimension 'revocations'; one of: catalog-services"),
        ("revocation-events", "0,lots", "--values: 'lots' is not a whole number"),
        ("revocation-events", "0,-5", "--values: '-5' is not a whole number"),
        ("revocation-events", "1000", "at least two different sizes"),
        ("revocation-events", "5,5", "at least two different sizes"),
        ("project-depth", "0,3", "project-depth starts at 1, not 0"),
        ("roles-per-user", ",".join(map(str, range(13))), "at most 12 points, not 13"),
    ],
)
def test_bad_plans_name_what_is_wrong(dimension, values, message):
    with pytest.raises(BenchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        growth.plan_sweep(dimension, values)


def test_context_sizing_keeps_the_fixed_settings_of_a_dimension():
    groups = growth.DIMENSIONS["groups-per-user"].contexts(20)
    assert groups == {"keystone_groups": {"roles_per_group": 1, "groups_per_user": 20}}
    catalog = growth.DIMENSIONS["catalog-services"].contexts(100)
    assert catalog == {"keystone_catalog": {"regions": 1, "interfaces": 3, "services": 100}}


def test_a_flat_curve_is_flat():
    fit = growth.fit_growth(points([0, 1000, 10000], lambda s: 0.010))
    assert fit.shape == "flat"
    assert fit.low <= 0 <= fit.high or abs(fit.slope * 10000) < 0.0005


def test_a_linear_curve_gives_its_slope_within_the_interval():
    true = 0.42e-3 / 1000  # 0.42 ms per 1,000 events
    fit = growth.fit_growth(points([0, 1000, 5000, 10000], lambda s: 0.010 + true * s))
    assert fit.shape == "linear"
    assert fit.low <= true <= fit.high
    assert fit.slope == pytest.approx(true, rel=0.05)
    dim = growth.DIMENSIONS["revocation-events"]
    assert re.fullmatch(
        r"\+0\.4\d* ms per 1,000 revocation events "
        r"\(95% interval \+0\.4\d* to \+0\.4\d* ms\): linear",
        fit.sentence(dim),
    )


def test_a_quadratic_curve_is_faster_than_linear():
    fit = growth.fit_growth(points([0, 2500, 5000, 7500, 10000], lambda s: 0.010 + 2e-10 * s * s))
    assert fit.shape == "faster than linear"


def test_noise_larger_than_a_small_trend_is_not_called_growth():
    fit = growth.fit_growth(points([0, 1000, 10000], lambda s: 0.010 + 1e-9 * s, n=30, noise=0.004))
    assert fit.shape == "flat"


def test_two_points_are_a_line_and_say_so():
    fit = growth.fit_growth(points([0, 200], lambda s: 0.010 + 1e-5 * s))
    assert fit.shape == "linear"
    assert "two points" in fit.reason


def test_a_rise_within_the_machine_drift_is_flat_and_says_why():
    # The 28.0.0 sweep of the study page: 71.5, 75.9, 85.7 ms, tight points.
    medians = {0: 0.0715, 1000: 0.0759, 10000: 0.0857}
    pts = points(list(medians), lambda s: medians[s])
    assert growth.fit_growth(pts).shape != "flat"  # tight points: growth without the check
    first_again = growth.Point(0, tuple([0.0880] * 20))
    drift = growth.machine_drift(pts[0], first_again)
    assert drift == pytest.approx(0.0165 / 0.0715, rel=0.01)  # the points scatter a little
    fit = growth.fit_growth(pts, drift=drift)
    assert fit.shape == "flat"
    assert "23% that the first point moved" in fit.reason


def test_a_rise_beyond_the_machine_drift_is_still_growth():
    true = 1e-6  # 1 ms per 1,000: +10 ms over the sweep on 10 ms
    fit = growth.fit_growth(points([0, 1000, 10000], lambda s: 0.010 + true * s), drift=0.3)
    assert fit.shape == "linear"


def test_a_median_that_falls_with_size_is_never_growth():
    medians = {0: 0.0832, 1000: 0.0769, 10000: 0.0682}  # the 29.0.0 sweep of the study page
    fit = growth.fit_growth(points(list(medians), lambda s: medians[s]))
    assert fit.shape == "falls"
    assert "no growth can be read" in fit.reason


def test_machine_drift_without_samples_is_zero():
    assert growth.machine_drift(growth.Point(0, (0.01,)), growth.Point(0, ())) == 0.0


def test_saturation_by_p95_and_by_failures():
    limits = growth.Limits(max_p95=0.5, min_success_percent=99)
    slow = growth.Point(10, tuple([0.1] * 90 + [0.9] * 10))
    assert growth.saturated(slow, limits) == "p95 900 ms is above the 500 ms limit"
    failing = growth.Point(10, (0.1,), success_percent=80.0)
    assert growth.saturated(failing, limits) == "80.0% of requests succeeded (below 99%)"
    assert growth.saturated(growth.Point(10, (0.1, 0.2)), limits) is None
