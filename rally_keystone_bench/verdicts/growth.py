"""How a latency grows with a data size: the sweep's plan and the fit of its points.

Pure: numpy only. ``plan_sweep`` checks a dimension and its values before
anything starts; ``fit_growth`` takes each point's raw latencies and says
what one more unit of data costs, with a bootstrap interval, and whether
the growth is flat, linear or faster; ``saturated`` says when a point is
too slow or failing for the sweep to go on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rally_keystone_bench.errors import BenchError


@dataclass(frozen=True)
class Dimension:
    """A data size a sweep can vary: which context sets it, and how it reads."""

    name: str
    context: str
    key: str
    unit: str  # plural noun: "revocation events"
    per: int  # the cost is quoted per this many units
    minimum: int = 0
    fixed: dict = field(default_factory=dict)  # the context's other settings
    # A size the deployment holds, not one made through the API: KEY is then a
    # keystone.conf setting (SECTION.OPTION) each point's Keystone starts with.
    conf: bool = False

    def contexts(self, value: int) -> dict[str, dict]:
        """The Rally contexts that give one point its size."""
        return {} if self.conf else {self.context: {**self.fixed, self.key: value}}

    def settings(self, value: int) -> dict[str, str]:
        """The keystone.conf settings that give one point its size."""
        return {self.key: str(value)} if self.conf else {}


DIMENSIONS = {
    d.name: d
    for d in (
        Dimension("revocation-events", "revocation_events", "events", "revocation events", 1000),
        Dimension("roles-per-user", "keystone_roles", "roles_per_user", "roles per user", 1),
        Dimension(
            "groups-per-user",
            "keystone_groups",
            "groups_per_user",
            "groups per user",
            1,
            fixed={"roles_per_group": 1},
        ),
        Dimension(
            "catalog-services",
            "keystone_catalog",
            "services",
            "services (3 endpoints each)",
            10,
            fixed={"regions": 1, "interfaces": 3},
        ),
        Dimension("project-depth", "keystone_project_tree", "depth", "levels of depth", 1, 1),
        # Keys live on the Keystone host's disk: each point's Keystone starts
        # with a repository of N keys (deploy/fernet.py); no context, no setup time.
        Dimension(
            "fernet-keys",
            "",
            "fernet_tokens.max_active_keys",
            "active Fernet keys",
            10,
            minimum=2,
            conf=True,
        ),
    )
}

MAX_POINTS = 12


@dataclass(frozen=True)
class SweepPlan:
    dimension: Dimension
    values: tuple[int, ...]

    def describe(self) -> str:
        sizes = ", ".join(f"{v:,}" for v in self.values)
        return f"{self.dimension.name}: {sizes} {self.dimension.unit}"


def plan_sweep(dimension: str, values: str | Sequence[int]) -> SweepPlan:
    """The points of a sweep, ascending; BenchError naming what is wrong."""
    dim = DIMENSIONS.get(dimension)
    if dim is None:
        raise BenchError(
            f"unknown --dimension {dimension!r}; one of: {', '.join(sorted(DIMENSIONS))}"
        )
    if isinstance(values, str):
        parsed = []
        for word in values.replace(" ", "").split(","):
            if not word.replace("_", "").isdigit():
                raise BenchError(f"--values: {word!r} is not a whole number (e.g. 0,1000,10000)")
            parsed.append(int(word.replace("_", "")))
        values = parsed
    sizes = sorted(set(int(v) for v in values))
    if len(sizes) < 2:
        raise BenchError("--values needs at least two different sizes to show growth")
    if len(sizes) > MAX_POINTS:
        raise BenchError(f"--values: at most {MAX_POINTS} points, not {len(sizes)}")
    if sizes[0] < dim.minimum:
        raise BenchError(f"--values: {dim.name} starts at {dim.minimum}, not {sizes[0]}")
    return SweepPlan(dim, tuple(sizes))


@dataclass(frozen=True)
class Point:
    size: int
    latencies: tuple[float, ...]  # seconds, successful requests only
    success_percent: float = 100.0

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies, q)) if self.latencies else math.nan


@dataclass(frozen=True)
class Growth:
    """Cost per unit of size (seconds per unit), its interval, and the shape."""

    slope: float
    low: float
    high: float
    shape: str  # "flat", "linear", "faster than linear", "slower than linear", "falls"
    points: int
    reason: str

    def sentence(self, dim: Dimension) -> str:
        """'+0.42 ms per 1,000 revocation events (95% interval +0.30 to +0.55 ms): linear'."""

        def ms(v: float) -> str:
            return f"{v * dim.per * 1000:+.3g}"

        return (
            f"{ms(self.slope)} ms per {dim.per:,} {dim.unit} "
            f"(95% interval {ms(self.low)} to {ms(self.high)} ms): {self.shape}"
        )


# Below this change of the median over the whole sweep, growth is flat
# whatever the statistics say: 5% of the smallest point's median.
FLAT_FRACTION = 0.05


def machine_drift(first: Point, again: Point) -> float:
    """How far the first point's median moved when measured again after the sweep (a fraction).

    The points of a sweep run one after another, each on its own Keystone; the
    bootstrap sees only the noise within a point. The same point measured at
    the start and at the end differs by what the machine did meanwhile (a
    shared host's speed moves by 15 % over minutes), which no size caused.
    """
    a, b = first.percentile(50), again.percentile(50)
    if not (a > 0 and b == b):  # no samples on one side: nothing to go by
        return 0.0
    return abs(b - a) / a


def fit_growth(
    points: Sequence[Point], rounds: int = 2000, seed: int = 1, drift: float = 0.0
) -> Growth:
    """Least-squares slope of the points' medians against size, bootstrapped.

    Each round resamples every point's latencies, takes their medians and
    fits a line (and, with 3 points or more, a parabola on the size scaled
    to 0..1); the 2.5th and 97.5th percentiles give the intervals. DRIFT
    (machine_drift) is the change that time alone made: a change of the
    median over the sweep within it (or within FLAT_FRACTION) is flat, and a
    median that falls with size is "falls", never growth.
    """
    pts = [p for p in points if p.latencies]
    if len(pts) < 2:
        raise ValueError("a growth fit needs two points with latencies")
    x = np.array([p.size for p in pts], dtype=float)
    span = float(x.max() - x.min()) or 1.0
    rng = np.random.default_rng(seed)
    samples = [np.asarray(p.latencies, dtype=float) for p in pts]
    medians = np.empty((rounds, len(pts)))
    for j, s in enumerate(samples):
        picks = rng.integers(0, len(s), size=(rounds, len(s)))
        medians[:, j] = np.median(s[picks], axis=1)
    observed = np.array([np.median(s) for s in samples])
    slope = float(np.polyfit(x, observed, 1)[0])
    slopes = np.array([np.polyfit(x, m, 1)[0] for m in medians])
    low, high = (float(v) for v in np.percentile(slopes, [2.5, 97.5]))
    base = float(observed[0])
    change = slope * span
    if drift > FLAT_FRACTION and abs(change) < drift * base:
        reason = (
            f"the median moves {change * 1000:+.3g} ms over the sweep, within the "
            f"{drift:.0%} that the first point moved when measured again at the end: "
            "the machine's, not the size's"
        )
        return Growth(slope, low, high, "flat", len(pts), reason)
    if (low <= 0.0 <= high) or abs(change) < FLAT_FRACTION * base:
        reason = (
            f"the median moves {change * 1000:+.3g} ms over the sweep, "
            f"within {FLAT_FRACTION:.0%} of {base * 1000:.3g} ms or the noise"
        )
        return Growth(slope, low, high, "flat", len(pts), reason)
    if high < 0.0:
        reason = (
            f"the median falls {change * 1000:+.3g} ms over the sweep: more data does not "
            "make Keystone faster, so something else moved between the points (the "
            "machine, a cache); no growth can be read from this sweep"
        )
        return Growth(slope, low, high, "falls", len(pts), reason)
    if len(pts) < 3:
        reason = "two points: a line through them; a third point would show curvature"
        return Growth(slope, low, high, "linear", len(pts), reason)
    shape, reason = _curvature(x, observed, medians, span)
    return Growth(slope, low, high, shape, len(pts), reason)


def _curvature(
    x: np.ndarray, observed: np.ndarray, medians: np.ndarray, span: float
) -> tuple[str, str]:
    """Linear, or faster/slower, from the parabola's curvature and its interval."""
    u = (x - x.min()) / span
    curve = np.array([np.polyfit(u, m, 2)[0] for m in medians])
    c_low, c_high = np.percentile(curve, [2.5, 97.5])
    c, b, _ = np.polyfit(u, observed, 2)
    rise = float(
        np.polyval(np.polyfit(u, observed, 1), 1.0) - np.polyval(np.polyfit(u, observed, 1), 0.0)
    )
    # The bend matters when it moves the end of the sweep by a fifth of the rise.
    bend = abs(float(c)) > 0.2 * abs(rise)
    if c_low > 0 and bend:
        return "faster than linear", f"the curve bends upwards (curvature {c * 1000:+.3g} ms)"
    if c_high < 0 and bend:
        return "slower than linear", f"the curve levels off (curvature {c * 1000:+.3g} ms)"
    return "linear", "a straight line fits the points within their noise"


@dataclass(frozen=True)
class Limits:
    """When a point saturates: too slow at its 95th percentile, or failing."""

    max_p95: float = 2.0  # seconds
    min_success_percent: float = 99.0


def saturated(point: Point, limits: Limits) -> str | None:
    """Why the sweep stops at POINT, or None when it may go on."""
    if point.success_percent < limits.min_success_percent:
        return (
            f"{point.success_percent:.1f}% of requests succeeded "
            f"(below {limits.min_success_percent:g}%)"
        )
    p95 = point.percentile(95)
    if not math.isnan(p95) and p95 > limits.max_p95:
        return f"p95 {p95 * 1000:.0f} ms is above the {limits.max_p95 * 1000:.0f} ms limit"
    if not point.latencies:
        return "no request succeeded"
    return None
