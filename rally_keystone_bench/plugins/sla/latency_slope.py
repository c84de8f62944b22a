"""SLA ``latency_slope``: fail when latency keeps growing during the run.

It fits an ordinary least-squares line ``latency = a + slope * x`` over the
successful iterations that started after the warm-up, and passes when
``slope <= max_slope`` (the paper's criterion, ``a < 0.01``).

Config (all optional)::

    latency_slope:
      max_slope: 0.01        # s of latency per s of wall time (per iteration with x: iteration)
      warmup: 60             # s from the first iteration's start
      action: keystone.issue_token   # default: the whole iteration duration
      min_iterations: 30     # points past warm-up needed for a verdict
      x: time                # or "iteration"

Points. Without ``action`` a point is an iteration: ``x`` its start
``timestamp``, ``y`` its ``duration``. With ``action`` every atomic action of
that name is a point, nested ones included (``concurrent_create`` gives
several ``keystone.issue_token`` per iteration), ``x`` its ``started_at`` and
``y`` its ``finished_at - started_at``. Failed iterations give no points; the
details count them. The warm-up runs from the earliest iteration
``timestamp`` (failed ones included): a point counts when
``x >= first + warmup``.

Exactness and memory. Rally calls ``add_iteration`` with batches sorted
within a batch but not across runner processes, so the earliest iteration
(and with it the warm-up boundary) may arrive last. The engine,
``trend.StreamingSlope``, holds bounded state whatever the run's length:
moments (count, means, co-moments) of the points past the boundary in at
most ``trend.BUCKETS`` buckets of whole seconds (wider past that), and at
most ``trend.RAW_POINTS`` raw points of the warm-up, the ones nearest the
boundary. The fit is that of ``numpy.polyfit`` on the same points whatever
the arrival order, as long as the second in which the final boundary falls
is still held raw when the earliest iteration arrives: it is while fewer
than ``RAW_POINTS // 2`` points (16384: 8 s at 2000 rps) start between that
second and the boundary seen before, so whenever Rally delivers the first
iteration within seconds of the others. Else that one second counts wholly
or not at all. ``merge`` of two SLAs is the
SLA of all their iterations (see ``trend.StreamingSlope``).

``x: iteration``. ``x`` is the rank by start time among the successful
post-warm-up points. Ranks inside one bucket (one second) are not kept
(that would need every point); all points of a bucket get its mid-rank:
``x = (points in earlier buckets) + (n_bucket - 1) / 2``. The sum of the
ranks, and the fit whenever at most one point starts per bucket, are those
of the true ranks; otherwise the fit ignores only the order within each
bucket. Runs longer than ``trend.BUCKETS`` seconds have buckets of 2, 4,
... seconds. ``max_slope`` is then in seconds of latency per iteration.

During the run ``add_iteration`` returns False (which makes Rally abort under
``--abort-on-sla-failure``) only once ``min_iterations`` points are past the
warm-up and the whole 95 % confidence interval of the slope is above
``max_slope``; with too little data it never aborts. The final verdict is the
point estimate against ``max_slope``, and a failure when fewer than
``min_iterations`` points are past the warm-up ("not enough data").
"""

from __future__ import annotations

import math
import time
import typing as t

from rally import consts
from rally.task import sla

from rally_keystone_bench.verdicts.trend import LinearFit, StreamingSlope

if t.TYPE_CHECKING:  # pragma: no cover
    from rally.task import runner

# During the run the verdict is re-checked at most this often (wall seconds).
_CHECK_INTERVAL_S = 2.0
_FLUSH_POINTS = 4096  # points between two checks of the verdict, at least


class Fit(t.NamedTuple):
    """The least-squares line over the post-warm-up points."""

    n: int
    slope: float
    intercept: float  # at x relative to the engine's origin
    ci: tuple[float, float]
    r2: float
    span: float  # x range of the points: seconds, or iterations - 1

    @classmethod
    def of(cls, line: LinearFit, span: float) -> Fit:
        return cls(line.n, line.slope, line.intercept, line.slope_ci, line.r2, span)


