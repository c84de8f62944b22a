"""``keystone-bench capacity``: search N, the highest rate Keystone serves without degrading.

A probe is one Rally task (tasks/capacity-probe.yaml): the ``pooled_rps``
runner (``--runner rps`` for Rally's own; same schedule, see
runners/pooled_rps.py) starts ``rps * (warmup + window)`` iterations at a
constant rate, judged by
``failure_rate: max 0`` and our ``latency_slope`` SLA. A probe's verdict,
in this order:

* ``degraded (errors)``: an iteration failed;
* ``degraded (saturated)``: every iteration slot of the runner was in
  flight at once: Keystone answered too slowly for the rate, the runner had
  to wait for it, and the latency stopped growing only because the load did
  (with --abort-on-sla-failure the probe is stopped right then);
* ``generator-limited``: fewer than 95 % of the target rate was sent, with
  free slots: the load generator, not Keystone, was the limit (the paper's
  trap). The probe says nothing about Keystone, whatever its latency did (a
  starved generator also delays its own timers); the search does not go
  above it, and an N below it is reported as a lower bound;
* ``degraded (slope)``: the latency of the timed action grew faster than
  ``max_slope`` seconds per second past the warm-up;
* ``ok``.

The achieved rate is that of iteration *starts* in the window (after the
warm-up): ``(starts - 1) / (last start - first start)``. Starting
iterations on time is the generator's whole job; counting only successful
ones, or dividing by Rally's load duration (which includes waiting for the
last answers), would blame the generator for Keystone's errors and latency.
Throughput (successful iterations per second of load) is reported beside it.

The search bisects [--low, --high] on a linear scale, the probe rates on a
grid of --precision; a probe above N fails early under
--abort-on-sla-failure, so a high first guess is cheap. It then repeats N
and N + precision ("confirm"); when a confirmation contradicts the search,
it resumes from there (two rounds at most).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import math
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rally_keystone_bench.errors import BenchError

if TYPE_CHECKING:
    from rally_keystone_bench.rallyenv import RallyHome
    from rally_keystone_bench.results import Workload

# scenario argument -> (Rally scenario, timed atomic action)
SCENARIOS = {
    "authenticate": ("KeystoneTokens.authenticate", "keystone.issue_token"),
    "validate": ("KeystoneTokens.validate", "keystone.validate_token"),
}
GENERATOR_SHARE = 0.95  # below this share of the target rate, the generator was the limit
LATENCY_BUDGET_S = 5.0  # max_concurrency = rps * this: slots for 5 s of latency
MIN_CONCURRENCY = 20
CONFIRM_ROUNDS = 2
PROBE_TASK_NAME = "capacity-probe.yaml"
ENV_NAME = "keystone-bench"

OK = "ok"
ERRORS = "degraded (errors)"
SLOPE = "degraded (slope)"
SATURATED = "degraded (saturated)"
GENERATOR = "generator-limited"


def progress(message: str) -> None:
    print(f"keystone-bench: {message}", file=sys.stderr, flush=True)


# -- settings ------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Settings:
    scenario: str
    low: float
    high: float
    warmup: float
    window: float
    max_slope: float
    precision: float
    abort_on_sla_failure: bool = True
    runner: str = "pooled_rps"

    @property
    def rally_scenario(self) -> str:
        return SCENARIOS[self.scenario][0]

    @property
    def action(self) -> str:
        return SCENARIOS[self.scenario][1]

    def times(self, rps: float) -> int:
        return int(math.ceil(rps * (self.warmup + self.window) - 1e-9))

    def min_iterations(self, rps: float) -> int:
        """Points the slope needs past the warm-up: half the window's, 3 to 30."""
        return max(3, min(30, int(rps * self.window / 2)))

    def max_concurrency(self, rps: float) -> int:
        return max(MIN_CONCURRENCY, int(math.ceil(rps * LATENCY_BUDGET_S)))

    def task_args(self, rps: float) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "rps": rps,
            "warmup": self.warmup,
            "window": self.window,
            "times": self.times(rps),
            "max_slope": self.max_slope,
            "min_iterations": self.min_iterations(rps),
            "max_concurrency": self.max_concurrency(rps),
            "runner": self.runner,
        }


def _finite(name: str, value: float) -> float:
    if value is None or not math.isfinite(value):
        raise BenchError(f"{name} must be a finite number, not {value}")
    return float(value)


