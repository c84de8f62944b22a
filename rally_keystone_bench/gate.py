"""``keystone-bench gate``: does a Keystone change make tokens slower?

    keystone-bench gate --baseline keystone==30.0.0 --candidate ../keystone

Two deployments, identical but for the Keystone SPEC (and any
``--baseline-option``/``--candidate-option KEY=VALUE``), are started once
and kept running; the task then runs on them in turn, A B A B ..., one at a
time (never both under load on a small machine), so that machine drift falls
on both sides. Each side's samples are pooled per workload and atomic action
and compared with compare's statistics. Exit 1 when an action is
significantly slower by more than the threshold; HTML, JSON and JUnit XML go
to ``reports/<timestamp>/``.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rally_keystone_bench.errors import BenchError

if TYPE_CHECKING:
    from rally_keystone_bench.compare import CompareResult, WorkloadComparison
    from rally_keystone_bench.deploy.keystone import Deployment
    from rally_keystone_bench.results import Workload

RUNS_DIR = ".keystone-bench/runs"
SIDES = ("baseline", "candidate")


def side_deployment(spec: str, options: Sequence[str], flag: str) -> Deployment:
    """One side's Deployment: Keystone SPEC plus KEY=VALUE options."""
    from rally_keystone_bench.matrix import deployment_from_mapping, parse_option

    values: dict[str, Any] = dict(parse_option(o, flag) for o in options or ())
    if "keystone" in values:
        raise BenchError(
            f"{flag}: give the Keystone SPEC with --{flag.split('-')[2]}, not keystone="
        )
    values["keystone"] = spec
    dep = deployment_from_mapping(values, flag)
    dep.validate()
    return dep


def pool_rounds(
    rounds: Sequence[Sequence[Workload]],
) -> tuple[list[Workload], dict[tuple, dict[str, Any]], dict[tuple, list]]:
    """Samples of every round pooled per workload key and action.

    Returns the first round's workloads (for labels, in task order), the pooled
    ok durations {key: {action: array}} and the throughput windows {key: [arrays]}.
    """
    from rally_keystone_bench.results import pool

    first = list(rounds[0]) if rounds else []
    durations: dict[tuple, dict[str, list]] = {}
    windows: dict[tuple, list] = {}
    for workloads in rounds:
        for wl in workloads:
            per_action = durations.setdefault(wl.key(), {})
            for name, a in wl.actions.items():
                per_action.setdefault(name, []).append(a.ok_durations())
            windows.setdefault(wl.key(), []).append(wl.window_throughput())
    pooled = {k: {n: pool(v) for n, v in acts.items()} for k, acts in durations.items()}
    return first, pooled, windows


def success_percent(rounds: Sequence[Sequence[Workload]], key: tuple, action: str) -> float:
    total = failed = 0
    for workloads in rounds:
        for wl in workloads:
            if wl.key() == key and action in wl.actions:
                a = wl.actions[action]
                total += a.count
                failed += int(a.failed.sum())
    return 100.0 * (1 - failed / total) if total else 0.0


def round_ratios(
    base_rounds: Sequence[Sequence[Workload]],
    cand_rounds: Sequence[Sequence[Workload]],
    key: tuple,
    action: str,
) -> list[float]:
    """Candidate median / baseline median of ACTION in each A/B round."""
    import numpy as np

    def durations(workloads: Sequence[Workload]) -> Any:
        for wl in workloads:
            if wl.key() == key and action in wl.actions:
                return wl.actions[action].ok_durations()
        return np.array([])

    ratios = []
    for base, cand in zip(base_rounds, cand_rounds, strict=False):
        b, c = durations(base), durations(cand)
        if b.size and c.size and float(np.median(b)) > 0:
            ratios.append(float(np.median(c)) / float(np.median(b)))
    return ratios


def require_every_round(
    c: Any,
    base_rounds: Sequence[Sequence[Workload]],
    cand_rounds: Sequence[Sequence[Workload]],
    key: tuple,
    threshold: float,
) -> None:
    """A regression must show in every A/B round, not only in the pooled samples.

    Rounds run back to back, so a burst of load from elsewhere on the machine
    can slow one side's round alone; pooled, that round can make an
    unchanged Keystone look slower (seen: 1.14x on validate, A against A).
    A real slowdown shows in each round. Latency actions only.
    """
    if c.kind != "latency":
        return
    c.round_ratios = round_ratios(base_rounds, cand_rounds, key, c.name)
    if not c.regression or len(c.round_ratios) < 2:
        return
    limit = 1.0 + threshold / 100.0
    if all(r > limit for r in c.round_ratios):
        return
    shown = ", ".join(f"{r:.2f}x" for r in c.round_ratios)
    c.regression = False
    c.verdict += f"; not a regression: not in every round ({shown})"


