"""``keystone-bench load``: one open-model probe on either engine, with its report.

``--engine locust`` (a Locust master, ``--locust-workers K`` local workers and
``--expect-workers K`` more started on other hosts) or ``--engine rally``
(``rally task start`` with the pooled_rps runner: the same probe as one step
of ``capacity``). Either engine's prober runs it (verdicts/probing.Prober:
``run`` gives the load as it ran, before the verdict capacity adds). Either
way the result is a Rally JSON report, and summary.html/summary.json beside
it show service time and response time side by side, and the achieved rate
against the target. The machine is sampled while the load runs
(driver/machine.py): its record goes in summary.json and load.json, and is
printed as ``machine during the load: ...``, as ``run`` does.

Exit codes: 0 done; 1 requests failed (the failure_rate criterion); 2 bad
input or environment, with nothing sent (a rate <= 0, K < 1, an unbindable
master, workers that never joined), or a lost worker (the report is kept
and says so) or users left in Keystone.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rally_keystone_bench import boundary, shipped
from rally_keystone_bench.clients import credentials
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver import interrupts, left_behind, preflight, targets, workspace
from rally_keystone_bench.driver import machine as machine_record
from rally_keystone_bench.driver.probers import RallyProber
from rally_keystone_bench.driver.rally import auth_url_of
from rally_keystone_bench.driver.task import progress
from rally_keystone_bench.engines.locust import engine
from rally_keystone_bench.engines.locust import setup as locust_setup
from rally_keystone_bench.engines.locust.prober import LocustProber
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.report import render
from rally_keystone_bench.report.records import LoadRecord
from rally_keystone_bench.verbs import groups, options, recording
from rally_keystone_bench.verbs.groups.target import MockSettings, TargetSettings
from rally_keystone_bench.verdicts import capacity, probing, results
from rally_keystone_bench.verdicts.probing import LoadRun


@dataclasses.dataclass(frozen=True)
class LoadArgs:
    """load's own options as given (options.read), and the --engine and --force its
    checks read."""

    locustfile: bool
    scenario: str | None
    rate: float
    duration: float
    warmup: float
    workers: int | None
    expect_workers: int | None
    master_bind: str | None
    expect_timeout: float
    arrival: str
    users: int | None
    http: str
    server_workers: int | None
    engine: str
    force: bool


def settings_from(asked: LoadArgs) -> engine.LoadSettings:
    """The probe's settings, checked (engine.check_load): what, how fast, from which workers."""
    host, port = engine.parse_bind(asked.master_bind)
    expect = asked.expect_workers or 0
    workers = asked.workers
    if workers is None:
        workers = 0 if expect else 1
    s = engine.LoadSettings(
        scenario=asked.scenario,
        rate=asked.rate,
        duration=asked.duration,
        warmup=asked.warmup,
        workers=workers,
        expect_workers=expect,
        master_host=host,
        master_port=port,
        expect_timeout=asked.expect_timeout,
        arrival=asked.arrival,
        users=asked.users,
        http=asked.http,
        force=asked.force or asked.engine == "rally",  # Rally's own ceiling: check_rally
    )
    if asked.workers is not None and asked.workers < 1 and not expect:
        raise BenchError(f"--workers must be at least 1, not {asked.workers}")
    engine.check_load(s)
    over = engine.over_ceiling(s) if asked.force and asked.engine == "locust" else None
    if over:
        progress(f"--force: {over}")
    return s


@dataclasses.dataclass(frozen=True)
class LoadSettings:
    """What ``load`` was asked, read and checked once at the door (``at_the_door``):
    nothing past it sees the command line."""

    engine_name: str  # locust or rally
    probe: engine.LoadSettings  # the load: its rate, duration, workers, master
    where: TargetSettings  # the target, its --spec, --reports-dir and --force as given
    mock: MockSettings  # --target mock's
    deployment: Deployment | None  # --target local: validated, --server-workers its workers
    master_bind: str | None  # as given (the probe holds it parsed)
    history: str | None  # the results store's URL (None: no store)