@sla.configure(name="latency_slope")
class LatencySlope(sla.SLA):
    """Least-squares slope of latency over time, after a warm-up, at most max_slope."""

    CONFIG_SCHEMA = {
        "type": "object",
        "$schema": consts.JSON_SCHEMA7,
        "properties": {
            "max_slope": {
                "type": "number",
                "minimum": 0.0,
                "description": "max seconds of latency per second of wall time "
                "(per iteration with x: iteration); default 0.01",
            },
            "warmup": {
                "type": "number",
                "minimum": 0.0,
                "description": "seconds from the first iteration not fitted; default 60",
            },
            "action": {
                "type": "string",
                "minLength": 1,
                "description": "atomic action to fit; default the iteration duration",
            },
            "min_iterations": {
                "type": "integer",
                "minimum": 3,
                "description": "points past the warm-up needed for a verdict; default 30",
            },
            "x": {"enum": ["time", "iteration"], "description": "default time"},
        },
        "additionalProperties": False,
    }

    def __init__(self, criterion_value: dict[str, t.Any] | None) -> None:
        super().__init__(criterion_value)
        cfg = criterion_value or {}
        self.max_slope = float(cfg.get("max_slope", 0.01))
        self.warmup = float(cfg.get("warmup", 60.0))
        self.action: str | None = cfg.get("action")
        self.min_iterations = int(cfg.get("min_iterations", 30))
        self.x_mode: str = cfg.get("x", "time")
        self.engine = StreamingSlope(self.warmup, self.x_mode)
        self.failed = 0
        self.iterations = 0
        self._last_check = time.monotonic()
        self._checked_points = 0  # the engine's count of points at the last check

    # -- feeding -------------------------------------------------------------
    def add_iteration(self, iteration: runner.ScenarioRunnerResult) -> bool:
        ts = iteration["timestamp"]
        self.iterations += 1
        self.engine.start(ts)
        if iteration.get("error"):
            self.failed += 1
        elif self.action is None:
            self.engine.add(ts, iteration["duration"])
        else:
            self._collect(iteration.get("atomic_actions") or ())
        if self.engine.added - self._checked_points >= _FLUSH_POINTS:
            now = time.monotonic()
            if now - self._last_check >= _CHECK_INTERVAL_S:
                self._last_check = now
                self._checked_points = self.engine.added
                self.success = not self._clearly_failing()
        return self.success

    def _collect(self, actions: t.Iterable[dict]) -> None:
        for act in actions:
            if act.get("name") == self.action and not act.get("failed"):
                started, finished = act.get("started_at"), act.get("finished_at")
                if started is not None and finished is not None:
                    self.engine.add(started, finished - started)
            children = act.get("children")
            if children:
                self._collect(children)

    def merge(self, other: LatencySlope) -> bool:
        """Take in the iterations OTHER saw (same criterion); the verdict so far."""
        self.engine.merge(other.engine)
        self.failed += other.failed
        self.iterations += other.iterations
        self.success = not self._clearly_failing()
        return self.success

    # -- fitting -------------------------------------------------------------
    def fit(self) -> Fit | None:
        """The fit over every point past the warm-up so far; None without points."""
        found = self.engine.result()
        return None if found is None else Fit.of(found.fit, found.span)

    def _clearly_failing(self) -> bool:
        """True once enough points show the whole CI of the slope above max_slope."""
        f = self.fit()
        if f is None or f.n < self.min_iterations or math.isnan(f.slope):
            return False
        return f.ci[0] > self.max_slope

    # -- verdict -------------------------------------------------------------
    def _final(self) -> tuple[bool, str]:
        f = self.fit()
        n = f.n if f else 0
        unit = "s/iteration" if self.x_mode == "iteration" else "s/s"
        what = f"{self.action}: " if self.action else ""
        failed = f", {self.failed} failed iterations not fitted" if self.failed else ""
        if n < self.min_iterations:
            return False, (
                f"{what}not enough data: {n} of {self.min_iterations} points past "
                f"the {_num(self.warmup)} s warm-up{failed} - Failed"
            )
        if math.isnan(f.slope):
            return False, f"{what}not enough data: all {n} points at one x{failed} - Failed"
        ok = f.slope <= self.max_slope
        window = (
            f"{int(f.span) + 1} iterations" if self.x_mode == "iteration" else f"{f.span:.1f} s"
        )
        growth = f.slope * f.span * 1000.0
        status = "Passed" if ok else "Failed"
        slope, lo, hi = _slope_text(f.slope, *f.ci)
        return ok, (
            f"{what}slope {slope} {unit} (95% CI {lo}..{hi}), "
            f"r2 {f.r2:.2f}, n {n}, {growth:+.1f} ms over {window} window{failed} "
            f"- {status} (max {self.max_slope:g})"
        )

    def result(self) -> sla.SLAResult:
        self.success, detail = self._final()
        return sla._format_result(self.get_name(), self.success, detail)

    def details(self) -> str:
        return self._final()[1]


def _num(v: float, digits: int = 3) -> str:
    return f"{v:.{digits}g}"


def _slope_text(slope: float, lo: float, hi: float) -> tuple[str, str, str]:
    """Slope and CI with 3 significant digits, more when the CI would read as one number."""
    for digits in range(3, 10):
        texts = (_num(slope, digits), _num(lo, digits), _num(hi, digits))
        if texts[1] != texts[2]:
            break
    return texts