def compare_sides(
    base_rounds: Sequence[Sequence[Workload]],
    cand_rounds: Sequence[Sequence[Workload]],
    threshold: float,
    alpha: float,
    base_name: str,
    cand_name: str,
) -> CompareResult:
    """compare's engine on each side's pooled samples."""
    from rally_keystone_bench import compare
    from rally_keystone_bench.results import pool, redact

    base_first, base_pool, base_win = pool_rounds(base_rounds)
    _, cand_pool, cand_win = pool_rounds(cand_rounds)
    comparisons: list[WorkloadComparison] = []
    only_base = []
    for wl in base_first:
        key = wl.key()
        if key not in cand_pool:
            only_base.append(wl.label())
            continue
        actions = compare.compare_samples(base_pool[key], cand_pool[key], threshold, alpha)
        for c in actions:
            c.base_success = success_percent(base_rounds, key, c.name)
            c.cand_success = success_percent(cand_rounds, key, c.name)
            require_every_round(c, base_rounds, cand_rounds, key, threshold)
        thr = compare.compare_throughput(pool(base_win[key]), pool(cand_win[key]), threshold, alpha)
        comparisons.append(
            compare.WorkloadComparison(
                label=wl.label(),
                scenario=wl.scenario,
                args=redact(wl.args),
                runner=wl.runner_text(),
                actions=actions,
                throughput=thr,
            )
        )
    if not comparisons:
        raise BenchError("the two sides share no workload")
    only_cand = [
        wl.label() for wl in (cand_rounds[0] if cand_rounds else []) if wl.key() not in base_pool
    ]
    return compare.CompareResult(
        base=base_name,
        candidate=cand_name,
        threshold=threshold,
        alpha=alpha,
        workloads=comparisons,
        only_in_base=only_base,
        only_in_candidate=only_cand,
    )


def main(args: argparse.Namespace) -> int:
    from rally_keystone_bench import compare, runner

    # Every input is checked, and both environments built, before anything starts.
    if args.rounds < 1:
        raise BenchError(f"--rounds must be at least 1, not {args.rounds}")
    if not 0.0 < args.alpha < 1.0:
        raise BenchError(f"--alpha must be between 0 and 1, not {args.alpha}")
    if args.threshold < 0:
        raise BenchError(f"--threshold must be a positive percent, not {args.threshold}")
    task = runner.resolve_tasks([args.task])[0]
    task_args = runner.parse_task_args(getattr(args, "task_args", None))
    deps = {
        "baseline": side_deployment(
            args.baseline, getattr(args, "baseline_option", None) or [], "--baseline-option"
        ),
        "candidate": side_deployment(
            args.candidate, getattr(args, "candidate_option", None) or [], "--candidate-option"
        ),
    }
    stamp = runner.utc_stamp()
    out_dir = (Path(args.reports_dir) / stamp).resolve()
    run_root = Path(RUNS_DIR) / f"gate-{stamp}"
    runner.build_envs(deps, run_root)
    out_dir.mkdir(parents=True, exist_ok=True)

    rounds: dict[str, list[list]] = {s: [] for s in SIDES}
    with runner.sigterm_as_interrupt(), contextlib.ExitStack() as stack:
        envs = {}
        for side in SIDES:
            runner.progress(f"starting {side}: {deps[side].describe()}")
            (run_root / side).mkdir(parents=True, exist_ok=True)
            envs[side] = stack.enter_context(
                runner.prepared_env(run_root / side, deployment=deps[side])
            )
        for r in range(1, args.rounds + 1):
            for side in SIDES:
                runner.progress(f"round {r} of {args.rounds}: {side}")
                home, env = envs[side]
                dest = out_dir / f"round{r}-{side}"
                outcome = runner.run_task(home, env, task, task_args, dest)
                if not outcome.workloads:
                    raise BenchError(
                        f"{side}, round {r}: rally task start exited {outcome.rally_exit} "
                        f"without results; see {dest}"
                    )
                rounds[side].append(outcome.workloads)
    result = compare_sides(
        rounds["baseline"],
        rounds["candidate"],
        args.threshold,
        args.alpha,
        f"{deps['baseline'].describe()} ({args.rounds} rounds)",
        f"{deps['candidate'].describe()} ({args.rounds} rounds)",
    )
    print(compare.format_text(result))
    paths = {
        "JSON": out_dir / "gate.json",
        "HTML": out_dir / "gate.html",
        "JUnit": out_dir / "gate-junit.xml",
    }
    compare.write_json(result, str(paths["JSON"]))
    compare.write_html(result, str(paths["HTML"]))
    compare.write_junit(result, str(paths["JUnit"]))
    for label, path in paths.items():
        print(f"gate {label}: {path}")
    return result.exit_code