def at_the_door(args: argparse.Namespace) -> tuple[LoadSettings, dict[str, Any] | None] | None:
    """The verb's settings, and --target cloud's admin credential (checked: it answers, as
    a Keystone, to it); bad input is a BenchError here, in this order, before any file.
    None: --locustfile, only our locustfile's path asked."""
    asked = options.read(LoadArgs, args)
    if asked.locustfile:
        return None
    if not asked.scenario:
        raise BenchError("--scenario is required (authenticate, validate or lifecycle)")
    probe = settings_from(asked)
    where = TARGET.settings(args)  # a --spec that is no cloud's
    mock = MOCK.settings(args)  # a stall without its period
    if asked.engine == "locust":
        engine.bindable(probe.master_host, probe.master_port)  # before any load
    else:
        check_rally(probe, where.force)
    # A cloud that is no Keystone, or refuses its admin, is said before any file is made.
    cloud = cloud_credential(where.spec) if where.target == "cloud" else None
    deployment = None
    if where.target == "local":  # a bad --keystone or --set leaves no file
        deployment = DEPLOYMENT.settings(args, workers=asked.server_workers)
    history = options.check_history(args)
    found = LoadSettings(asked.engine, probe, where, mock, deployment, asked.master_bind, history)
    return found, cloud


@contextlib.contextmanager
def admin_target(
    settings: LoadSettings, run_dir: Path, say=progress, cloud: dict | None = None
) -> Iterator[tuple[dict[str, Any], str]]:
    """The admin credential of the target, started here (mock, local) and stopped after."""
    if settings.where.target == "mock":
        mock = settings.mock.keystone(run_dir)
        with mock:
            cap = mock.capacity_rps
            yield (
                mock.admin_credentials,
                f"mock at {mock.auth_url}: {settings.mock.workers} worker(s), "
                f"{settings.mock.service_time_ms:g} ms service time, capacity "
                + (f"{cap:g} rps" if math.isfinite(cap) else "unbounded"),
            )
        return
    if settings.where.target == "cloud":
        credential = cloud or cloud_credential(settings.where.spec)
        yield credential, f"existing cloud at {credential['auth_url']}"
        return
    assert settings.deployment is not None  # --target local's, made at the door
    keystone = LocalKeystone(settings.deployment, run_dir / "keystone", progress=say)
    try:
        targets.start_explained(keystone)
        say(f"Keystone is up at {keystone.auth_url} (logs in {keystone.run_dir})")
        yield keystone.admin_credentials, f"local Keystone at {keystone.auth_url}"
    finally:
        keystone.stop()
        say("Keystone stopped")


def cloud_credential(spec: str | None) -> dict[str, Any]:
    """The admin credential of --target cloud (its env SPEC file, else the OS_* variables),
    checked: it answers, as a Keystone, to it."""
    credential = credentials.from_spec_file(spec) if spec else credentials.from_environ(os.environ)
    targets.check_reachable(credential["auth_url"])
    preflight.check_keystone({**credential, "admin": credential})
    return credential


def load_record(settings: LoadSettings, started: str) -> LoadRecord:
    """load.json at the door: the probe's settings and the target's under their own names,
    and what the record names otherwise or keeps as given."""
    mocked = settings.mock if settings.where.target == "mock" else None
    local = settings.deployment
    asked = {
        "engine": settings.engine_name,
        "started_at": started,
        "locust_workers": settings.probe.workers,  # started on this host
        "master_bind": settings.master_bind,  # as given
        "mock": dataclasses.asdict(mocked) if mocked is not None else None,
        "deployment": dataclasses.asdict(local) if local is not None else None,
    }
    # The target's before the probe's: its --force as given (the probe's is forced on Rally).
    return LoadRecord.of(asked, settings.where, settings.probe)


