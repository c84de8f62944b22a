"""The ``keystone-bench run`` verb: tasks through the real ``rally task start``.

Without ``--existing-cloud`` it starts a local Keystone and always stops it,
on failure and on Ctrl-C too. Every input is checked before any load is sent.
Each task's Rally HTML and JSON reports and our summary go to
``reports/<UTC timestamp>/``; a task that fails half-way still gets its
reports written.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench.deploy import profiling
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.driver import counters as keystone_counters
from rally_keystone_bench.driver import interrupts, targets, task_files, task_reports, workspace
from rally_keystone_bench.driver import machine as machine_record
from rally_keystone_bench.driver import rally as rallyenv
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.left_behind import say_left_behind
from rally_keystone_bench.driver.outcome import TaskOutcome
from rally_keystone_bench.errors import Interrupted
from rally_keystone_bench.report import records
from rally_keystone_bench.verbs import groups, options, recording
from rally_keystone_bench.verdicts import stats

DEFAULT_TASK = "tasks/token-suite.yaml"

# The option groups run composes: a local Keystone's options apply without
# --existing-cloud or --spec, --trace-rate under --trace on.
DEPLOYMENT = groups.Deployment(when=("existing_cloud", (False,)))
TRACING = groups.Tracing()
RULES = groups.rules(DEPLOYMENT, TRACING)


def _counter_columns(found: dict | None) -> tuple[bool, bool]:
    """Whether FOUND's actions traced cache operations, and LDAP calls."""
    values = (found or {}).values()
    return any("cache_gets_median" in c for c in values), any(
        "ldap_calls_median" in c for c in values
    )


def _counter_cells(found: dict | None, name: str) -> str:
    c = (found or {}).get(name)
    if not c:
        return ""
    cached, ldap = _counter_columns(found)
    cells = (
        f" {c['sql_statements_median']:>5}/{c['sql_statements_max']:<5} {c['db_ms_median']:>7.2f}"
    )
    if cached:
        ratio = c.get("cache_hit_ratio")
        hit = "-" if ratio is None else f"{ratio * 100:.0f}%"
        cells += f" {c.get('cache_gets_median', '-'):>5}/{hit:<5}"
    if ldap:
        cells += f" {c.get('ldap_calls_median', '-'):>5}"
    return cells


def _counter_header(found: dict | None) -> str:
    if not found:
        return ""
    cached, ldap = _counter_columns(found)
    return (
        f" {'SQL/req':>11} {'DB ms':>7}"
        + (f" {'cache/hit':>11}" if cached else "")
        + (f" {'LDAP':>5}" if ldap else "")
    )