def check_settings(args: argparse.Namespace) -> Settings:
    """The search's settings from the command line; BenchError for any bad one."""
    if args.scenario not in SCENARIOS:
        raise BenchError(
            f"unknown scenario {args.scenario!r}: choose one of {', '.join(SCENARIOS)}"
        )
    low, high = _finite("--low", args.low), _finite("--high", args.high)
    warmup, window = _finite("--warmup", args.warmup), _finite("--window", args.window)
    max_slope = _finite("--max-slope", args.max_slope)
    precision = _finite("--precision", args.precision)
    if low <= 0:
        raise BenchError(f"--low must be above 0 rps, not {low:g}")
    if low > high:
        raise BenchError(f"--low ({low:g}) is above --high ({high:g})")
    if max_slope < 0:
        raise BenchError(f"--max-slope must not be negative, not {max_slope:g}")
    if precision <= 0:
        raise BenchError(f"--precision must be above 0 rps, not {precision:g}")
    if warmup < 0:
        raise BenchError(f"--warmup must not be negative, not {warmup:g}")
    if window <= 0:
        raise BenchError(f"--window must be above 0 s, not {window:g}")
    if low * window < 3:
        raise BenchError(
            f"--low {low:g} rps over a {window:g} s window gives fewer than 3 points "
            "to fit a slope: raise --low or --window"
        )
    return Settings(
        scenario=args.scenario,
        low=low,
        high=high,
        warmup=warmup,
        window=window,
        max_slope=max_slope,
        precision=precision,
        abort_on_sla_failure=getattr(args, "abort_on_sla_failure", True),
        runner=getattr(args, "runner", None) or "pooled_rps",
    )


# -- one probe -----------------------------------------------------------------
@dataclasses.dataclass
class Probe:
    """One probe's figures and verdict (latencies in seconds, of the window)."""

    number: int
    role: str  # "search", "confirm N", "confirm N+1"
    rps: float
    verdict: str = OK
    reason: str = ""
    iterations: int = 0
    planned: int = 0
    failed: int = 0
    sent_rate: float | None = None
    throughput: float | None = None
    peak_concurrency: int = 0
    max_concurrency: int = 0
    slope: float | None = None
    slope_ci: tuple[float, float] | None = None
    sla_detail: str = ""
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    elapsed: float = 0.0
    slots_full: bool = False  # every slot was seen in flight while the probe ran
    stopped_for: str | None = None  # why the probe was stopped early
    task_uuid: str | None = None
    report: str | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == OK

    @property
    def stopped_early(self) -> bool:
        return 0 < self.iterations < self.planned

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["passed"] = self.passed
        out["stopped_early"] = self.stopped_early
        return out


def peak_in_flight(started: Sequence[float], duration: Sequence[float]) -> int:
    """The most iterations in flight at one instant."""
    import numpy as np

    s = np.asarray(started, dtype=float)
    if s.size == 0:
        return 0
    e = s + np.asarray(duration, dtype=float)
    times = np.concatenate([s, e])
    # at equal times an end comes before a start
    steps = np.concatenate([np.ones(s.size, dtype=np.int64), -np.ones(e.size, dtype=np.int64)])
    order = np.lexsort((steps, times))
    return int(np.cumsum(steps[order]).max())


def start_rate(started: Sequence[float], since: float | None = None) -> float | None:
    """Iterations started per second: (starts - 1) / their span, from ``since`` on."""
    import numpy as np

    s = np.sort(np.asarray(started, dtype=float))
    if since is not None and int((s >= since).sum()) >= 2:
        s = s[s >= since]
    if s.size < 2 or s[-1] <= s[0]:
        return None
    return float((s.size - 1) / (s[-1] - s[0]))


