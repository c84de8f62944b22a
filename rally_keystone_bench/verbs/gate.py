"""``keystone-bench gate``: does a Keystone change make tokens slower?

    keystone-bench gate --baseline keystone==30.0.0 --candidate ../keystone

Two deployments, identical but for the Keystone SPEC (and any
``--baseline-option``/``--candidate-option KEY=VALUE``), are started side by
side and stay up. One Rally task (``tasks/gate.yaml``, scenario
``KeystoneTokens.paired``) sends each request to both, in random order, one
pair at a time, so both sides see the same machine. Meanwhile a sampler reads
/proc: other processes' CPU, steal time, the load generator's CPU and each
Keystone worker's CPU. The run is cut into blocks of ``--block-seconds``;
disturbed blocks are set aside and the rest judged by :mod:`pairing`.

Exit 0: no regression. 1: an action is significantly slower (or burns more
CPU per request) by more than the threshold, or fails more often. 3:
inconclusive, too few clean blocks even after extending the run within
``--max-time``: recheck advice, not a verdict on the change. HTML, JSON
(with every block's ratio) and JUnit XML go to ``reports/<timestamp>/``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rally_keystone_bench import compare, pairing, procstat
from rally_keystone_bench.clients import credentials
from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.deploy import conf_options, directory
from rally_keystone_bench.deploy.keystone import Deployment, LocalKeystone, write_private
from rally_keystone_bench.driver import rally as rallyenv
from rally_keystone_bench.driver import targets
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.pairing import Block, GateResult
from rally_keystone_bench.procstat import Interval
from rally_keystone_bench.report.render import environment
from rally_keystone_bench.results import Workload
from rally_keystone_bench.verbs import options as verb_options

SIDES = ("baseline", "candidate")
# The default task: a cloud's token paths; with it both sides run memcached
# unless a side's --*-option cache=none says otherwise.
CLOUD_TASK = "tasks/gate-cloud.yaml"
SAMPLE_SECONDS = 0.5
LDAP_PROJECT = "keystone-bench-gate-ldap"


def parse_option(text: str, where: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a pair."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise BenchError(f"{where}: {text!r} is not KEY=VALUE")
    return key.strip(), value.strip()


def side_deployment(
    spec: str,
    options: Sequence[str],
    flag: str,
    identity: dict[str, Any] | None = None,
    shared_conf: Sequence[str] = (),
) -> Deployment:
    """One side's Deployment: Keystone SPEC plus KEY=VALUE options (then IDENTITY's).

    A KEY with a dot is a keystone.conf setting (SECTION.OPTION), over SHARED_CONF (--set).
    """
    pairs = dict(parse_option(o, flag) for o in options or ())
    values: dict[str, Any] = conf_options.split(pairs, shared_conf)
    if "keystone" in values:
        raise BenchError(
            f"{flag}: give the Keystone SPEC with --{flag.split('-')[2]}, not keystone="
        )
    values["keystone"] = spec
    for name, value in (identity or {}).items():
        values.setdefault(name, value)
    dep = Deployment.from_mapping(values, flag)
    dep.validate()
    return dep


@dataclasses.dataclass
class TaskRun:
    """One measured ``rally task start``: its workloads and the /proc intervals."""

    workloads: list[Workload]
    intervals: list[Interval]


@dataclasses.dataclass
class Pair:
    start: float
    base: float
    cand: float


def workload_label(wl: Workload) -> str:
    """The workload's title in the task (its arguments name openrc paths: long)."""
    return wl.subtask or wl.label()


def paired_actions(wl: Workload) -> list[str]:
    """The actions measured on both sides of WL (names without the side prefix)."""
    names = []
    for name in wl.actions:
        if name.startswith("baseline."):
            action = name[len("baseline.") :]
            if "candidate." + action in wl.actions:
                names.append(action)
    return names


