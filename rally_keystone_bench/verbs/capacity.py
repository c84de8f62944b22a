"""``keystone-bench capacity``: search N, the highest rate Keystone serves without degrading.

verdicts/capacity.py holds the settings, verdicts/capacity_search.py the search,
verdicts/probe_verdict.py a probe's verdict; here the settings are checked and
each probe is run by a prober of the engine asked (verdicts/probing.py):
``driver/probers.RallyProber``, a real ``rally task start`` watched line by
line so that an overloaded probe is stopped early, or
``engines/locust/prober.LocustProber``. On a local Keystone every probe of
a search uses one set of users (a keystone_users reuse tag made for the
search).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import math
import time
import uuid
from pathlib import Path
from typing import Any

from rally_keystone_bench import boundary, shipped
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.driver import interrupts, left_behind, targets, workspace
from rally_keystone_bench.driver import machine as machine_record
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.probe_evidence import ProbeEvidence
from rally_keystone_bench.driver.probers import RallyProber, elapsed_text
from rally_keystone_bench.driver.rally import auth_url_of
from rally_keystone_bench.engines.locust import setup as locust_setup
from rally_keystone_bench.engines.locust.engine import check_planned
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.history.records import ActionRow
from rally_keystone_bench.plugins.contexts import reuse
from rally_keystone_bench.report import capacity as capacity_report
from rally_keystone_bench.verbs import groups, options
from rally_keystone_bench.verbs.groups.target import EngineSettings, MockSettings, TargetSettings
from rally_keystone_bench.verdicts import capacity, capacity_search, probe_verdict, probing
from rally_keystone_bench.verdicts.capacity import fmt

say = rally_task.progress  # the search's progress lines

# The option groups capacity composes; the rules they apply under, in the order checked.
TARGET = groups.Target(default="local")
MOCK = groups.Mock(
    20.0, "--target mock: ms per token request and worker (default 20: 50 rps a worker)", False
)
DEPLOYMENT = groups.Deployment()
ENGINE = groups.Engine(
    ["rally", "locust"],
    "load engine of every probe: rally (pooled_rps, default) or locust",
    "locust_workers",
    "--engine locust: worker processes on this host (default 1); "
    "--workers stays the local Keystone's",
    runner=True,
    ruled=True,
)
RULES = groups.rules(DEPLOYMENT, MOCK, TARGET, ENGINE)


def _finite(name: str, value: float) -> float:
    if value is None or not math.isfinite(value):
        raise BenchError(f"{name} must be a finite number, not {value}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class CapacityArgs:
    """capacity's own options as given (options.read), and the --target, --workers and
    --force its checks read before the Target and Deployment groups check theirs."""

    scenario: str
    low: float
    high: float
    warmup: float
    window: float
    max_slope: float
    precision: float
    abort_on_sla_failure: bool
    ramp: bool | None
    predict: bool | None
    target: str
    workers: int | None
    force: bool


@dataclasses.dataclass(frozen=True)
class CapacityInputs:
    """What ``capacity`` was asked, read and checked once at the door (``at_the_door``):
    nothing past it sees the command line."""

    settings: capacity.Settings  # the search's
    where: TargetSettings
    mock: MockSettings  # --target mock's
    deployment: Deployment | None  # --target local's, validated
    cloud: dict | None  # --target cloud's Rally env spec
    history: str | None  # the results store's URL (None: no store)


def at_the_door(args: argparse.Namespace) -> CapacityInputs:
    """The verb's inputs; bad input is a BenchError here, in this order, before any file."""
    settings = check_settings(options.read(CapacityArgs, args), ENGINE.settings(args))
    where = TARGET.settings(args)
    mocked = MOCK.settings(args)
    shipped.probe_task_path()
    deployment = DEPLOYMENT.settings(args) if where.target == "local" else None
    cloud = where.cloud_spec() if where.target == "cloud" else None
    return CapacityInputs(settings, where, mocked, deployment, cloud, options.check_history(args))