def judge(probe: Probe, wl: Workload, settings: Settings) -> Probe:
    """Fill PROBE's figures and verdict from the probe's Rally workload."""
    from rally_keystone_bench import stats

    probe.iterations = wl.iterations
    probe.failed = wl.failed_iterations
    probe.throughput = wl.throughput
    if wl.iterations == 0:
        probe.verdict, probe.reason = GENERATOR, "no iteration started"
        return probe
    first = float(wl.iteration_started.min())
    boundary = first + settings.warmup
    probe.sent_rate = start_rate(wl.iteration_started, boundary)
    probe.peak_concurrency = peak_in_flight(wl.iteration_started, wl.iteration_duration)
    action = wl.actions.get(settings.action)
    if action is not None:
        keep = (~action.failed) & (action.started_at >= boundary)
        s = stats.summarize(action.duration[keep])
        probe.p50, probe.p95, probe.p99 = s["p50"], s["p95"], s["p99"]
        x, y = action.started_at[keep] - first, action.duration[keep]
        if x.size >= 3 and float(x.max() - x.min()) > 0:
            fit = stats.ols(x, y)
            probe.slope, probe.slope_ci = fit.slope, tuple(fit.slope_ci)
    slope_sla = next((c for c in wl.sla if c.get("criterion") == "latency_slope"), None)
    probe.sla_detail = str(slope_sla.get("detail", "")) if slope_sla else ""
    slope_failed = slope_sla is not None and not slope_sla.get("success", True)
    not_enough = "not enough data" in probe.sla_detail

    sent = probe.sent_rate or 0.0
    if probe.failed:
        top = wl.errors[0] if wl.errors else None
        what = ""
        if top is not None:
            what = f": {top.type}" + (f" (HTTP {top.status})" if top.status else "")
        probe.verdict = ERRORS
        probe.reason = f"{probe.failed} of {probe.iterations} iterations failed{what}"
    elif (
        probe.slots_full
        or probe.peak_concurrency >= probe.max_concurrency > 0
        or float(wl.iteration_duration.max()) * probe.rps >= probe.max_concurrency > 0
    ):
        probe.verdict = SATURATED
        probe.reason = (
            f"answers too slow for the rate: {probe.max_concurrency} iteration slots "
            f"hold {probe.max_concurrency / probe.rps:.1f} s of answers, the slowest took "
            f"{float(wl.iteration_duration.max()):.1f} s"
        )
    elif sent < GENERATOR_SHARE * probe.rps or not_enough:
        probe.verdict = GENERATOR
        probe.reason = (
            f"sent {sent:.1f} rps, {100 * sent / probe.rps:.0f}% of the target, "
            f"with {probe.max_concurrency - probe.peak_concurrency} slots free"
        )
    elif slope_failed and not not_enough:
        probe.verdict = SLOPE
        slope = f"{probe.slope:.3g}" if probe.slope is not None else "?"
        probe.reason = f"latency slope {slope} s/s > {settings.max_slope:g}"
    else:
        probe.verdict = OK
        slope = f"{probe.slope:.2g}" if probe.slope is not None else "?"
        probe.reason = f"sent {sent:.1f} rps, slope {slope} s/s, no error"
    return probe


# -- the search ----------------------------------------------------------------
@dataclasses.dataclass
class Outcome:
    """What the search found."""

    n: float | None  # None: even --low degrades (or could not be measured)
    status: str  # "found", "lower bound", "low degrades", "not measurable"
    limited_by: str | None = None  # "generator" or "--high" when n is a lower bound
    confirmed: bool = False
    message: str = ""
    probes: list[Probe] = dataclasses.field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return {"found": 0, "lower bound": 0, "low degrades": 1}.get(self.status, 2)


def snap(rate: float, settings: Settings) -> float:
    """RATE on the grid low + k * precision, to a micro-rps."""
    k = round((rate - settings.low) / settings.precision)
    return round(min(settings.high, settings.low + k * settings.precision), 6)


def midpoint(lo: float, hi: float, settings: Settings) -> float:
    """A grid rate strictly inside (lo, hi), near the middle; hi - lo > precision."""
    m = snap((lo + hi) / 2, settings)
    if m <= lo:
        m = round(lo + settings.precision, 6)
    if m >= hi:
        m = round(hi - settings.precision, 6)
    return m


def estimated_probes(settings: Settings) -> int:
    """About how many probes the search runs: log2 of the range in steps, plus two."""
    steps = (settings.high - settings.low) / settings.precision
    return (math.ceil(math.log2(steps)) if steps > 1 else 0) + 2


def _fmt(rate: float) -> str:
    return f"{rate:g}"


def find_capacity(
    settings: Settings,
    probe: Callable[[float, str], Probe],
    say: Callable[[str], None] = progress,
) -> Outcome:
    """Bisect [low, high] for N with PROBE(rate, role), then confirm N and N + precision."""
    probes: list[Probe] = []
    eps = settings.precision * 1e-6
    lo, hi = settings.low, settings.high  # lo is taken to pass, hi to fail, until probed
    hi_probe: Probe | None = None

    def run(rate: float, role: str) -> Probe:
        p = probe(rate, role)
        probes.append(p)
        return p

    def fail_above(rate: float) -> tuple[float, Probe | None]:
        failing = [p for p in probes if not p.passed and p.rps > rate + eps]
        if not failing:
            return settings.high, None
        best = min(failing, key=lambda p: (p.rps, -p.number))
        return best.rps, best

    confirmed = False
    for _round in range(CONFIRM_ROUNDS + 1):
        while hi - lo > settings.precision + eps:
            p = run(midpoint(lo, hi, settings), "search")
            if p.passed:
                lo = p.rps
            else:
                hi, hi_probe = p.rps, p
        if _round == CONFIRM_ROUNDS:
            break  # no confirmation left: N stays unconfirmed
        pn = run(lo, "confirm N")
        if not pn.passed:
            if lo <= settings.low + eps:
                status = "not measurable" if pn.verdict == GENERATOR else "low degrades"
                why = pn.reason
                return Outcome(
                    None,
                    status,
                    "generator" if pn.verdict == GENERATOR else None,
                    message=f"even --low {_fmt(settings.low)} rps is {pn.verdict}: {why}",
                    probes=probes,
                )
            hi, hi_probe = lo, pn
            passing = [q.rps for q in probes if q.passed and q.rps < lo - eps]
            lo = max(passing, default=settings.low)
            continue
        if lo >= settings.high - eps:
            confirmed = True
            hi_probe = None
            break
        p1 = run(round(min(lo + settings.precision, settings.high), 6), "confirm N+1")
        if p1.passed:
            lo = p1.rps
            if lo >= settings.high - eps:
                confirmed, hi_probe = True, None
                break
            hi, hi_probe = fail_above(lo)
            continue
        hi_probe = p1
        confirmed = True
        break

    n = lo
    if hi_probe is None:
        return Outcome(
            n,
            "lower bound",
            "--high",
            confirmed,
            f"N >= {_fmt(n)} rps: no degradation up to --high {_fmt(settings.high)}",
            probes,
        )
    if hi_probe.verdict == GENERATOR:
        return Outcome(
            n,
            "lower bound",
            "generator",
            confirmed,
            f"N >= {_fmt(n)} rps, generator-limited at {_fmt(hi_probe.rps)} rps "
            f"({hi_probe.reason})",
            probes,
        )
    note = "" if confirmed else " (not confirmed: the repeats disagreed)"
    return Outcome(
        n,
        "found",
        None,
        confirmed,
        f"N = {_fmt(n)} rps; {_fmt(hi_probe.rps)} rps is {hi_probe.verdict}{note}",
        probes,
    )