def format_table(
    workloads: Sequence[Any], counters: Sequence[dict] = (), interrupted: str | None = None
) -> str:
    """A short table per workload and action: p50, p95, p99, max, ok it/s, success %.

    With COUNTERS (per workload, from Keystone's traces): SQL statements per
    request (median/max) and DB time per request (median ms). An INTERRUPTED
    task's workloads get no SLA verdict: only part of them ran.
    """
    lines = []
    for i, wl in enumerate(workloads, 1):
        found = counters[i - 1] if i - 1 < len(counters) else None
        verdict = "SLA passed" if wl.pass_sla else "SLA FAILED"
        if interrupted:
            verdict = f"{interrupted}: no SLA verdict"
        lines.append(f"[{i}] {wl.label()}  -- {verdict}")
        lines.append(
            f"    {'action':<24} {'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} {'max ms':>9}"
            f" {'ok it/s':>8} {'success':>8} {'count':>6}" + _counter_header(found)
        )
        names = [n for n in wl.actions if n != "total"] + ["total"]
        for name in names:
            a = wl.actions.get(name)
            if a is None:
                continue
            s = stats.summarize(a.ok_durations())

            def ms(v: float | None) -> str:
                return "-" if v is None else f"{v * 1000:.1f}"

            rate = (
                wl.throughput
                if name == "total"
                else a.count * (a.success_percent / 100) / (wl.load_duration or float("inf"))
            )
            lines.append(
                f"    {name:<24} {ms(s['p50']):>9} {ms(s['p95']):>9} {ms(s['p99']):>9}"
                f" {ms(s['max']):>9} {rate:>8.2f} {a.success_percent:>7.1f}% {a.count:>6}"
                + _counter_cells(found, name)
            )
        for sla in wl.sla:
            if not sla.get("success", True):
                lines.append(f"    SLA {sla.get('criterion')}: {sla.get('detail')}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    # Everything that can be checked is checked before any load is sent.
    tracing = TRACING.settings(args)
    spec, reports_dir = args.spec, args.reports_dir  # run's own options
    task_args = workspace.parse_task_args(args.task_args)
    cloud = deployment = None
    if args.existing_cloud or spec:
        cloud = options.cloud_spec(spec)
    else:
        deployment = DEPLOYMENT.unchecked(args, trace=tracing.trace)
        deployment.validate()
        task_args = targets.identity_task_args(deployment, task_args)
    # Checked with every argument the run gives them (an LDAP deployment's ldap_domain).
    tasks = [task_files.checked(t, task_args) for t in args.tasks or [DEFAULT_TASK]]
    rate = tracing.checked_rate()
    history = options.check_history(args)
    if deployment is not None:  # a SPEC that does not install, a --set it refuses
        targets.check_deployment(deployment)
    out_dir, run_dir = workspace.new_run_dirs(reports_dir)
    try:
        outcomes = _run_tasks(
            tasks, task_args, cloud, deployment, out_dir, run_dir, rate,
            profile=tracing.profile,
        )  # fmt: skip
    except Interrupted as exc:
        # The Keystone is stopped by now; say what ran and where its reports are.
        done = getattr(exc, "outcomes", [])
        summarize_outcomes(done, out_dir)
        if cloud is not None:
            say_left_behind(done, rallyenv.auth_url_of(cloud), spec)
        raise
    finally:
        workspace.remove_if_empty(out_dir, run_dir)  # a cloud that does not answer
    if deployment is not None and deployment.identity == "ldap":
        record_identity(deployment, outcomes, run_dir / "keystone" / "ldap" / "slapd.log", out_dir)
    if deployment is not None:
        record_topology(deployment, run_dir / "keystone", out_dir)
    rc = summarize_outcomes(outcomes, out_dir)
    if cloud is not None:  # a local Keystone takes whatever was left with it
        say_left_behind(outcomes, rallyenv.auth_url_of(cloud), spec)
    where = f"cloud {rallyenv.auth_url_of(cloud)}" if cloud is not None else "existing cloud"
    summaries = recording.summaries_of_outcomes(outcomes, out_dir, "run")
    options.record_history(history, "run", out_dir, deployment, summaries, where=where)
    return rc


def record_topology(deployment: Deployment, keystone_dir: Path, out_dir: Path) -> None:
    """Print and keep (deployment.json) the deployment, its storage device, requests per node."""
    from rally_keystone_bench.deploy import balancer

    description = deployment.describe()
    db_device = deployment.storage_device()
    counts = balancer.requests_per_node(keystone_dir) if deployment.nodes is not None else None
    record = records.deployment_record(description, deployment.db_storage, db_device, counts)
    print("\n".join(record.lines))
    if out_dir.is_dir():
        records.write_json(out_dir / "deployment.json", record.doc)


def record_identity(
    deployment: Deployment, outcomes: Sequence[TaskOutcome], slapd_log: Path, out_dir: Path
) -> None:
    """Print and keep (identity.json) the LDAP settings and each workload's LDAP connections."""
    from rally_keystone_bench.deploy import directory

    connections: list[tuple[str, list[tuple[str, int | None]]]] = []
    for o in outcomes:
        counts = directory.count_load_accepts(slapd_log, o.workloads)
        labelled = [(wl.label(), counts.get(i)) for i, wl in enumerate(o.workloads)]
        connections.append((o.task_file.name, labelled))
    record = records.identity_record(
        identity=deployment.identity,
        ldap_settings=deployment.ldap_settings(),
        ldap_pool=deployment.ldap_pool,
        ldap_pool_size=deployment.ldap_pool_size,
        ldap_auth_pool_size=deployment.ldap_auth_pool_size,
        ldap_tls=bool(deployment.ldap_tls),
        workers=deployment.workers,
        connections=connections,
    )
    print("\n".join(record.lines))
    records.write_json(out_dir / "identity.json", record.doc)


def _run_tasks(
    tasks: Sequence[Path],
    task_args: dict[str, Any],
    cloud: dict | None,
    deployment: Deployment | None,
    out_dir: Path,
    run_dir: Path,
    trace_rate: float | None = None,
    profile: bool = False,
) -> list[TaskOutcome]:
    outcomes: list[TaskOutcome] = []
    with (
        interrupts.sigterm_as_interrupt(),
        targets.prepared_env(
            run_dir, cloud=cloud, deployment=deployment, trace_rate=trace_rate
        ) as env,
    ):
        rally_task.progress(f"checking {len(tasks)} task file(s) with rally task validate")
        for task_file in tasks:
            rally_task.validate_task(env.home, env.name, task_file, task_args)
        for n, task_file in enumerate(tasks, 1):
            rally_task.progress(f"task {n} of {len(tasks)}: {task_file}")
            pids = keystone_counters.server_pids(env.keystone_dir) if profile else []
            stacks = out_dir / f"{task_file.stem}-profile.txt"
            try:
                trees = machine_record.deployment_trees(env.keystone_dir)
                with profiling.profiled(
                    pids, stacks, rally_task.progress, profiling.SLICE_S
                ) as prof:
                    outcome = task_reports.run_task(
                        env.home, env.name, task_file, task_args, out_dir, trees, summary=False
                    )
            except Interrupted as exc:
                if exc.outcome:  # the counters gathered so far are kept too
                    summarize_task(exc.outcome, env.keystone_dir, None)
                exc.outcomes = [*outcomes, *([exc.outcome] if exc.outcome else [])]  # type: ignore[attr-defined]
                raise
            if env.keystone_dir is not None:
                rally_task.progress("reading Keystone's traces and profile")
            summarize_task(outcome, env.keystone_dir, prof.path)
            outcomes.append(outcome)
    return outcomes


def summarize_task(outcome: TaskOutcome, keystone_dir: Path | None, profile: Path | None) -> None:
    """OUTCOME's summary, written once: with Keystone's counters and PROFILE when there
    are (and without them should reading them fail)."""
    try:
        keystone_counters.gather(outcome, keystone_dir, profile)
    finally:
        task_reports.write_summary(outcome)


def summarize_outcomes(outcomes: Sequence[TaskOutcome], out_dir: Path) -> int:
    """Print each task's table and report paths; the verb's exit code."""
    rc = 0
    for o in outcomes:
        print(f"== {o.task_file} (task {o.uuid or 'not started'})")
        if o.workloads:
            print(format_table(o.workloads, o.counters, o.no_verdict))
        for label, path in (
            ("Rally HTML", o.html_report),
            ("Rally JSON", o.json_report),
            ("summary", o.summary),
        ):
            if path is not None:
                print(f"    {label}: {path}")
        if o.checked_out is not None:
            leak = "" if o.checked_out == 0 else " (a request kept its connection: a leak)"
            said = f"Keystone DB connections checked out when the load ended: {o.checked_out}"
            print(f"    {said}{leak}")
        if o.machine is not None:
            why = o.machine.disturbed()
            state = f"DISTURBED ({why}): " if why else ""
            print(f"    machine during the load: {state}{o.machine.sentence()}")
        if o.interrupted:
            print(f"    {o.interrupted}: the reports hold what ran until then")
        if o.uuid is None or not o.workloads or o.rally_exit < 0:  # < 0: Rally was killed
            print(f"    rally task start exited {o.rally_exit}; see {out_dir}")
            rc = max(rc, 2)
        elif not o.sla_passed:
            rc = max(rc, 1)
    print(f"reports: {out_dir}")
    return rc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench run``."""
    parser.add_argument("tasks", nargs="*", metavar="TASK", help="task files (default: the suite)")
    parser.add_argument(
        "--task-args",
        default=None,
        metavar="JSON",
        help="Jinja2 arguments of the tasks, as a JSON object (rally task start --task-args)",
    )
    parser.add_argument(
        "--existing-cloud",
        action="store_true",
        help="use the cloud described by OS_* variables (or --spec)",
    )
    parser.add_argument("--spec", default=None, help="a Rally env spec file for an existing cloud")
    options.add_reports_dir_option(parser)
    DEPLOYMENT.add(parser)
    options.add_history_option(parser)
    TRACING.add(parser)
