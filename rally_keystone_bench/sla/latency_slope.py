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

Exactness. Rally calls ``add_iteration`` with batches sorted within a batch
but not across runner processes, and never calls ``merge``, so the earliest
iteration (and with it the warm-up boundary) may arrive last, and any point
not yet past the current boundary may still end up past the final one. The
SLA therefore keeps:

* per whole second of ``x`` (relative to a fixed origin) the count, means,
  co-moments, min and max of the points, updated with Chan's pairwise
  formulas (numerically stable, no raw sums of squares of timestamps);
  a point goes there only when its second lies wholly after the current
  boundary ``first + warmup``, which can only move earlier, so such a
  point is past the warm-up for good;
* the raw ``(x, y)`` of points whose second is not wholly past the current
  boundary (16 bytes each): those seen during the warm-up plus its
  boundary second. When an earlier first iteration arrives the boundary
  moves earlier and the points now wholly past it move into the seconds.

So the fit is that of ``numpy.polyfit`` on the same points (to about 1e-12
relative in the tests), whatever the arrival order, and memory grows with
the seconds of the run and with the iterations of the warm-up only, not with
the iterations after it. Keeping the warm-up's points is the price of
exactness: a late first iteration can put the boundary anywhere inside the
warm-up, and only the raw points can be split there exactly.

``x: iteration``. ``x`` is the rank by start time among the successful
post-warm-up points. Ranks inside one second are not kept (that would need
every point); all points of a second get the mid-rank of that second:
``x = (points in earlier seconds) + (n_second - 1) / 2``. The sum of the
ranks, and the fit whenever at most one point starts per second, are those
of the true ranks; otherwise the fit ignores only the order within each
second. This is exact for that definition (polyfit on these x gives the
same slope) and keeps memory bounded per second. ``max_slope`` is then in
seconds of latency per iteration.

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

if t.TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from rally.task import runner

# Raw points are folded into the per-second moments in numpy chunks.
_FLUSH_POINTS = 4096
# During the run the verdict is re-checked at most this often (wall seconds).
_CHECK_INTERVAL_S = 2.0
_CONFIDENCE = 0.95

# A moment record: [n, mean_x, mean_y, M_xx, M_yy, C_xy] (x relative to origin).
Moments = list


def _merge(a: Moments, b: Moments) -> Moments:
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
            cur[0] = _merge(cur[0], row)
            cur[1] = min(cur[1], mn)
            cur[2] = max(cur[2], mx)


class Fit(t.NamedTuple):
    """The least-squares line over the post-warm-up points."""

    n: int
    slope: float
    intercept: float  # at x relative to the SLA's origin
    ci: tuple[float, float]
    r2: float
    span: float  # x range of the points: seconds, or iterations - 1


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

        self.first = math.inf  # earliest iteration timestamp seen
        self.origin: float | None = None  # fixed x origin: floor of the first timestamp seen
        self.failed = 0
        self.iterations = 0
        self._buf_x: list[float] = []
        self._buf_y: list[float] = []
        # whole seconds wholly past the boundary: key -> [moments, min_x, max_x]
        self._seconds: dict[int, list] = {}
        # raw points not yet wholly past the boundary, as numpy chunks (absolute x)
        self._zone_x: list = []
        self._zone_y: list = []
        self._zone_key: float = math.inf  # boundary second at the last fold
        self._last_check = time.monotonic()
        self._cache: tuple[int, Fit | None] | None = None

    # -- feeding -------------------------------------------------------------
    def add_iteration(self, iteration: runner.ScenarioRunnerResult) -> bool:
        ts = iteration["timestamp"]
        self.iterations += 1
        if ts < self.first:
            self.first = ts
            if self.origin is None:
                self.origin = float(math.floor(ts))
        if iteration.get("error"):
            self.failed += 1
        elif self.action is None:
            self._buf_x.append(ts)
            self._buf_y.append(iteration["duration"])
        else:
            self._collect(iteration.get("atomic_actions") or ())
        if len(self._buf_x) >= _FLUSH_POINTS:
            self._flush()
            now = time.monotonic()
            if now - self._last_check >= _CHECK_INTERVAL_S:
                self._last_check = now
                self.success = not self._clearly_failing()
        return self.success

    def _collect(self, actions: t.Iterable[dict]) -> None:
        for act in actions:
            if act.get("name") == self.action and not act.get("failed"):
                started, finished = act.get("started_at"), act.get("finished_at")
                if started is not None and finished is not None:
                    self._buf_x.append(started)
                    self._buf_y.append(finished - started)
            children = act.get("children")
            if children:
                self._collect(children)

    def merge(self, other: LatencySlope) -> bool:
        """Rally never merges SLAs; merging is not supported."""
        raise NotImplementedError("latency_slope does not support merge")

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
            # an earlier first iteration arrived: the zone shrinks
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
                self._add_to_seconds(keys[out], x[out] - self.origin, y[out])
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
            self._add_to_seconds(keys[out], x[out] - self.origin, y[out])
            keep = ~out
            x, y = x[keep], y[keep]
        self._zone_x = [x] if x.size else []
        self._zone_y = [y] if y.size else []

    def _add_to_seconds(self, keys: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
        _add_grouped(self._seconds, keys, x, y)

    # -- fitting -------------------------------------------------------------
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

    def fit(self) -> Fit | None:
        """The fit over every point past the warm-up so far; None without points."""
        self._flush()
        if self.origin is None:
            return None
        version = self.iterations
        if self._cache is not None and self._cache[0] == version:
            return self._cache[1]
        seconds = self._post_warmup_seconds()
        total: Moments = [0, 0.0, 0.0, 0.0, 0.0, 0.0]
        lo, hi = math.inf, -math.inf
        if self.x_mode == "iteration":
            offset = 0
            for k in sorted(seconds):
                row = seconds[k][0]
                nb = row[0]
                mid = offset + (nb - 1) / 2.0
                total = _merge(total, [nb, mid, row[2], 0.0, row[4], 0.0])
                offset += int(nb)
            lo, hi = 0.0, float(max(offset - 1, 0))
        else:
            for v in seconds.values():
                total = _merge(total, v[0])
                lo, hi = min(lo, v[1]), max(hi, v[2])
        result = self._line(total, hi - lo if total[0] else 0.0)
        self._cache = (version, result)
        return result

    @staticmethod
    def _line(m: Moments, span: float) -> Fit | None:
        n = int(m[0])
        if n == 0:
            return None
        if n < 3 or m[3] <= 0.0:
            return Fit(n, math.nan, math.nan, (math.nan, math.nan), math.nan, span)
        from rally_keystone_bench.stats import t_quantile

        slope = m[5] / m[3]
        intercept = m[2] - slope * m[1]
        sse = max(m[4] - slope * m[5], 0.0)
        r2 = (m[5] * m[5] / (m[3] * m[4])) if m[4] > 0 else 1.0
        se = math.sqrt(sse / (n - 2) / m[3])
        half = t_quantile(0.5 + _CONFIDENCE / 2, n - 2) * se
        return Fit(n, slope, intercept, (slope - half, slope + half), r2, span)

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