# -- the target and the probes under the real rally CLI ------------------------
def probe_task_path() -> Path:
    """tasks/capacity-probe.yaml of this checkout, else of the current directory."""
    for base in (Path(__file__).resolve().parent.parent, Path.cwd()):
        path = base / "tasks" / PROBE_TASK_NAME
        if path.is_file():
            return path
    raise BenchError(f"cannot find tasks/{PROBE_TASK_NAME} (run from a rally-keystone-bench tree)")


@contextlib.contextmanager
def prepared_target(
    args: argparse.Namespace, run_dir: Path, say: Callable[[str], None] = progress
) -> Iterator[tuple[RallyHome, str, str]]:
    """A Rally home with a checked env on the chosen target; yields (home, env, description).

    ``mock``: the mock token service of known capacity, started here and
    stopped at the end. ``local`` and ``cloud``: the run verb's
    ``prepared_env`` (a local Keystone started and stopped, or an existing
    cloud from --spec or OS_* variables).
    """
    from rally_keystone_bench import rallyenv, runner

    if args.target == "mock":
        from rally_keystone_bench.deploy.mock import MockKeystone

        mock = MockKeystone(
            workers=args.mock_workers,
            service_time_ms=args.mock_service_time,
            run_dir=run_dir / "mock",
        )
        with mock:
            home = rallyenv.RallyHome(run_dir / "rally")
            home.create_env(ENV_NAME, rallyenv.keystone_spec(mock.admin_credentials))
            home.check_env(ENV_NAME)
            cap = mock.capacity_rps
            yield (
                home,
                ENV_NAME,
                f"mock at {mock.auth_url}: {args.mock_workers} worker(s), "
                f"{args.mock_service_time:g} ms service time, capacity "
                + (f"{cap:g} rps" if math.isfinite(cap) else "unbounded"),
            )
        return
    deployment = None
    if args.target == "local":
        from rally_keystone_bench.deploy.commands import deployment_from_args

        deployment = deployment_from_args(args)
    with runner.prepared_env(
        run_dir,
        existing_cloud=args.target == "cloud",
        spec_file=args.spec,
        deployment=deployment,
        say=say,
    ) as (home, env):
        desc = "existing cloud" if args.target == "cloud" else "local Keystone"
        yield home, env, desc