@dataclasses.dataclass
class LoadOutput:
    """Where a load's files go, its record, and the summary it wrote (for the history)."""

    dir: Path
    record: LoadRecord
    summary: render.WrittenSummary | None = None

    def write_record(self) -> None:
        """load.json, passwords masked."""
        self.record.write(self.dir)


# The option groups load composes; the rules they and load's own options apply under,
# in the order checked.
TARGET = groups.Target(default="mock")
MOCK = groups.Mock(5.0, "--target mock: milliseconds each token request takes (default 5)", True)
DEPLOYMENT = groups.Deployment(workers=False)
ENGINE = groups.Engine(
    ["locust", "rally"],
    "load engine of the probe: locust (default) or rally",
    "workers",
    "Locust worker processes started on this host (default 1, 0 with --expect-workers)",
)
RULES = groups.rules(
    DEPLOYMENT,
    {"server_workers": groups.LOCAL},
    MOCK,
    TARGET,
    dict.fromkeys(("users", "http", "master_bind", "expect_timeout", "arrival"), groups.LOCUST),
)

# Where a run's files go in the load's directory, by engine: its report, its
# log (Locust's: a directory of the master's and workers' logs and samples).
RUN_FILES = {
    "rally": ("rally-report.json", "rally-task.log"),
    "locust": ("locust-report.json", "locust"),
}


def probe_settings(load: engine.LoadSettings, engine_name: str) -> capacity.Settings:
    """LOAD as one capacity probe at its rate, without a verdict on its slope."""
    return capacity.Settings(
        scenario=load.scenario,
        low=load.rate,
        high=load.rate,
        warmup=load.warmup,
        window=load.duration,
        max_slope=1e6,  # one probe, no verdict on its slope
        precision=1.0,
        abort_on_sla_failure=False,
        engine=engine_name,
    )


def run_probe(
    prober: probing.Prober, rate: float, out: LoadOutput, engine_name: str, **load: Any
) -> LoadRun:
    """PROBER's one load at RATE, its files in OUT; an interrupted one reported, then raised."""
    report, log = RUN_FILES[engine_name]
    try:
        run = prober.run(rate, out.dir / report, out.dir / log, **load)
    except KeyboardInterrupt as exc:
        # Locust's prober attaches the samples it kept as a LoadRun; Rally's task runner
        # attaches its TaskRun under the same name (what a cut-short task may have left).
        kept = getattr(exc, "run", None)
        if isinstance(kept, LoadRun) and kept.report is not None:  # reported, then 130/143
            summarize(kept.report, out, kept.sampler)
            print(f"interrupted: {kept.meta['samples_total']} samples kept")
        raise
    if run.report is None:
        raise BenchError(run.error)
    return run


def report_run(run: LoadRun, out: LoadOutput) -> int:
    """Print and summarize RUN; 1 when requests failed, BenchError (2) when it fell short."""
    rc = summarize(run.report, out, run.sampler)
    meta = run.meta
    if run.samples is not None:  # Locust's own figures
        print(f"samples: {run.samples}")
        got, kept = meta["samples_total"], meta["samples_in_report"]
        print(
            f"workers: {len(meta['workers'])}; samples: {got} received of "
            f"{meta['samples_reported']} the workers sent, {kept} in the report"
        )
    if meta.get("left_behind"):  # on a cloud, said_left_in_cloud printed its cleanup
        raise BenchError(f"left in Keystone: {', '.join(meta['left_behind'])}")
    if run.error:
        raise BenchError(f"{run.error} (report kept: {run.report})")
    return rc