def pairs_of(wl: Workload, action: str) -> tuple[list[Pair], tuple[int, int], tuple[int, int]]:
    """Each iteration's two timings of ACTION; and (failed, count) of each side."""
    b, c = wl.actions["baseline." + action], wl.actions["candidate." + action]
    order = np.argsort(wl.iteration_started, kind="stable")
    starts = wl.iteration_started[order]
    ends = starts + wl.iteration_duration[order]

    def by_iteration(a: Any) -> dict[int, tuple[float, float, bool]]:
        found = {}
        idx = np.searchsorted(starts, a.started_at, side="right") - 1
        for i, s, d, f in zip(idx, a.started_at, a.duration, a.failed, strict=True):
            if 0 <= i < starts.size and s <= ends[i] + 1e-3:
                found[int(i)] = (float(s), float(d), bool(f))
        return found

    bi, ci = by_iteration(b), by_iteration(c)
    pairs = []
    for i in sorted(bi.keys() & ci.keys()):
        (sb, db, fb), (sc, dc, fc) = bi[i], ci[i]
        if not fb and not fc and db > 0:
            pairs.append(Pair(min(sb, sc), db, dc))
    tally = (int(b.failed.sum()), int(b.count)), (int(c.failed.sum()), int(c.count))
    return pairs, tally[0], tally[1]


def cpu_per_request(
    intervals: list[Interval],
    start: float,
    end: float,
    side: str,
    requests: Sequence[Any],
    workers: set[int],
) -> float | None:
    """SIDE's workers' CPU seconds from START to END over the requests they served then.

    The span is widened to whole sampler intervals; requests are counted by
    the share of their time inside it, as their CPU is.
    """
    t0, t1, pid_seconds = procstat.cpu_between(intervals, start, end)
    count, _ = procstat.served(requests, t0, t1)
    if count < 0.25:  # too little of a request to divide by
        return None
    seconds = sum(v for (name, pid), v in pid_seconds.items() if name == side and pid in workers)
    return seconds / count


def blocks_of_run(
    run: TaskRun,
    per_block: int,
    access: dict[str, list[Any]],
    first_index: dict[tuple[str, str], int],
) -> dict[tuple[str, str], list[Block]]:
    """Blocks per (workload label, action) of one task run."""
    workers = {side: {r.pid for r in access[side]} for side in SIDES}
    wins = procstat.windows(run.intervals, per_block)
    series: dict[tuple[str, str], list[Pair]] = {}
    for wl in run.workloads:
        for action in paired_actions(wl):
            series[(workload_label(wl), action)] = pairs_of(wl, action)[0]
    out: dict[tuple[str, str], list[Block]] = {key: [] for key in series}
    for w in wins:
        inside = {
            key: [p for p in pairs if w.start <= p.start < w.end] for key, pairs in series.items()
        }
        busy = [key for key, pairs in inside.items() if pairs]
        workloads = {key[0] for key in busy}
        if len(workloads) != 1:
            continue  # no load, or the change from one workload to the next
        for key in busy:
            pairs = inside[key]
            if len(pairs) < pairing.MIN_PAIRS_PER_BLOCK:
                continue
            # Server CPU over the block's pairs to their end: one side's
            # request of a pair may finish after the window (a slow token).
            end = max(w.end, max(p.start + p.base + p.cand for p in pairs))
            cpu = {
                side: cpu_per_request(
                    run.intervals, w.start, end, side, access[side], workers[side]
                )
                for side in SIDES
            }
            index = first_index.get(key, 0) + len(out[key])
            block = pairing.make_block(
                index, w.start, w.end, [p.base for p in pairs], [p.cand for p in pairs],
                cpu["baseline"] if len(busy) == 1 else None,
                cpu["candidate"] if len(busy) == 1 else None,
                pairing.Interference(w.other, w.other_swing, w.steal, w.generator),
            )  # fmt: skip
            out[key].append(block)
    return out


def judge_runs(
    runs: Sequence[TaskRun],
    access: dict[str, list[Any]],
    *,
    threshold: float,
    alpha: float,
    block_seconds: float,
    bounds: Any,
    min_clean: int,
    base_name: str,
    cand_name: str,
    max_failure_increase: float = 0.0,
) -> GateResult:
    """Every paired action of every run, cut into blocks and judged."""
    per_block = max(1, round(block_seconds / SAMPLE_SECONDS))
    blocks: dict[tuple[str, str], list[Block]] = {}
    tallies: dict[tuple[str, str], list[int]] = {}
    for run in runs:
        first = {key: len(v) for key, v in blocks.items()}
        for key, found in blocks_of_run(run, per_block, access, first).items():
            blocks.setdefault(key, []).extend(found)
        for wl in run.workloads:
            for action in paired_actions(wl):
                _, (bf, bn), (cf, cn) = pairs_of(wl, action)
                t = tallies.setdefault((workload_label(wl), action), [0, 0, 0, 0])
                for i, v in enumerate((bf, bn, cf, cn)):
                    t[i] += v
    if not blocks:
        raise BenchError("the task has no KeystoneTokens.paired workload: nothing to judge")
    verdicts = []
    for (label, action), found in blocks.items():
        v = pairing.judge_action(label, action, found, threshold, alpha, bounds, min_clean)
        bf, bn, cf, cn = tallies[(label, action)]
        judge_failures(v, (bf, bn), (cf, cn), max_failure_increase, alpha)
        verdicts.append(v)
    return pairing.GateResult(
        base_name, cand_name, threshold, alpha, block_seconds, bounds, verdicts, len(runs),
        max_failure_increase,
    )  # fmt: skip


