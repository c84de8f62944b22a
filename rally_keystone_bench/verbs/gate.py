"""``keystone-bench gate``: does a Keystone change make tokens slower?

    keystone-bench gate --candidate ../keystone     # the change against its parent commit
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
import math
import re
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench.deploy import conf_options, gitref, seed_plan, tracing, venv
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver import evidence as keystone_evidence
from rally_keystone_bench.driver import (
    gate_passes,
    gate_reports,
    gate_runs,
    interrupts,
    targets,
    task_files,
    workspace,
)
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verbs import options as verb_options
from rally_keystone_bench.verbs import recording
from rally_keystone_bench.verbs.gate_options import (  # noqa: F401  (the CLI's)
    CLOUD_TASK,
    CONF,
    IDENTITY,
    RULES,
    TRACING,
    VERDICT_RULES,
    add_arguments,
)
from rally_keystone_bench.verbs.groups.deployment import IdentitySettings
from rally_keystone_bench.verbs.groups.verdict import TracingSettings, VerdictRulesSettings
from rally_keystone_bench.verdicts import family, pairing, verdict_head
from rally_keystone_bench.verdicts.blocks import SAMPLE_SECONDS, SIDES, GateSettings

# The default task: a cloud's token paths; with it both sides run memcached
# unless a side's --*-option cache=none says otherwise.
# ... and Keystone's default auth methods plus totp, for its password + TOTP path.
CLOUD_CONF = ("auth.methods=external,password,token,oauth1,mapped,application_credential,totp",)
# The task variables that set a paired workload's duration in our gate tasks.
DURATION_ARGS = ("seconds", "issue_seconds", "validate_seconds")
SPARE_BLOCKS = 2  # beyond those needed: the first and last block of a workload are cut


@dataclasses.dataclass(frozen=True)
class GateArgs:
    """gate's own options as given (verbs/options.read): the door's checks read them."""

    baseline: str | None
    baseline_ref: str | None
    baseline_branch: str | None
    candidate: str
    task: str
    task_args: str | None
    threshold: float
    baseline_option: list[str]
    candidate_option: list[str]
    reports_dir: str
    rounds: int
    max_time: float
    block_seconds: float
    min_clean_blocks: int
    max_interference: float
    max_steal: float


@dataclasses.dataclass(frozen=True)
class GateInputs:
    """What ``gate`` was asked, read and checked once at the door (``at_the_door``):
    nothing past it sees the command line."""

    settings: GateSettings  # the judging's
    task: Path
    task_args: dict[str, Any]  # --task-args, and the durations the gate passes
    deps: dict[str, Deployment]  # each side's (and the default task's cache-off twins)
    commits: dict[str, str]  # both sides' commits, the baseline a commit of the candidate's
    cloud: bool  # the default task (a cloud's token paths)
    history: str | None  # the results store's URL (None: no store)
    counters: TracingSettings  # --trace, --profile, --max-sql-increase
    reports_dir: str
    rounds: int
    max_time: float


def duration_args(task: Path, task_args: dict, settings: GateSettings) -> dict[str, int]:
    """Durations that give every paired workload the clean blocks its family needs.

    The family's size is counted in the task's text (one latency test per
    ``KeystoneTokens.paired`` workload); a task that makes its workloads in a
    loop is undercounted, and the gate then extends itself after the first
    run. When --task-args gives any duration, all are left to it and the task.
    """
    if any(name in task_args for name in DURATION_ARGS):
        return {}
    text = task.read_text(errors="replace")
    tests = max(1, text.count("KeystoneTokens.paired:"))
    needed = max(settings.min_clean, family.blocks_needed(settings.alpha, tests))
    seconds = math.ceil(settings.block_seconds * (needed + SPARE_BLOCKS))
    used = {name for name in DURATION_ARGS if re.search(rf"{{[{{%][^}}]*\b{name}\b", text)}
    return {name: seconds for name in DURATION_ARGS if name in used}


def resolve_baseline(asked: GateArgs) -> tuple[str, dict[str, str]]:
    """The baseline SPEC, and for a commit of the candidate's checkout, both sides' commits.

    BenchError (exit 2) before anything starts for a candidate that is not a
    git checkout, an unknown ref, or uncommitted changes under the default ref.
    """
    spec = asked.baseline
    if spec and not spec.startswith("git:"):
        return spec, {}
    ref = spec[len("git:") :] if spec else asked.baseline_ref
    candidate = Path(asked.candidate)
    if not candidate.is_dir():
        if venv.is_local_checkout(asked.candidate):
            raise BenchError(f"--candidate {asked.candidate} does not exist")
        raise BenchError(
            f"--candidate {asked.candidate} is not a checkout, so it has no parent commit: "
            "give --baseline SPEC (e.g. keystone==30.0.0)"
        )
    repo = gitref.toplevel(candidate)
    if repo != candidate.resolve():
        raise BenchError(
            f"--candidate {asked.candidate} is inside the git checkout {repo}, not its top"
        )
    if asked.baseline_branch is not None:
        commit = gitref.merge_base(repo, asked.baseline_branch)
    else:
        if ref is None and gitref.uncommitted(repo):
            raise BenchError(
                f"{repo} has uncommitted changes: against {gitref.DEFAULT_REF} the gate would "
                "judge them and the last commit together; commit them, or give "
                "--baseline-ref HEAD to judge only the uncommitted changes"
            )
        commit = gitref.resolve(repo, ref or gitref.DEFAULT_REF)
    head = gitref.resolve(repo, "HEAD")
    dirty = " + uncommitted changes" if gitref.uncommitted(repo) else ""
    return commit.spec, {
        "baseline": f"commit {commit.describe()}",
        "candidate": f"commit {head.describe()}{dirty}",
    }


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
    defaults: Mapping[str, Any] | None = None,
    shared_conf: Sequence[str] = (),
) -> Deployment:
    """One side's Deployment: Keystone SPEC plus KEY=VALUE options, then DEFAULTS (both
    sides' --identity and --ldap-*, the default task's cache) for the keys they leave.

    A KEY with a dot is a keystone.conf setting (SECTION.OPTION), over SHARED_CONF (--set).
    """
    pairs = dict(parse_option(o, flag) for o in options or ())
    values: dict[str, Any] = conf_options.split(pairs, shared_conf)
    if "keystone" in values:
        raise BenchError(
            f"{flag}: give the Keystone SPEC with --{flag.split('-')[2]}, not keystone="
        )
    values["keystone"] = spec
    for name, value in (defaults or {}).items():
        values.setdefault(name, value)
    dep = Deployment.from_mapping(values, flag)
    dep.validate()
    return dep


def start_both(
    deps: dict[str, Deployment], run_root: Path, stack: contextlib.ExitStack
) -> dict[str, LocalKeystone]:
    """Start both deployments side by side; each is stopped when STACK closes."""

    keystones = {}
    for side in deps:  # both sides, and with the default task their cache-off twins
        (run_root / side).mkdir(parents=True, exist_ok=True)
        ks = LocalKeystone(deps[side], run_root / side / "keystone", progress=rally_task.progress)
        keystones[side] = ks
        stack.callback(ks.stop)
    errors: dict[str, BaseException] = {}
    ended = {side: threading.Event() for side in deps}

    def start(side: str) -> None:
        try:
            targets.start_explained(keystones[side])
        except BaseException as exc:  # reported below, in this thread
            errors[side] = exc
        finally:
            ended[side].set()

    def wait_for_both() -> None:
        # Not Thread.join(): on Python 3.11 a signal handler's exception inside
        # join() marks a thread that is still running as stopped (the bpo-45274
        # cleanup releases the lock the running thread holds), so a second
        # join() returns at once and the start goes on spawning after the stop.
        for side in deps:
            while not ended[side].wait(0.5):
                pass

    threads = [threading.Thread(target=start, args=(side,)) for side in deps]
    for t in threads:
        t.start()
    try:
        wait_for_both()
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM): both starts give up at their next
        # step and stop what they began; only then does STACK stop the rest,
        # so no process is spawned after the stop.
        for ks in keystones.values():
            ks.cancel_start()
        wait_for_both()
        raise
    for t in threads:
        t.join()  # each has ended its start: returning, nothing more
    for side in deps:
        if side in errors:
            raise errors[side]
        rally_task.progress(f"{side}: Keystone is up at {keystones[side].auth_url}")
    return keystones


def start_and_seed(
    deps: dict[str, Deployment], run_root: Path, stack: contextlib.ExitStack, out_dir: Path | None
) -> tuple[dict[str, LocalKeystone], dict[str, float]]:
    """Start every deployment; with OUT_DIR (the default task) seed them all, before any
    timer. The Keystones, and the seconds each setup step took."""
    setup = {"start": time.monotonic()}
    keystones = start_both(deps, run_root, stack)
    setup["start"] = time.monotonic() - setup["start"]
    if out_dir is not None:  # the sized pass: the same data everywhere
        setup["seeding"], line = gate_passes.seed_both(keystones, seed_plan.DEFAULT, out_dir)
        print(line, flush=True)
    return keystones, setup


def side_name(deps: dict[str, Deployment], commits: dict[str, str], side: str) -> str:
    """SIDE's deployment line, and its commit when the baseline is the checkout's history."""
    name = deps[side].describe()
    return f"{name} ({commits[side]})" if side in commits else name


def check_settings(asked: GateArgs, rules: VerdictRulesSettings) -> GateSettings:
    """The judging's settings from ASKED and the verdict RULES (checked at the door before
    them); BenchError (exit 2) on what the parser's types let by."""
    if asked.block_seconds < 2 * SAMPLE_SECONDS:
        raise BenchError(f"--block-seconds must be at least {2 * SAMPLE_SECONDS:g}")
    if 2.0 / 2**asked.min_clean_blocks >= rules.alpha:
        # All of n blocks one way gives the signed-rank test's smallest p, 2 / 2**n.
        need = next(n for n in range(1, 64) if 2.0 / 2**n < rules.alpha)
        raise BenchError(
            f"--min-clean-blocks {asked.min_clean_blocks} can never show a change at "
            f"--alpha {rules.alpha:g}: the signed-rank test needs at least {need} blocks"
        )
    return GateSettings(
        threshold=asked.threshold,
        alpha=rules.alpha,
        block_seconds=asked.block_seconds,
        min_clean=asked.min_clean_blocks,
        bounds=pairing.Bounds(max_other_swing=asked.max_interference, max_steal=asked.max_steal),
        max_failure_increase=rules.max_failure_increase,
    )