def run_locust(
    settings: LoadSettings, out: LoadOutput, run_dir: Path, cloud: dict | None = None
) -> int:
    run_id = locust_setup.new_run_id()  # the names of the users it makes: kbl-<run_id>
    load = settings.probe
    with admin_target(settings, run_dir, cloud=cloud) as (credential, desc):
        progress(f"target: {desc}")
        cap = probe_settings(load, "locust")
        sampling = machine_record.target_sampling(run_dir)
        prober = LocustProber(credential, cap, out.dir, progress, load=load, sampling=sampling)
        with said_left_in_cloud(run_id, cloud, settings.where.spec):
            run = run_probe(prober, load.rate, out, "locust", run_id=run_id)
    if settings.where.target != "cloud" and run.error and run.meta.get("left_behind"):
        # The mock (or local Keystone) failed under the load, and the users the
        # master could not delete there went with it: its error is what to say.
        run.meta["left_behind"] = []
    return report_run(run, out)


@contextlib.contextmanager
def said_left_in_cloud(run_id: str, cloud: dict | None, spec: str | None) -> Iterator[None]:
    """On a cloud, after the load however it ended: what the master left there, and its cleanup.

    The master deletes its users and project itself, at a signal too; a
    master killed (SIGKILL, the OOM killer) or a failed delete leaves them.
    Looked up in the cloud (``setup.describe_left``).
    """
    try:
        yield
    finally:
        what = locust_setup.describe_left(cloud, run_id) if cloud is not None else ""
        if what:
            print(left_behind.load_line(run_id, what, cloud["auth_url"], spec))


def check_rally(load: engine.LoadSettings, force: bool = False) -> None:
    """What the Rally engine cannot do with LOAD; BenchError before any load."""
    if load.scenario not in capacity.PROBE_SCENARIOS:
        raise BenchError(
            f"--engine rally runs {', '.join(capacity.PROBE_SCENARIOS)}; "
            f"{load.scenario} runs on --engine locust"
        )
    if load.expect_workers or load.workers > 1:
        raise BenchError("--engine rally runs on this host only: drop --workers/--expect-workers")
    forced = options.check_rate("--rate", load.rate, "rally", "pooled_rps", force)
    if forced:
        progress(forced)


def run_rally(settings: LoadSettings, out: LoadOutput, run_dir: Path) -> int:
    shipped.probe_task_path()  # a broken install is said before the target starts
    where, deployment = settings.where, settings.deployment
    mock = settings.mock.keystone(run_dir) if where.target == "mock" else None
    cloud = where.cloud_spec() if where.target == "cloud" else None
    prober: RallyProber | None = None
    try:
        with targets.prepared_env(
            run_dir, cloud=cloud, mock=mock, deployment=deployment, admin_user=True
        ) as env:
            progress(f"target: {targets.describe(where.target, env.auth_url, mock)}")
            prober = RallyProber(
                env.home,
                env.name,
                probe_settings(settings.probe, "rally"),
                out.dir,
                sampling=machine_record.target_sampling(run_dir),
            )
            run = run_probe(prober, settings.probe.rate, out, "rally")
        return report_run(run, out)
    finally:
        if cloud is not None and prober is not None:  # a local Keystone goes with its leftovers
            left_behind.say_left_behind(prober.tasks, auth_url_of(cloud), where.spec)


def summarize(report: Path, out: LoadOutput, sampler: Any = None) -> int:
    """REPORT's summary (and the machine's record from SAMPLER) written and printed; 1
    when requests failed."""
    workloads = results.load(report)
    state = machine_record.state_of(sampler, workloads)
    out.summary = render.write_summary(workloads, out.dir, str(report), machine=state)
    print(f"report: {report}")
    print(f"summary: {out.summary.html}")
    failed = 0
    for wl in workloads:
        s = render.workload_summary(wl, 0)
        target, achieved = s["rps_target"], s["rps_achieved"]
        rate = "-" if achieved is None else f"{achieved:.1f}"
        share = ""
        if target and achieved is not None:  # None: nothing was sent (a bad cloud, no worker)
            share = f" ({100 * achieved / target:.1f} % of the target {target:g})"
        print(f"started {rate} requests/s{share}; {wl.failed_iterations} failed")
        for name, a in s["actions"].items():
            if name == "total":
                continue
            line = f"{name}: service time p50 {_ms(a['p50'])} p99 {_ms(a['p99'])}"
            if a.get("response"):
                r = a["response"]
                line += f"; response time p50 {_ms(r['p50'])} p99 {_ms(r['p99'])}"
            print(line + f"; {a['count']} requests, {a['success_percent']:.1f} % ok")
        failed += wl.failed_iterations
    if state is not None:
        print(f"machine during the load: {state.headline()}")
        out.record = dataclasses.replace(out.record, machine=state.as_dict())
        out.write_record()  # load.json, completed
    return 1 if failed else 0


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1000:.1f} ms"


