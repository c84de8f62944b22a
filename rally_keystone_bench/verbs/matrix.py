"""``keystone-bench matrix``: one task on several local Keystone deployments.

    keystone-bench matrix --deployments deployments/workers.yaml \\
        --task tasks/authenticate-concurrency.yaml --task-args '{"concurrencies": [4]}'

The deployment file maps a name to Deployment fields::

    uwsgi-1w: {workers: 1}
    apache-4p: {server: apache, workers: 4}

Every deployment in turn is started, runs the task (``--repeat`` times) and
is stopped; then one table compares them, shaped like the table of the Rally
user story "4x performance increase in Keystone inside Apache": a row per
deployment, workload and action with min, avg, max, p90, p95, success, count
and throughput, written as matrix.html and matrix.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from rally_keystone_bench import boundary, shipped
from rally_keystone_bench.deploy import balancer as balancing
from rally_keystone_bench.deploy import directory
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.driver import interrupts, targets, task_files, task_reports, workspace
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.outcome import TaskOutcome
from rally_keystone_bench.errors import BenchError, read_input
from rally_keystone_bench.report import matrix as matrix_report
from rally_keystone_bench.report import records
from rally_keystone_bench.report.render import setting_table
from rally_keystone_bench.verbs import names, options, recording
from rally_keystone_bench.verdicts.results import RPS_RUNNERS, Workload
from rally_keystone_bench.verdicts.rounds import across_rounds


def load_deployments(path: str) -> dict[str, Deployment]:
    """The named deployments of a YAML file, each validated; BenchError on bad input."""
    p = shipped.resolve(path, "deployments")
    text = read_input(p, "deployment file")
    try:
        data = names.load_yaml_unique(text)
    except yaml.YAMLError as exc:
        raise BenchError(f"{p} is not valid YAML: {' '.join(str(exc).split())}") from None
    except BenchError as exc:
        raise BenchError(f"{p}: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise BenchError(f"{p} must map deployment names to their settings")
    out = {}
    for name, values in data.items():
        name = names.check_name(name, str(p))
        if values is None:
            values = {}
        if not isinstance(values, dict):
            raise BenchError(f"{p}: deployment {name!r} must be a mapping of settings")
        dep = Deployment.from_mapping(values, f"{p}: deployment {name!r}")
        try:
            dep.validate()
        except BenchError as exc:
            raise BenchError(f"{p}: deployment {name!r}: {exc}") from None
        out[name] = dep
    return out


def runner_setting(wl: Workload) -> str:
    """``concurrency 4`` or the runner's text."""
    if wl.runner_type == "constant" and "concurrency" in wl.runner:
        return f"concurrency {wl.runner['concurrency']}"
    if wl.runner_type in RPS_RUNNERS and "rps" in wl.runner:
        return f"rps {wl.runner['rps']}"
    return wl.runner_text()


def workload_labels(workloads: Sequence[Workload]) -> list[str]:
    """Each workload's name in the table: its runner setting, after the scenario
    and the arguments that tell it from the task's other workloads.

    ``concurrency 4`` when only the runner differs; ``authenticate serial(times=10)``
    and ``validate serial(times=10)`` when the scenarios do; ``validate(method=HEAD)
    ...`` when the arguments of one scenario do.
    """
    scenarios = {wl.scenario for wl in workloads}
    labels = []
    for wl in workloads:
        same = [w for w in workloads if w.scenario == wl.scenario]
        keys = sorted({k for w in same for k in w.args})
        differing = [
            k for k in keys if len({json.dumps(w.args.get(k), sort_keys=True) for w in same}) > 1
        ]
        label = runner_setting(wl)
        if len(scenarios) > 1 or differing:
            name = wl.scenario.rsplit(".", 1)[-1]
            args = ", ".join(f"{k}={wl.args.get(k)}" for k in differing)
            label = f"{name}({args}) {label}" if args else f"{name} {label}"
        labels.append(label)
    for i, label in enumerate(labels):  # still the same: number them by position
        if labels.count(label) > 1:
            labels[i] = f"{label} #{workloads[i].position + 1}"
    return labels