def side_deployments(
    asked: GateArgs, identity: IdentitySettings, conf: Sequence[str], trace: bool
) -> tuple[dict[str, Deployment], dict[str, str]]:
    """Each side's deployment: its SPEC and options; IDENTITY (--identity, --ldap-*), CONF
    (--set) and TRACE (--trace, over a side's own trace=) apply to both.

    With the baseline a commit of the candidate's checkout, also both sides' commits.
    """
    baseline, commits = resolve_baseline(asked)
    specs = {"baseline": baseline, "candidate": asked.candidate}
    defaults = identity.given()
    shared = tuple(conf)
    own = {"baseline": asked.baseline_option, "candidate": asked.candidate_option}
    if Path(asked.task).name == Path(CLOUD_TASK).name:
        defaults["cache"] = "memcached"  # a side's own option=value still wins
        shared = (*CLOUD_CONF, *shared)  # and a --set of the same option too
    deps = {
        side: side_deployment(
            specs[side],
            own[side] or [],
            f"--{side}-option",
            defaults,
            shared,
        )
        for side in SIDES
    }
    return {side: dataclasses.replace(dep, trace=trace) for side, dep in deps.items()}, commits


def at_the_door(args: argparse.Namespace) -> GateInputs:
    """The door: every input read once and checked; BenchError (exit 2) on any bad input,
    in this order, before anything is built or started."""
    asked = verb_options.read(GateArgs, args)
    rules = VERDICT_RULES.settings(args)
    verdict_head.check_rules(asked.threshold, rules.alpha, rules.max_failure_increase)
    counters = TRACING.settings(args)  # --max-sql-increase below 0: refused here
    settings = check_settings(asked, rules)
    task_args = workspace.parse_task_args(asked.task_args)
    # Each side's credentials and the durations are given to the task by the gate.
    # The default task's cache-off pass reads its own pair's credentials too.
    sides = [*SIDES, *(gate_passes.cache_off_name(side) for side in SIDES)]
    given = {**dict.fromkeys(DURATION_ARGS, 1), **task_args, **dict.fromkeys(sides, "openrc")}
    task = task_files.checked(asked.task, given)
    task_args = {**duration_args(task, task_args, settings), **task_args}
    identity, conf = IDENTITY.settings(args), CONF.settings(args)
    deps, commits = side_deployments(asked, identity, conf, counters.trace)
    cloud = Path(asked.task).name == Path(CLOUD_TASK).name
    if cloud:  # the default task's cache-off pass: a second pair without memcached
        deps = gate_passes.with_cache_off(deps)
    history = verb_options.check_history(args)
    return GateInputs(
        settings,
        task,
        task_args,
        deps,
        commits,
        cloud,
        history,
        counters,
        asked.reports_dir,
        asked.rounds,
        asked.max_time,
    )