def main(args: argparse.Namespace) -> int:
    """``keystone-bench load``."""
    door = at_the_door(args)
    if door is None:  # --locustfile
        print(engine.locustfile_path())
        return 0
    settings, cloud = door
    load, where = settings.probe, settings.where
    out_dir, run_dir = workspace.new_run_dirs(where.reports_dir)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    progress(
        f"{settings.engine_name} engine: {load.scenario} at {load.rate:g} requests/s for "
        f"{load.duration:g} s after {load.warmup:g} s of warm-up ({started})"
    )
    out = LoadOutput(out_dir, load_record(settings, started))
    out.write_record()  # before the load: what was asked, should it be cut short
    if settings.engine_name == "locust":
        # A second signal while the master collects and writes would lose it all.
        with interrupts.sigterm_as_interrupt(later_noted=True):
            rc = run_locust(settings, out, run_dir, cloud)
    else:
        with interrupts.sigterm_as_interrupt():
            rc = run_rally(settings, out, run_dir)
    written = [(out.summary.html, out.summary.doc)] if out.summary is not None else []
    summaries = recording.summaries_of(written, out_dir, "load")
    local, what = settings.deployment, f"{where.target} target"
    options.record_history(settings.history, "load", out_dir, local, summaries, where=what)
    return rc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench load``."""
    ENGINE.add_engine(parser)
    options.add_scenario_option(parser, "the token path probed", required=False)
    parser.add_argument("--rate", type=float, default=10.0, help="requests per second (target)")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds measured")
    parser.add_argument(
        "--warmup", type=boundary.non_negative, default=0.0, help="seconds before, not kept"
    )
    ENGINE.add_locust_workers(parser)
    options.add_deprecated_alias(parser, "--workers", "--locust-workers", dest="workers")
    parser.add_argument(
        "--expect-workers",
        type=boundary.number_in(0, None, int),
        default=0,
        metavar="K",
        help="Locust workers started on other hosts that join this master",
    )
    parser.add_argument(
        "--master-bind",
        default=None,
        metavar="HOST:PORT",
        help="where the Locust master listens (default 127.0.0.1, a free port)",
    )
    parser.add_argument(
        "--expect-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds the workers have to join (default 60)",
    )
    parser.add_argument(
        "--arrival",
        choices=["constant", "poisson"],
        default="constant",
        help="intended starts at fixed intervals (default) or as a Poisson process",
    )
    parser.add_argument(
        "--users", type=int, default=None, help="connections over all workers (Locust's -u)"
    )
    parser.add_argument(
        "--http",
        choices=["gevent", "keystoneauth"],
        default="gevent",
        help="HTTP stack of the Locust users (default gevent: geventhttpclient)",
    )
    parser.add_argument(
        "--locustfile", action="store_true", help="print the path of our locustfile and exit"
    )
    add_target_arguments(parser)


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """What the probe measures (--target, the mock's and local Keystone's options)
    and where its results go."""
    TARGET.add(parser)
    MOCK.add(parser)
    parser.add_argument(
        "--server-workers",
        type=int,
        default=None,
        help="--target local: Keystone server worker processes (default 2)",
    )
    DEPLOYMENT.add(parser)
    options.add_history_option(parser)