def check_settings(asked: CapacityArgs, chosen: EngineSettings) -> capacity.Settings:
    """The search's settings from ASKED and the engine CHOSEN; BenchError for any bad one."""
    if asked.scenario not in capacity.SCENARIOS:  # lifecycle: one probe's, not a search's
        raise BenchError(
            f"capacity searches {' or '.join(capacity.SCENARIOS)}, not --scenario "
            f"{asked.scenario} (keystone-bench load probes it once)"
        )
    low, high = _finite("--low", asked.low), _finite("--high", asked.high)
    warmup, window = _finite("--warmup", asked.warmup), _finite("--window", asked.window)
    max_slope = _finite("--max-slope", asked.max_slope)
    precision = _finite("--precision", asked.precision)
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
    engine, runner = chosen.engine, chosen.runner
    locust_workers = chosen.locust_workers or 1
    if chosen.locust_workers is not None and chosen.locust_workers < 1:
        raise BenchError(  # load's 0 waits for --expect-workers: capacity starts its own
            f"--locust-workers must be at least 1, not {chosen.locust_workers}: capacity "
            "starts its Locust workers on this host"
        )
    if asked.workers is not None and asked.target != "local":
        # --workers is the local Keystone's; a Locust user may read it as load.py's
        hint = ": the Locust engine's worker processes are --locust-workers K"
        raise BenchError(
            f"--workers is the local Keystone's server processes (--target local), "
            f"not --target {asked.target}" + (hint if engine == "locust" else "")
        )
    ramp = asked.ramp
    if engine == "rally" and runner != "pooled_rps" and ramp:
        raise BenchError(f"--ramp runs on the pooled_rps runner, not --runner {runner}")
    if ramp is None:  # default: bracket first, wherever the runner can ramp
        ramp = engine == "locust" or runner == "pooled_rps"
    predict = _check_predict(asked.predict, engine == "rally" and asked.target == "local", ramp)
    forced = options.check_rate("--high", high, engine, runner, asked.force)
    if forced:
        say(forced)
    if engine == "locust":
        check_planned(f"--high {high:g} rps", high, warmup + window, " in a probe")
    if low * window < 3:
        raise BenchError(
            f"--low {low:g} rps over a {window:g} s window gives fewer than 3 points "
            "to fit a slope: raise --low or --window"
        )
    return capacity.Settings(
        scenario=asked.scenario,
        low=low,
        high=high,
        warmup=warmup,
        window=window,
        max_slope=max_slope,
        precision=precision,
        abort_on_sla_failure=asked.abort_on_sla_failure,
        runner=runner,
        engine=engine,
        locust_workers=locust_workers,
        ramp=ramp,
        predict=predict,
    )


def _check_predict(asked: bool | None, possible: bool, ramp: bool) -> bool:
    """--predict: on by default where Keystone's busy time is read (a local Keystone's
    access log, probes on the Rally engine: POSSIBLE) and a ramp measures it first; ASKED:
    --predict as given."""
    if asked and not possible:
        raise BenchError(
            "--predict reads a local Keystone's access log: it needs --target local "
            "and --engine rally"
        )
    if asked and not ramp:
        raise BenchError("--predict reads the ramp's Keystone-side figures: drop --no-ramp")
    return bool(ramp and possible) if asked is None else bool(asked)


def _search_locust(
    settings: capacity.Settings,
    run_dir: Path,
    out_dir: Path,
    where: groups.TargetSettings,
    probers: list[probing.Prober],
    plan: capacity.Plan,
    **target: Any,
) -> tuple[capacity.Outcome, str]:
    """The search with every probe on the Locust engine (a ramp first to bracket N)."""
    from rally_keystone_bench.engines.locust.prober import LocustProber

    with targets.started_target(run_dir, say=rally_task.progress, **target) as (
        credential,
        auth_url,
    ):
        described = targets.describe(where.target, auth_url, target.get("mock"))
        rally_task.progress(
            f"target: {described}; engine: locust, {settings.locust_workers} worker(s)"
        )
        sampling = machine_record.target_sampling(run_dir)  # the machine during each probe
        prober = LocustProber(credential, settings, out_dir, say, sampling=sampling)
        probers.append(prober)
        ramp = prober.ramp if settings.ramp else None
        return capacity_search.find_capacity(
            settings, prober, say=rally_task.progress, ramp=ramp, plan=plan
        ), described