_ITER_RE = re.compile(r"ITER: \d+ (START|END: (\S+))")
_UUID_RE = re.compile(r"Task ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


def _start_probe_task(
    home: RallyHome,
    env: str,
    task_file: Path,
    task_args: dict[str, Any],
    log_path: Path,
    abort: bool,
    tick: Callable[[int, int, int], None],
) -> tuple[int, str | None, str | None]:
    """``rally task start``, its output to LOG_PATH; TICK(started, done, failed) each line.

    Returns Rally's exit code, the task uuid, and why the probe was stopped
    early (None if it was not). With ABORT the probe is aborted with
    ``rally task abort`` (Rally stops the runner, then cleans up) at the first failed
    iteration, when every iteration slot is in flight, or when the starts
    fall behind the target rate (below 80 % of it after the warm-up, 5 s at least):
    Rally's own SLA abort sees results late on a busy machine, and once the
    runner waits for slots the latency stops growing, so an overloaded probe
    would otherwise run several times its length.
    """
    from rally_keystone_bench.rallyenv import rally_executable
    from rally_keystone_bench.runners.progress import Totals, parse_progress

    # pooled_rps counts for itself: Rally's ITER lines are silenced (CPU).
    pooled = task_args.get("runner", "pooled_rps") == "pooled_rps"
    config = home.quiet_config() if pooled else home.config_path
    cmd = [rally_executable(), "--config-file", str(config), "task", "start"]
    cmd += [str(task_file), "--env", env, "--task-args", json.dumps(task_args)]
    if abort:
        cmd.append("--abort-on-sla-failure")
    rps, slots = float(task_args["rps"]), int(task_args["max_concurrency"])
    warmup = max(5.0, float(task_args["warmup"]))
    planned_s = float(task_args["warmup"]) + float(task_args["window"])
    uuid = stopped = None
    started = done = failed = 0
    first: float | None = None
    totals = Totals()  # pooled_rps: the latest counts of each runner process
    with open(log_path, "w") as log:
        # its own process group: the runner's worker processes go with it at the end
        proc = subprocess.Popen(
            cmd,
            env=home.environ(),
            cwd=home.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

        def stop(why: str) -> None:
            # ``rally task abort`` as a user would: Rally stops its runner, then
            # cleans up (a SIGINT to rally cleans up while the runner still runs)
            nonlocal stopped
            if stopped is None and abort and uuid is not None:
                stopped = why
                log.write(f"keystone-bench: stopping the probe: {why}\n")
                threading.Thread(
                    target=home.rally, args=("task", "abort", uuid), kwargs={"check": False}
                ).start()

        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                if uuid is None:
                    m = _UUID_RE.search(line)
                    if m:
                        uuid = m.group(1)
                m = _ITER_RE.search(line)
                counted = parse_progress(line)
                if m or counted:
                    if counted:
                        started, done, failed = totals.add(counted)
                    elif m.group(1) == "START":
                        started += 1
                    else:
                        done += 1
                        failed += m.group(2) != "OK"
                    if first is None and started:
                        first = time.monotonic()
                    if failed:
                        stop("an iteration failed")
                    elif started - done >= slots:
                        stop("every iteration slot in flight")
                    elif first is not None:
                        since = time.monotonic() - first
                        if since > warmup and started < 0.8 * rps * since:
                            stop(f"{started} started in {since:.0f} s, behind {_fmt(rps)} rps")
                        elif since > 2 * planned_s + 30:
                            stop("running past twice its length")
                tick(started, done, failed)
            rc = proc.wait()
        except KeyboardInterrupt:
            # let Rally abort the task and run its cleanup
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=600)
            raise
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # worker processes left behind
    return rc, uuid, stopped


class RallyProber:
    """Runs each probe as a real ``rally task start`` and judges its JSON report."""

    def __init__(
        self,
        home: RallyHome,
        env: str,
        settings: Settings,
        out_dir: Path,
        say: Callable[[str], None] = progress,
    ) -> None:
        self.home, self.env, self.settings = home, env, settings
        self.out_dir = out_dir
        self.say = say
        self.task_file = probe_task_path()
        self.started = time.monotonic()
        self.expected = estimated_probes(settings)
        self.count = 0
        self.done: list[Probe] = []
        self.lo: float | None = None  # highest passing rate so far
        self.hi: float | None = None  # lowest non-passing rate so far

    def verdict_so_far(self) -> str:
        lo = _fmt(self.lo) if self.lo is not None else "?"
        if self.hi is None:
            return f"N >= {lo} rps so far"
        return f"N in [{lo}, {_fmt(self.hi)}) rps so far"

    def __call__(self, rps: float, role: str) -> Probe:
        from rally_keystone_bench import results

        s = self.settings
        self.count += 1
        k = self.count
        about = max(self.expected, k)
        probe = Probe(k, role, rps, planned=s.times(rps), max_concurrency=s.max_concurrency(rps))
        stem = f"probe-{k:02d}-{_fmt(rps)}rps"
        self.say(
            f"probe {k} of about {about} ({role}): {_fmt(rps)} rps, {probe.planned} iterations "
            f"over {s.warmup + s.window:g} s; elapsed {_elapsed(time.monotonic() - self.started)}"
        )
        t0 = time.monotonic()
        last = [t0]
        log_path = self.out_dir / f"{stem}.rally.log"

        def tick(started: int, done: int, failed: int) -> None:
            now = time.monotonic()
            if now - last[0] >= 10.0 and started:
                last[0] = now
                self.say(
                    f"  probe {k}: {now - t0:.0f} s, {started} of {probe.planned} started, "
                    f"{done} done, {failed} failed"
                )

        rc, uuid, probe.stopped_for = _start_probe_task(
            self.home,
            self.env,
            self.task_file,
            s.task_args(rps),
            log_path,
            s.abort_on_sla_failure,
            tick,
        )
        probe.slots_full = probe.stopped_for == "every iteration slot in flight"
        probe.task_uuid = uuid
        json_path = self.out_dir / f"{stem}.json"
        if uuid is not None:
            report = self.home.rally(
                "task", "report", uuid, "--json", "--out", str(json_path), check=False
            )
        if uuid is None or report.returncode != 0:
            raise BenchError(
                f"probe {k} at {_fmt(rps)} rps: rally task start exited {rc} "
                f"without a result; see {log_path}"
            )
        workloads = results.load(json_path)
        if not workloads:
            raise BenchError(
                f"probe {k} at {_fmt(rps)} rps ran no workload (a context failed?); see {log_path}"
            )
        probe.report = str(json_path)
        judge(probe, workloads[0], s)
        probe.elapsed = time.monotonic() - t0
        self.done.append(probe)
        if probe.passed:
            self.lo = rps if self.lo is None else max(self.lo, rps)
        else:
            self.hi = rps if self.hi is None else min(self.hi, rps)
        why = f"; stopped: {probe.stopped_for}" if probe.stopped_for else ""
        self.say(
            f"probe {k}: {_fmt(rps)} rps -> {probe.verdict} ({probe.reason}) in "
            f"{probe.elapsed:.0f} s{why}; "
            f"{self.verdict_so_far()}"
        )
        return probe


def _elapsed(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


# -- reports -------------------------------------------------------------------
def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"arch": platform.machine(), "cores": os.cpu_count(), "cpu": model}


def build_summary(
    outcome: Outcome, settings: Settings, target: str, started_at: str, elapsed: float
) -> dict[str, Any]:
    """Everything capacity.json holds."""
    return {
        "scenario": settings.scenario,
        "rally_scenario": settings.rally_scenario,
        "action": settings.action,
        "target": target,
        "settings": dataclasses.asdict(settings),
        "result": {
            "n_rps": outcome.n,
            "status": outcome.status,
            "limited_by": outcome.limited_by,
            "confirmed": outcome.confirmed,
            "message": outcome.message,
        },
        "probes": [p.to_json() for p in outcome.probes],
        "started_at": started_at,
        "elapsed_s": round(elapsed, 1),
        "machine": machine(),
    }


VERDICT_COLORS = {
    OK: "#1b7a3a",
    ERRORS: "#b00020",
    SLOPE: "#d9822b",
    SATURATED: "#8e44ad",
    GENERATOR: "#888888",
}


def latency_against_rate_svg(probes: Sequence[Probe], n: float | None) -> str:
    """p50 and p95 latency (ms) of each probe's window against its target rate."""
    from rally_keystone_bench.report import svg

    pts = [p for p in probes if p.p50 is not None]
    title = "latency against target rate"
    if not pts:
        return svg._svg(title, [f'<text x="{svg.W / 2}" y="{svg.H / 2}">no samples</text>'])
    ok95 = [p.p95 for p in pts if p.passed and p.p95 is not None]
    all95 = [p.p95 or p.p50 for p in pts]
    cap = (max(ok95) * 4 if ok95 else max(all95) * 1.1) or 1e-3
    cap = min(cap, max(all95) * 1.1) * 1000
    rates = [p.rps for p in pts]
    fr = svg.Frame(0.0, max(rates) * 1.05, 0.0, cap)
    body = fr.axes("target rate (rps)", "latency in the window (ms)")
    above = 0
    for key, dash in (("p50", ""), ("p95", ' stroke-dasharray="5 3"')):
        ordered = sorted(pts, key=lambda p: (p.rps, p.number))
        xs = [fr.x(p.rps) for p in ordered]
        ys = [fr.y(min(getattr(p, key) * 1000, cap)) for p in ordered]
        body.append(
            f'<path class="{key}" d="{svg._path(xs, ys)}" stroke="#4a78b5" '
            f'stroke-width="1.5" fill="none"{dash}/>'
        )
        for p, x, y in zip(ordered, xs, ys, strict=True):
            above += key == "p95" and p.p95 * 1000 > cap
            body.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{4 if key == "p95" else 3}" '
                f'fill="{VERDICT_COLORS.get(p.verdict, "#333333")}">'
                f"<title>probe {p.number}: {_fmt(p.rps)} rps, {key} "
                f"{getattr(p, key) * 1000:.1f} ms, {p.verdict}</title></circle>"
            )
    if n is not None:
        x = fr.x(n)
        body.append(
            f'<path class="n" d="M{x:.1f},{svg.TOP} L{x:.1f},{svg.TOP + fr.ph}" '
            'stroke="#2e8b57" stroke-width="1.5" stroke-dasharray="2 3" fill="none"/>'
            f'<text x="{x + 4:.1f}" y="{svg.TOP + 12}">N = {_fmt(n)}</text>'
        )
    if above:
        body.append(
            f'<text x="{svg.W - svg.RIGHT}" y="{svg.TOP - 4}" text-anchor="end">'
            f"{above} p95 above {cap:.0f} ms drawn at the top</text>"
        )
    legend = [("#4a78b5", "p50 (solid), p95 (dashed)")] + [
        (c, v) for v, c in VERDICT_COLORS.items() if any(p.verdict == v for p in pts)
    ]
    return svg._svg(title, body, legend)