def main(args: argparse.Namespace) -> int:
    began = time.monotonic()
    # Every input is checked, and both environments built, before anything starts.
    door = at_the_door(args)
    deps, commits = door.deps, door.commits
    counters, reports = door.counters, Path(door.reports_dir)
    limits = gate_runs.RunLimits(door.rounds, door.max_time, began, counters.profile)
    stamp = workspace.utc_stamp()
    out_dir = (reports / stamp).resolve()
    targets.build_envs(deps)  # a SPEC that does not install: no directory made yet
    run_root = workspace.run_dir(f"gate-{stamp}").resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    traced = counters.trace
    if traced:  # both sides traced (side_deployments), with one key our clients sign with
        keystone_evidence.share_trace_key(deps, run_root)
    evidence = keystone_evidence.Evidence()
    names = {side: side_name(deps, commits, side) for side in SIDES}
    outcomes: list = []  # each task run's, for the results store
    with interrupts.sigterm_as_interrupt(), contextlib.ExitStack() as stack:
        for side in deps:  # a failed start's trace key and store too
            stack.callback(tracing.remove, run_root / side / "keystone")
        keystones, setup = start_and_seed(deps, run_root, stack, out_dir if door.cloud else None)
        evidence.read_sources(keystones)  # "where the time went" quotes the candidate's lines
        signer = keystones["baseline"].run_dir  # every deployment holds its key (share_key)
        for line in evidence.check_keys(keystones, signer) if traced else []:
            print(line, flush=True)
        # Every timed request signed (rate 1), whatever KEYSTONE_BENCH_TRACE_RATE says here.
        stack.enter_context(tracing.client_environment(signer, rate=1.0))
        paired = gate_runs.paired_rally(keystones, run_root, stack, door.task, door.task_args)
        result = gate_runs.run_until_judged(
            paired, keystones, door.settings, names, limits, out_dir, evidence, outcomes
        )
    if traced:
        result.notes.extend(evidence.untraced([a.workload for a in result.actions]))
    tolerance = counters.max_sql_increase
    rc = gate_reports.write_reports(result, out_dir, evidence, tolerance, traced)
    line = " | ".join(f"{side}: {names[side]}" for side in SIDES)
    summaries = recording.summaries_of_outcomes(outcomes, out_dir, "gate")
    verb_options.record_history(
        door.history, "gate", out_dir, deps["candidate"], summaries, line=line
    )
    print(gate_passes.total_line(began, setup))
    return rc