def build_table(
    results: Sequence[tuple[str, Sequence[Workload]]],
    connections: Mapping[tuple[str, int], int] | None = None,
) -> list[dict[str, Any]]:
    """Rows of the study table: per deployment, workload and action.

    RESULTS is [(deployment name, workloads)], repeated runs of one
    deployment appear as separate entries named ``name (run k)``.
    CONNECTIONS maps (name, index of the workload) to the LDAP connections slapd
    accepted during that workload's load (LDAP deployments only).
    """
    rows = []
    for name, workloads in results:
        settings = dict(zip(map(id, workloads), workload_labels(workloads), strict=True))
        labelled = [(f"{name}, {settings[id(wl)]}", wl) for wl in workloads]
        index = {id(wl): i for i, wl in enumerate(workloads)}
        for row, wl in _rows_with_workloads(setting_table(labelled), labelled):
            row["deployment"] = name
            row["scenario"] = wl.scenario
            row["setting"] = settings[id(wl)]
            if connections and (name, index[id(wl)]) in connections:
                row["ldap_connections"] = connections[(name, index[id(wl)])]
            rows.append(row)
    return rows


def _rows_with_workloads(rows: list[dict[str, Any]], labelled: list[tuple[str, Workload]]):
    by_label = dict(labelled)
    for row in rows:
        yield row, by_label[row["label"]]


def print_summary(
    rows: list[dict[str, Any]],
    repeat: int,
    per_node: dict[str, dict[str, int]],
    paths: tuple[Path, Path, Path],
) -> None:
    """The table (and the rounds' table), the per-node counts, where the reports went."""
    print(matrix_report.format_table(rows))
    if repeat > 1:
        print(matrix_report.format_rounds(across_rounds(rows)))
    for label, counts in per_node.items():
        print(f"{label}: token requests per node (access logs): {records.format_counts(counts)}")
    html, js, out_dir = paths
    print(f"matrix HTML: {html}")
    print(f"matrix JSON: {js}")
    print(f"reports: {out_dir}")


def checked_task(name: str, deployments: dict[str, Deployment], task_args: dict) -> Path:
    """The task file, checked with what each deployment gives it (an LDAP one's ldap_domain)."""
    checked = [
        task_files.checked(name, targets.identity_task_args(dep, task_args))
        for dep in deployments.values()
    ]
    return checked[0] if checked else task_files.checked(name, task_args)


@dataclasses.dataclass(frozen=True)
class MatrixSettings:
    """matrix's options, as given (the door of main)."""

    deployments: str  # the deployments' YAML file
    task: str
    task_args: str | None  # JSON
    repeat: int
    history: str | None  # the results store (None: the environment's, if any)
    reports_dir: str


