"""The gate's task runs: the paired task run and judged, and run again while inconclusive.

Both sides' Keystones answer one paired Rally task at a time, /proc sampled
beside it. After ``rounds`` runs every run's blocks are judged together;
while the verdict is inconclusive the task runs again, only its workloads
short of a verdict when they can be picked out (``task_subset``), as long
as ``--max-time`` leaves time for them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Any

from rally_keystone_bench import procstat
from rally_keystone_bench.clients import credentials
from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.deploy import directory
from rally_keystone_bench.deploy.files import write_private
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver import evidence as keystone_evidence
from rally_keystone_bench.driver import gate_passes, task_reports, task_subset
from rally_keystone_bench.driver import rally as rallyenv
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verdicts import pairing
from rally_keystone_bench.verdicts.blocks import (
    SAMPLE_SECONDS,
    SIDES,
    GateSettings,
    TaskRun,
    judge_runs,
)
from rally_keystone_bench.verdicts.pairing import GateResult

LDAP_PROJECT = "keystone-bench-gate-ldap"


@dataclasses.dataclass(frozen=True)
class PairedTask:
    """What every run of the paired task is given: the Rally home, the task, its arguments
    (each side's openrc among them) and each side's server pids (the sampler's trees)."""

    home: Any
    task: Path
    args: dict
    trees: dict[str, list[int]]


@dataclasses.dataclass(frozen=True)
class RunLimits:
    """At least ROUNDS task runs; extended while inconclusive until MAX_TIME seconds after
    BEGAN; PROFILE: the servers sampled by py-spy during each run."""

    rounds: int
    max_time: float
    began: float
    profile: bool


def ldap_target(ks: LocalKeystone, stack: contextlib.ExitStack) -> Path:
    """An openrc (0600) of the directory's first user, for the paired task.

    With ``--identity ldap`` a password token must cost what it costs a
    directory user: an LDAP bind. The user lives in the LDAP domain; its
    project and role grant live in SQL, as the contexts make them, and are
    deleted when STACK closes (before Keystone stops), with the openrc.
    """
    users = directory.load_users(ks.directory_users_path)
    person = users["users"][0]
    admin = AdminClient(ks.admin_credentials, pool_size=1)
    ldap_domain = admin.resolve_domain(users["domain"])
    found = admin.find("users", person["name"], ldap_domain)
    if not found:
        raise BenchError(
            f"the directory's user {person['name']} is not visible in Keystone's "
            f"{users['domain']} domain; see {ks.server_log_path}"
        )
    default = admin.resolve_domain("default")
    fields = {"description": "keystone-bench gate: the LDAP user's project"}
    project = admin.create("projects", LDAP_PROJECT, fields, default)
    stack.callback(admin.delete, "projects", project["id"])
    role = admin.role_ids(["member"])["member"]
    admin.grant(project["id"], found[0]["id"], role, f"grant member to {person['name']}")
    path = ks.run_dir / "ldap-openrc"
    user = {
        "auth_url": ks.auth_url,
        "username": person["name"],
        "password": person["password"],
        "project_name": LDAP_PROJECT,
        "user_domain_name": users["domain"],
        "project_domain_name": "Default",
    }
    write_private(path, credentials.openrc_text(user))
    stack.callback(path.unlink, missing_ok=True)
    return path


def paired_rally(
    keystones: dict[str, LocalKeystone],
    run_root: Path,
    stack: contextlib.ExitStack,
    task: Path,
    task_args: dict,
) -> PairedTask:
    """The Rally home, the paired task's arguments and each side's server pids."""
    home = rallyenv.RallyHome(run_root / "rally")
    # The admin is the env's user too (admin_user_spec): without a user, Rally
    # creates (and afterwards deletes) a project and users for every workload,
    # half a minute each on a busy 2-core machine. The paired scenario reads
    # both sides' openrc files and uses neither.
    admin = keystones["baseline"].admin_credentials
    home.create_env(rally_task.ENV_NAME, rallyenv.admin_user_spec(admin))
    home.check_env(rally_task.ENV_NAME)
    # Each side's admin, or with --identity ldap a user of each side's directory.
    side_targets = {
        side: ldap_target(ks, stack) if ks.directory_users_path else ks.openrc_path
        for side, ks in keystones.items()
    }
    args_for_task = {**task_args, **{side: str(p) for side, p in side_targets.items()}}
    # Every server of a side (both pairs): "server", or "<node>-server" behind HAProxy.
    return PairedTask(home, task, args_for_task, gate_passes.server_trees(keystones))


def measure(
    home: Any, env: str, task: Path, task_args: dict, dest: Path, trees: dict, kept: list
) -> TaskRun:
    """One ``rally task start``, /proc sampled beside it every SAMPLE_SECONDS (TREES: the
    sides); its outcome goes to KEPT (what the results store records)."""
    outcome = task_reports.run_task(home, env, task, task_args, dest, trees, SAMPLE_SECONDS)
    kept.append(outcome)
    if not outcome.workloads:
        raise BenchError(
            f"rally task start exited {outcome.rally_exit} without results; see {dest}"
        )
    return TaskRun(outcome.workloads, outcome.sampler.intervals)


def judge_all(
    runs: list[TaskRun],
    keystones: dict[str, LocalKeystone],
    settings: GateSettings,
    names: dict[str, str],
) -> GateResult:
    """Every run's paired actions judged; each side's requests from its servers' access logs.

    NAMES: each side's deployment line, as the report names it.
    """
    access = {
        side: sorted(
            (
                r
                for n, ks in keystones.items()
                if gate_passes.side_of(n) == side
                for r in procstat.read_access_log(ks.access_log_path)
            ),
            key=lambda r: r.start,
        )  # fmt: skip
        for side in SIDES
    }
    return judge_runs(
        runs, access, settings,
        base_name=names["baseline"],
        cand_name=names["candidate"],
    )  # fmt: skip


def next_run(
    task: Path, task_args: dict, result: GateResult, whole: int, dest: Path
) -> tuple[Path, dict, int]:
    """What an extension runs, and how many workloads: those short of a verdict, or all.

    Only the inconclusive workloads run again when the task's subtasks can
    be picked out by title (driver/task_subset.py); their new blocks join
    those of the earlier runs.
    """
    short = sorted({a.workload for a in result.actions if a.inconclusive})
    part = task_subset.subset(task, task_args, short, dest / f"{task.stem}-extension.json")
    if part is None:
        return task, task_args, whole
    return part, {}, len(short)


def run_until_judged(
    paired: PairedTask,
    keystones: dict[str, LocalKeystone],
    settings: GateSettings,
    names: dict[str, str],
    limits: RunLimits,
    out_dir: Path,
    evidence: keystone_evidence.Evidence,
    outcomes: list,
) -> GateResult:
    """The paired task run LIMITS.rounds times, then again while the verdict is inconclusive.

    Each run's evidence goes to EVIDENCE, its outcome to OUTCOMES; a run
    that would not end within LIMITS.max_time is not started, and the
    verdict says so in a note.
    """
    task = paired.task
    runs: list[TaskRun] = []
    run_dirs = gate_passes.run_dirs(keystones)
    run_task, run_args, count, per_workload = task, paired.args, 0, 0.0
    while True:
        n = len(runs) + 1
        started = time.monotonic()
        part = f" ({count} workloads)" if run_task != task else ""
        rally_task.progress(f"task run {n}: both sides, paired{part}")
        dest = out_dir / f"run{n}"
        with keystone_evidence.profiled_sides(paired.trees, out_dir, n, limits.profile) as got:
            runs.append(
                measure(
                    paired.home,
                    rally_task.ENV_NAME,
                    run_task,
                    run_args,
                    dest,
                    paired.trees,
                    outcomes,
                )
            )
        evidence.add_run(got, run_dirs, runs[-1].workloads)
        if n == 1:  # a whole task run's time, per workload
            per_workload = (time.monotonic() - started) / max(1, len(runs[0].workloads))
        if len(runs) < limits.rounds:
            continue
        result = judge_all(runs, keystones, settings, names)
        if result.exit_code != pairing.EXIT_INCONCLUSIVE:
            return result
        run_task, run_args, count = next_run(
            task, paired.args, result, len(runs[0].workloads), out_dir / f"run{n + 1}"
        )
        left = limits.max_time - (time.monotonic() - limits.began)
        if left < per_workload * count:
            result.notes.append(
                f"not extended: {count} workload(s) again take about "
                f"{per_workload * count:.0f} s, {max(left, 0):.0f} s of --max-time "
                f"{limits.max_time:g} s left"
            )
            return result
        what = "another task run" if run_task == task else f"the {count} workloads short"
        rally_task.progress(f"{result.headline()}; extending with {what}")