def judge_failures(
    v: Any, base: tuple[int, int], cand: tuple[int, int], max_increase: float, alpha: float
) -> None:
    """compare's success verdict on one paired action: a failing candidate never passes."""
    nan = math.nan
    c = compare.Comparison(
        v.action, "latency", 0, 0, nan, nan, nan, nan, nan, nan, False, "", False
    )
    compare.judge_success(c, base, cand, max_increase, alpha)
    v.base_success, v.cand_success = c.base_success, c.cand_success
    v.failure_verdict, v.failure_regression = c.failure_verdict, c.failure_regression


def start_both(
    deps: dict[str, Deployment], run_root: Path, stack: contextlib.ExitStack
) -> dict[str, LocalKeystone]:
    """Start both deployments side by side; each is stopped when STACK closes."""

    keystones = {}
    for side in SIDES:
        (run_root / side).mkdir(parents=True, exist_ok=True)
        ks = LocalKeystone(deps[side], run_root / side / "keystone", progress=rally_task.progress)
        keystones[side] = ks
        stack.callback(ks.stop)
    errors: dict[str, BaseException] = {}

    def start(side: str) -> None:
        try:
            targets.start_explained(keystones[side])
        except BaseException as exc:  # reported below, in this thread
            errors[side] = exc

    threads = [threading.Thread(target=start, args=(side,)) for side in SIDES]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM): both starts give up at their next
        # step and stop what they began; only then does STACK stop the rest,
        # so no process is spawned after the stop.
        for ks in keystones.values():
            ks.cancel_start()
        for t in threads:
            t.join()
        raise
    for side in SIDES:
        if side in errors:
            raise errors[side]
        rally_task.progress(f"{side}: Keystone is up at {keystones[side].auth_url}")
    return keystones


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


def measure(home: Any, env: str, task: Path, task_args: dict, dest: Path, trees: dict) -> TaskRun:
    """One ``rally task start`` with the /proc sampler running beside it."""
    sampler = procstat.Sampler(trees, SAMPLE_SECONDS)
    sampler.start()
    try:
        outcome = rally_task.run_task(home, env, task, task_args, dest)
    finally:
        sampler.stop()
    if not outcome.workloads:
        raise BenchError(
            f"rally task start exited {outcome.rally_exit} without results; see {dest}"
        )
    return TaskRun(outcome.workloads, sampler.intervals)


def check_args(args: argparse.Namespace) -> None:
    """What the parser's types cannot check (for callers that build ARGS themselves)."""
    compare.check_rules(args.threshold, args.alpha, args.max_failure_increase)
    if args.block_seconds < 2 * SAMPLE_SECONDS:
        raise BenchError(f"--block-seconds must be at least {2 * SAMPLE_SECONDS:g}")
    if 2.0 / 2**args.min_clean_blocks >= args.alpha:
        # All of n blocks one way gives the signed-rank test's smallest p, 2 / 2**n.
        need = next(n for n in range(1, 64) if 2.0 / 2**n < args.alpha)
        raise BenchError(
            f"--min-clean-blocks {args.min_clean_blocks} can never show a change at "
            f"--alpha {args.alpha:g}: the signed-rank test needs at least {need} blocks"
        )