def _search_rally(
    settings: capacity.Settings,
    run_dir: Path,
    out_dir: Path,
    where: groups.TargetSettings,
    probers: list[probing.Prober],
    plan: capacity.Plan,
    deployment: Any = None,
    **target: Any,
) -> tuple[capacity.Outcome, str]:
    """The search with every probe a real ``rally task start`` (a ramp first to bracket N)."""
    with targets.prepared_env(run_dir, deployment=deployment, admin_user=True, **target) as env:
        described = targets.describe(where.target, env.auth_url, target.get("mock"))
        rally_task.progress(f"target: {described}")
        ldap = targets.identity_task_args(deployment, {})
        prober = RallyProber(
            env.home,
            env.name,
            settings,
            out_dir,
            extra_args=ldap,
            evidence=ProbeEvidence(env.keystone_dir, say),
            plan=plan,
            reuse=users_tag(where, ldap),
            sampling=machine_record.target_sampling(run_dir),  # the machine during each probe
        )
        probers.append(prober)
        ramp = prober.ramp if settings.ramp else None
        try:
            outcome = capacity_search.find_capacity(
                settings, prober, say=rally_task.progress, ramp=ramp, plan=plan
            )
        finally:  # the search's users' passwords and pooled tokens, kept by its probes
            if prober.reuse:
                reuse.forget(prober.reuse, env.auth_url, env.home.environ())
        return outcome, described


def main(args: argparse.Namespace) -> int:
    """``keystone-bench capacity``: print N and write reports/<ts>/capacity.{json,html}."""
    door = at_the_door(args)
    settings, where, deployment, cloud = door.settings, door.where, door.deployment, door.cloud
    out_dir, run_dir = workspace.new_run_dirs(where.reports_dir)
    mock = door.mock.keystone(run_dir) if where.target == "mock" else None
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    plan = capacity.Plan(capacity.estimated_probes(settings))
    how = "a ramp, then whole probes at the knee it predicts" if settings.predict else "search"
    rally_task.progress(
        f"capacity of {settings.rally_scenario} in [{fmt(settings.low)}, "
        f"{fmt(settings.high)}] rps, precision {fmt(settings.precision)}: about "
        f"{plan.about} probes of {settings.warmup + settings.window:g} s ({how})"
    )
    probers: list[probing.Prober] = []  # the prober, once made: its probes are kept on error
    target = where.target
    try:
        with interrupts.sigterm_as_interrupt():
            if settings.engine == "locust":
                outcome, target = _search_locust(
                    settings,
                    run_dir,
                    out_dir,
                    where,
                    probers,
                    plan,
                    cloud=cloud,
                    mock=mock,
                    deployment=deployment,
                )
            else:
                outcome, target = _search_rally(
                    settings,
                    run_dir,
                    out_dir,
                    where,
                    probers,
                    plan,
                    cloud=cloud,
                    mock=mock,
                    deployment=deployment,
                )
    except (BenchError, KeyboardInterrupt):
        if probers and probers[0].done:  # keep what was measured
            partial = capacity.Outcome(
                None, "interrupted", message="the search did not finish", probes=probers[0].done
            )
            capacity_report.write_reports(
                partial, settings, target, out_dir, started_at, time.monotonic() - t0
            )
            rally_task.progress(f"the search did not finish; probes so far in {out_dir}")
        say_left_behind(probers, cloud, where.spec)
        raise
    elapsed = time.monotonic() - t0
    json_path, html_path = capacity_report.write_reports(
        outcome, settings, target, out_dir, started_at, elapsed
    )
    print_outcome(outcome, (json_path, html_path), elapsed)
    say_left_behind(probers, cloud, where.spec)
    if outcome.status == "not measurable":
        raise BenchError(outcome.message)
    options.record_history(
        door.history,
        "capacity",
        out_dir,
        deployment,
        where=target,
        rows=[capacity_row(settings, outcome)],
    )
    return outcome.exit_code