def sent_against_target_svg(probes: Sequence[Probe]) -> str:
    """Achieved (sent) rate of each probe against its target, with the 95 % line."""
    from rally_keystone_bench.report import svg

    pts = [p for p in probes if p.sent_rate is not None]
    title = "sent rate against target rate"
    if not pts:
        return svg._svg(title, [f'<text x="{svg.W / 2}" y="{svg.H / 2}">no samples</text>'])
    top = max(max(p.rps for p in pts), max(p.sent_rate for p in pts)) * 1.05
    fr = svg.Frame(0.0, top, 0.0, top)
    body = fr.axes("target rate (rps)", "sent rate in the window (rps)")
    body.append(
        f'<path class="target" d="M{fr.x(0):.1f},{fr.y(0):.1f} L{fr.x(top):.1f},{fr.y(top):.1f}" '
        'stroke="#888888" stroke-width="1" fill="none"/>'
        f'<path class="limit" d="M{fr.x(0):.1f},{fr.y(0):.1f} '
        f'L{fr.x(top):.1f},{fr.y(top * GENERATOR_SHARE):.1f}" stroke="#888888" '
        'stroke-width="1" stroke-dasharray="4 3" fill="none"/>'
    )
    for p in pts:
        body.append(
            f'<circle cx="{fr.x(p.rps):.1f}" cy="{fr.y(p.sent_rate):.1f}" r="4" '
            f'fill="{VERDICT_COLORS.get(p.verdict, "#333333")}">'
            f"<title>probe {p.number}: target {_fmt(p.rps)}, sent {p.sent_rate:.1f} rps</title>"
            "</circle>"
        )
    return svg._svg(
        title,
        body,
        [("#888888", "sent = target (solid), 95 % of it (dashed): below, generator-limited")],
    )