def main(args: argparse.Namespace) -> int:
    began = time.monotonic()
    # Every input is checked, and both environments built, before anything starts.
    check_args(args)
    task = rally_task.task_file(args.task)
    task_args = rally_task.parse_task_args(getattr(args, "task_args", None))
    # --identity and the --ldap-* options apply to both sides.
    identity = {
        f: getattr(args, f)
        for f in verb_options.IDENTITY_FIELDS
        if getattr(args, f, None) is not None
    }
    if task.name == Path(CLOUD_TASK).name:
        identity["cache"] = "memcached"  # a side's own option=value still wins
    deps = {
        side: side_deployment(
            getattr(args, side),
            getattr(args, f"{side}_option", None) or [],
            f"--{side}-option",
            identity,
            getattr(args, "conf", None) or (),
        )
        for side in SIDES
    }
    bounds = pairing.Bounds(max_other_swing=args.max_interference, max_steal=args.max_steal)
    stamp = rally_task.utc_stamp()
    out_dir = (Path(args.reports_dir) / stamp).resolve()
    run_root = rally_task.run_dir(f"gate-{stamp}").resolve()
    targets.build_envs(deps, run_root)
    out_dir.mkdir(parents=True, exist_ok=True)

    runs: list[TaskRun] = []
    with rally_task.sigterm_as_interrupt(), contextlib.ExitStack() as stack:
        keystones = start_both(deps, run_root, stack)
        home = rallyenv.RallyHome(run_root / "rally")
        # The admin is the env's user too: without a user, Rally creates
        # (and afterwards deletes) a project and users for every workload,
        # half a minute each on a busy 2-core machine. The paired scenario
        # reads both sides' openrc files and uses neither.
        admin = keystones["baseline"].admin_credentials
        user = {k: v for k, v in admin.items() if k != "auth_url"}
        home.create_env(rally_task.ENV_NAME, rallyenv.keystone_spec(admin, users=[user]))
        home.check_env(rally_task.ENV_NAME)
        # Each side's admin, or with --identity ldap a user of each side's directory.
        side_targets = {
            side: ldap_target(ks, stack) if ks.directory_users_path else ks.openrc_path
            for side, ks in keystones.items()
        }
        args_for_task = {**task_args, **{side: str(p) for side, p in side_targets.items()}}
        # Every server of a side: "server", or "<node>-server" behind HAProxy.
        trees = {
            side: [p for n, p in keystones[side].pids.items() if n.split("-")[-1] == "server"]
            for side in SIDES
        }
        access = {side: [] for side in SIDES}

        def judge() -> GateResult:

            for side in SIDES:
                access[side] = procstat.read_access_log(keystones[side].access_log_path)
            return judge_runs(
                runs, access, threshold=args.threshold, alpha=args.alpha,
                block_seconds=args.block_seconds, bounds=bounds,
                min_clean=args.min_clean_blocks,
                max_failure_increase=args.max_failure_increase,
                base_name=deps["baseline"].describe(), cand_name=deps["candidate"].describe(),
            )  # fmt: skip

        result = None
        while True:
            n = len(runs) + 1
            started = time.monotonic()
            rally_task.progress(f"task run {n}: both sides, paired")
            runs.append(
                measure(home, rally_task.ENV_NAME, task, args_for_task, out_dir / f"run{n}", trees)
            )
            took = time.monotonic() - started
            if len(runs) < args.rounds:
                continue
            result = judge()
            if result.exit_code != pairing.EXIT_INCONCLUSIVE:
                break
            left = args.max_time - (time.monotonic() - began)
            if left < took:
                result.notes.append(
                    f"not extended: another task run takes about {took:.0f} s, "
                    f"{max(left, 0):.0f} s of --max-time {args.max_time:g} s left"
                )
                break
            rally_task.progress(f"{result.headline()}; extending with another task run")
    assert result is not None
    print(pairing.format_text(result))
    paths = {
        "JSON": out_dir / "gate.json",
        "HTML": out_dir / "gate.html",
        "JUnit": out_dir / "gate-junit.xml",
    }
    write_outputs(result, paths)
    for label, path in paths.items():
        print(f"gate {label}: {path}")
    return result.exit_code


def write_outputs(result: GateResult, paths: dict[str, Path]) -> None:

    paths["JSON"].write_text(json.dumps(result.as_dict(), indent=2) + "\n")
    paths["JUnit"].write_text(pairing.render_junit(result))
    html = (
        environment()
        .get_template("gate.html.j2")
        .render(r=result, text=pairing.format_text(result))
    )
    paths["HTML"].write_text(html)