def print_outcome(outcome: capacity.Outcome, paths: tuple[Path, Path], elapsed: float) -> None:
    """The probe table, N, the prediction, the reports and the time it took."""
    print(capacity_report.format_table(outcome.probes))
    print(f"{outcome.message}")
    if outcome.prediction:
        print(f"prediction: {outcome.prediction}")
    print(f"capacity: {paths[1]}")
    print(f"capacity: {paths[0]}")
    runs = len({p.number for p in outcome.probes})
    print(f"elapsed: {elapsed_text(elapsed)}, {runs} probes{setup_text(outcome.probes)}")


def users_tag(where: groups.TargetSettings, ldap: dict[str, Any]) -> str | None:
    """The keystone_users reuse tag of a search on a local Keystone (its users made once,
    by the first probe, and reused by every other); None elsewhere: a cloud keeps
    nothing of ours after a probe, and a directory's users are never made."""
    if where.target != "local" or ldap:
        return None
    return f"capacity-{uuid.uuid4().hex[:12]}"


def setup_text(probes: list[probe_verdict.Probe]) -> str:
    """The probes' setup (users, tokens) in all, as the elapsed line adds it."""
    setups = [p.setup for p in probes if p.setup is not None]
    if not setups:
        return ""
    return f"; setup {elapsed_text(sum(setups))} of it (users, tokens)"


def say_left_behind(probers: list, cloud: dict | None, spec: str | None) -> None:
    """On a cloud: what probes cut short (or whose cleanup failed) may have left there."""
    if cloud is None or not probers:
        return
    left_behind.say_left_behind(getattr(probers[0], "tasks", []), auth_url_of(cloud), spec)
    for run_id in getattr(probers[0], "run_ids", []):  # a Locust master killed
        what = locust_setup.describe_left(probers[0].credential, run_id)
        if what:
            print(left_behind.load_line(run_id, what, auth_url_of(cloud), spec))


def capacity_row(settings: capacity.Settings, outcome: capacity.Outcome) -> ActionRow:
    """The capacity as a history row: its rate is N (None when even --low degrades), its
    count the probes it took."""
    return ActionRow(
        workload=f"capacity {settings.rally_scenario} ({settings.engine})",
        action="capacity",
        p50=None,
        p95=None,
        p99=None,
        rate=outcome.n,
        success_percent=None,
        count=len(outcome.probes),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench capacity``."""
    options.add_scenario_option(
        parser, "the token path searched: authenticate or validate", required=True
    )
    parser.add_argument(
        "--low",
        type=boundary.non_negative,
        default=1.0,
        help="lowest rate searched, in rps (default 1)",
    )
    parser.add_argument(
        "--high",
        type=boundary.non_negative,
        default=200.0,
        help="highest rate searched, in rps (default 200)",
    )
    parser.add_argument("--warmup", type=boundary.non_negative, default=60.0, help="seconds")
    parser.add_argument("--window", type=boundary.non_negative, default=300.0, help="seconds")
    parser.add_argument(
        "--max-slope",
        type=boundary.number_in(),
        default=0.01,
        help="a probe degrades when latency grows faster than this, in seconds per second "
        "past the warm-up (default 0.01)",
    )
    parser.add_argument("--precision", type=boundary.non_negative, default=1.0, help="rps")
    ENGINE.add(parser)
    parser.add_argument(
        "--ramp",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bracket N with one ramp probe first (default: on, but with --runner rps)",
    )
    parser.add_argument(
        "--predict",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="probe at the knee the ramp's Keystone busy time predicts (default: on with a "
        "local Keystone and the ramp)",
    )
    add_target_arguments(parser)


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """What each probe measures (--target, the mock's and local Keystone's options)
    and where its results go."""
    TARGET.add(parser)
    options.add_history_option(parser)
    parser.add_argument(
        "--abort-on-sla-failure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stop a failing probe early (default on)",
    )
    MOCK.add(parser)
    DEPLOYMENT.add(parser)