HTML = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>keystone-bench capacity: {{ s.scenario }}</title>
{% include "_style.html.j2" %}
</head>
<body>
<h1>Capacity of {{ s.rally_scenario }}</h1>
<p class="muted">{{ s.target }} &middot; started {{ s.started_at }} &middot;
{{ s.elapsed_s }} s &middot; {{ s.machine.arch }}, {{ s.machine.cores }} cores,
{{ s.machine.cpu }}</p>
<p class="verdict {{ 'good' if s.result.status in ('found', 'lower bound') else 'bad' }}">
{{ s.result.message }}</p>
<table class="meta">
<tr><th class="l">search</th><td>[{{ s.settings.low }}, {{ s.settings.high }}] rps by
bisection, precision {{ s.settings.precision }} rps; each probe {{ s.settings.warmup }} s of
warm-up and {{ s.settings.window }} s of window</td></tr>
<tr><th class="l">a probe passes</th><td>no failed iteration; slope of {{ s.action }} latency
at most {{ s.settings.max_slope }} s/s after the warm-up; not every iteration slot in
flight; at least 95 % of the target rate sent (else the generator was the limit)</td></tr>
</table>
<h2>Probes</h2>
<table class="probes">
<tr><th>#</th><th class="l">role</th><th>target rps</th><th>sent rps</th><th>ok it/s</th>
<th>iterations</th><th>failed</th><th>p50 (ms)</th><th>p95 (ms)</th><th>p99 (ms)</th>
<th>slope (s/s)</th><th>peak in flight</th><th class="l">verdict</th><th>time (s)</th></tr>
{% for p in s.probes %}
<tr><td>{{ p.number }}</td><td class="l">{{ p.role }}</td><td>{{ p.rps }}</td>
<td>{{ p.sent_rate|num("0.1f") }}</td><td>{{ p.throughput|num("0.1f") }}</td>
<td>{{ p.iterations }} of {{ p.planned }}</td><td>{{ p.failed }}</td>
<td>{{ p.p50|ms }}</td><td>{{ p.p95|ms }}</td><td>{{ p.p99|ms }}</td>
<td>{{ p.slope|num("0.3g") }}</td><td>{{ p.peak_concurrency }} of {{ p.max_concurrency }}</td>
<td class="l"><span class="{{ 'good' if p.passed else 'bad' }}">{{ p.verdict }}</span>
<br><span class="muted">{{ p.reason }}</span></td><td>{{ p.elapsed|num("0.0f") }}</td></tr>
{% endfor %}
</table>
<div class="charts">
{% for c in charts %}<figure>{{ c }}</figure>{% endfor %}
</div>
<p class="muted">Latencies are those of successful {{ s.action }} requests started in the
window. The sent rate counts iteration starts in the window; throughput counts successful
iterations per second of load.</p>
</body>
</html>
"""


def render_html(summary: dict[str, Any], probes: Sequence[Probe], n: float | None) -> str:
    from markupsafe import Markup

    from rally_keystone_bench.report.render import environment

    charts = [
        Markup(latency_against_rate_svg(probes, n)),
        Markup(sent_against_target_svg(probes)),
    ]
    return environment().from_string(HTML).render(s=summary, charts=charts)


def write_reports(
    outcome: Outcome,
    settings: Settings,
    target: str,
    out_dir: Path,
    started_at: str,
    elapsed: float,
) -> tuple[Path, Path]:
    """capacity.json and capacity.html in OUT_DIR."""
    summary = build_summary(outcome, settings, target, started_at, elapsed)
    json_path, html_path = out_dir / "capacity.json", out_dir / "capacity.html"
    json_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    html_path.write_text(render_html(summary, outcome.probes, outcome.n), encoding="utf-8")
    return json_path, html_path


def format_table(probes: Sequence[Probe]) -> str:
    """The probe table for the terminal."""

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1000:.1f}"

    lines = [
        f"{'#':>3} {'role':<12} {'target':>7} {'sent':>7} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'slope s/s':>10} {'failed':>6} {'time':>5}  verdict"
    ]
    for p in probes:
        sent = "-" if p.sent_rate is None else f"{p.sent_rate:.1f}"
        slope = "-" if p.slope is None else f"{p.slope:.3g}"
        lines.append(
            f"{p.number:>3} {p.role:<12} {_fmt(p.rps):>7} {sent:>7} {ms(p.p50):>8} "
            f"{ms(p.p95):>8} {slope:>10} {p.failed:>6} {p.elapsed:>4.0f}s  {p.verdict}"
        )
    return "\n".join(lines)


# -- the verb ------------------------------------------------------------------
def check_target(args: argparse.Namespace) -> None:
    """Target options that cannot work together; BenchError before any load."""
    if args.spec and args.target != "cloud":
        raise BenchError("--spec describes an existing cloud: use it with --target cloud")
    if args.target == "mock":
        if args.mock_workers < 1:
            raise BenchError(f"--mock-workers must be at least 1, not {args.mock_workers}")
        if not math.isfinite(args.mock_service_time) or args.mock_service_time < 0:
            raise BenchError(
                f"--mock-service-time must be 0 ms or more, not {args.mock_service_time:g}"
            )
    if args.target == "cloud" and args.spec and not Path(args.spec).is_file():
        raise BenchError(f"env spec {args.spec} does not exist")


def main(args: argparse.Namespace) -> int:
    """``keystone-bench capacity``: print N and write reports/<ts>/capacity.{json,html}."""
    from rally_keystone_bench import runner

    settings = check_settings(args)
    check_target(args)
    probe_task_path()
    if args.target == "local":
        from rally_keystone_bench.deploy.commands import deployment_from_args

        deployment_from_args(args).validate()
    stamp = runner.utc_stamp()
    out_dir = (Path(args.reports_dir) / stamp).resolve()
    run_dir = Path(runner.RUNS_DIR) / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    progress(
        f"capacity of {settings.rally_scenario} in [{_fmt(settings.low)}, "
        f"{_fmt(settings.high)}] rps, precision {_fmt(settings.precision)}: about "
        f"{estimated_probes(settings)} probes of {settings.warmup + settings.window:g} s"
    )
    prober: RallyProber | None = None
    target = args.target
    try:
        with runner.sigterm_as_interrupt(), prepared_target(args, run_dir) as (home, env, target):
            progress(f"target: {target}")
            prober = RallyProber(home, env, settings, out_dir)
            outcome = find_capacity(settings, prober)
    except (BenchError, KeyboardInterrupt):
        if prober is not None and prober.done:  # keep what was measured
            partial = Outcome(
                None, "interrupted", message="the search did not finish", probes=prober.done
            )
            write_reports(partial, settings, target, out_dir, started_at, time.monotonic() - t0)
            progress(f"the search did not finish; probes so far in {out_dir}")
        raise
    elapsed = time.monotonic() - t0
    json_path, html_path = write_reports(outcome, settings, target, out_dir, started_at, elapsed)
    print(format_table(outcome.probes))
    print(f"{outcome.message}")
    print(f"capacity: {html_path}")
    print(f"capacity: {json_path}")
    print(f"elapsed: {_elapsed(elapsed)}")
    if outcome.status == "not measurable":
        raise BenchError(outcome.message)
    return outcome.exit_code