def main(args: argparse.Namespace) -> int:
    # Every input is checked (load_deployments validates each deployment), and
    # every environment built, before any load.
    settings = options.read(MatrixSettings, args)
    deployments = load_deployments(settings.deployments)
    task_args = workspace.parse_task_args(settings.task_args)
    task = checked_task(settings.task, deployments, task_args)
    if settings.repeat < 1:
        raise BenchError(f"--repeat must be at least 1, not {settings.repeat}")
    history = options.check_store(options.history_url(settings.history))
    stamp = workspace.utc_stamp()
    targets.build_envs(deployments)  # a SPEC that does not install: no directory made yet
    run_root = workspace.run_dir(f"matrix-{stamp}")
    out_dir = (Path(settings.reports_dir) / stamp).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    described = {name: dep.describe() for name, dep in deployments.items()}

    results: list[tuple[str, list]] = []
    connections: dict[tuple[str, int], int] = {}
    errors: dict[str, str] = {}
    measured: dict[str, TaskOutcome] = {}  # by label: the runs the results store records
    failed = False
    n = len(deployments)
    per_node: dict[str, dict[str, int]] = {}  # label -> node -> token requests

    def report() -> tuple[tuple[Path, Path], list[dict[str, Any]]]:
        rows = build_table(results, connections)
        html, js = matrix_report.write_report(rows, out_dir, str(task), described, errors, per_node)
        return (html, js), rows

    with interrupts.sigterm_as_interrupt():
        try:
            for i, (name, dep) in enumerate(deployments.items(), 1):
                rally_task.progress(f"deployment {i} of {n}: {name} ({dep.describe()})")
                for k in range(1, settings.repeat + 1):
                    label, sub = run_names(name, k, settings.repeat)
                    run_dir = run_root / sub
                    try:
                        outcome = run_one(dep, task, task_args, run_dir, out_dir / sub)
                    except BenchError as exc:
                        # The other deployments still run; this one is named at the end.
                        errors[label] = str(exc)
                        rally_task.progress(f"deployment {label} failed: {exc}")
                        continue
                    failed = failed or not outcome.sla_passed
                    results.append((label, outcome.workloads))
                    measured[label] = outcome
                    if dep.nodes is not None:
                        per_node[label] = balancing.requests_per_node(run_dir / "keystone")
                    if dep.identity == "ldap":
                        slapd_log = run_dir / "keystone" / "ldap" / "slapd.log"
                        counts = directory.count_load_accepts(slapd_log, outcome.workloads)
                        for index, count in counts.items():
                            connections[(label, index)] = count
        except KeyboardInterrupt as exc:
            partial = getattr(exc, "outcome", None)  # errors.Interrupted: what the task ran
            if partial is not None and partial.workloads:
                results.append((f"{label} ({partial.interrupted})", partial.workloads))
            if results:
                (html, _), _ = report()
                rally_task.progress(f"interrupted; the table of what ran: {html}")
            raise
    (html, js), rows = report()
    print_summary(rows, settings.repeat, per_node, (html, js, out_dir))
    record_history(history, settings.repeat, deployments, out_dir, measured)
    if errors:
        names = ", ".join(errors)
        raise BenchError(
            f"{len(errors)} of {n * settings.repeat} deployment runs failed ({names}); "
            f"the reasons are in {js}"
        )
    return 1 if failed else 0


def run_one(
    dep: Deployment, task: Path, task_args: dict[str, Any], run_dir: Path, dest: Path
) -> TaskOutcome:
    """One run of TASK on a fresh Keystone of DEP, its reports in DEST; BenchError when it
    gave no result."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with targets.prepared_env(run_dir, deployment=dep) as env:
        dep_args = targets.identity_task_args(dep, task_args)
        outcome = task_reports.run_task(env.home, env.name, task, dep_args, dest)
    if not outcome.workloads:
        raise BenchError(
            f"rally task start exited {outcome.rally_exit} without results; see {dest}"
        )
    return outcome


def record_history(
    history: str | None,
    repeat: int,
    deployments: Mapping[str, Deployment],
    out_dir: Path,
    measured: Mapping[str, TaskOutcome],
) -> None:
    """In the store HISTORY (None: none): one run per deployment run that measured
    (MEASURED: its outcome by its label), with its deployment line."""
    for name, dep in deployments.items():
        for k in range(1, repeat + 1):
            label, sub = run_names(name, k, repeat)
            if label in measured:
                dest = out_dir / sub
                summaries = recording.summaries_of_outcomes([measured[label]], dest, "matrix")
                options.record_history(history, "matrix", dest, dep, summaries)


def run_names(name: str, k: int, repeat: int) -> tuple[str, str]:
    """Run K of deployment NAME: its label in the table and its sub-directory."""
    return (name, name) if repeat == 1 else (f"{name} (run {k})", f"{name}-run{k}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench matrix``."""
    parser.add_argument(
        "--deployments",
        required=True,
        metavar="FILE.yaml",
        help="the deployments to run on: a YAML file of name -> deployment settings",
    )
    parser.add_argument("--task", required=True, help="the task file run on each deployment")
    parser.add_argument(
        "--task-args",
        default=None,
        metavar="JSON",
        help="Jinja2 arguments of the task, as a JSON object (rally task start --task-args)",
    )
    parser.add_argument(
        "--repeat",
        type=boundary.positive_int,
        default=1,
        help="rounds over all deployments, interleaved (default 1)",
    )
    options.add_history_option(parser)
    options.add_reports_dir_option(parser)
