"""Record N small runs into a results store and print what ``history`` finds.

    python benchmarks/history_aa.py --runs 20 --store /tmp/aa.sqlite
        20 A/A runs (same release, same deployment): expect no change point.
    python benchmarks/history_aa.py --runs 10 --step-after 5 --step-rounds 8 ...
        the last 5 runs with a higher bcrypt cost (--password-hash-rounds):
        expect one change point at run 6 on keystone.issue_token (the runs
        are one series across the two deployment lines, rounds=4 and 8).
    python benchmarks/history_aa.py --runs 20 --step-after 10 --step-sleep-ms 10 ...
        every run on keystone 30.0.0 built from its sdist; the last 10 on a
        copy of it that sleeps 10 ms at the start of each token issue (the
        tree benchmarks/gate_noise.py makes): a step of a chosen size, with
        nothing else changed, for a change point at run 11.

Each run is a real ``keystone-bench run`` of one tiny workload (password
tokens, --times iterations at concurrency 1) on a local Keystone; the runs
differ only in what --step-rounds changes. Prints the machine, each run's
exit, and then ``history --changes`` of the store.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402
import gate_noise  # noqa: E402

BENCH = [sys.executable, "-m", "rally_keystone_bench.cli"]


def tiny_task(path: Path, times: int) -> Path:
    path.write_text(
        json.dumps(
            {
                "version": 2,
                "title": "history A/A",
                "subtasks": [
                    {
                        "title": "issue tokens",
                        "scenario": {"KeystoneTokens.authenticate": {"method": "password"}},
                        "runner": {"constant": {"times": times, "concurrency": 1}},
                        "contexts": {"users": {"tenants": 1, "users_per_tenant": 2}},
                        "sla": {"failure_rate": {"max": 0}},
                    }
                ],
            }
        )
    )
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--times", type=int, default=30, help="iterations per run")
    p.add_argument("--store", required=True)
    p.add_argument("--keystone", default=None, help="--keystone of every run")
    p.add_argument("--rounds", type=int, default=4, help="--password-hash-rounds of the runs")
    p.add_argument("--step-after", type=int, default=None, metavar="K")
    p.add_argument("--step-rounds", type=int, default=None, help="rounds after run K")
    p.add_argument(
        "--step-sleep-ms", type=float, default=None,
        help="every run on keystone 30.0.0's sdist tree; after run K, on one that sleeps "
        "this long at the start of each token issue",
    )  # fmt: skip
    p.add_argument(
        "--trees", default=None,
        help="where the trees are made (default: the cache's trees/, beside the tests' own, "
        "so that the sdist is downloaded once)",
    )  # fmt: skip
    args = p.parse_args()
    if args.step_sleep_ms is not None and (args.step_after is None or args.keystone):
        p.error("--step-sleep-ms needs --step-after and no --keystone")
    trees = None
    if args.step_sleep_ms is not None:
        from rally_keystone_bench.deploy import venv

        work = Path(args.trees).resolve() if args.trees else venv.cache_root() / "trees"
        work.mkdir(parents=True, exist_ok=True)
        ms = f"{args.step_sleep_ms:g}"
        trees = (
            gate_noise.release_tree(work, "keystone-30.0.0-plain"),
            gate_noise.release_tree(
                work, f"keystone-30.0.0-sleep{ms}ms", sleep=args.step_sleep_ms / 1000
            ),
        )
        # Both Keystone environments built before the first run, so that no run
        # shares the machine with a build.
        for tree in trees:
            venv.ensure_keystone_env(str(tree), progress=print)
    print(f"machine: {_machine.describe()}")
    with tempfile.TemporaryDirectory(prefix="history-aa-") as tmp:
        task = tiny_task(Path(tmp) / "tiny.json", args.times)
        for n in range(1, args.runs + 1):
            stepped = args.step_after is not None and n > args.step_after
            rounds = args.step_rounds if stepped and args.step_rounds else args.rounds
            cmd = [*BENCH, "run", str(task), "--password-hash-rounds", str(rounds),
                   "--trace", "off", "--profile", "off", "--history", args.store,
                   "--reports-dir", str(Path(tmp) / "reports")]  # fmt: skip
            if args.keystone:
                cmd += ["--keystone", args.keystone]
            elif trees:
                cmd += ["--keystone", str(trees[1] if stepped else trees[0])]
            t0 = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
            recorded = [ln for ln in proc.stdout.splitlines() if ln.startswith("history:")]
            said = recorded[-1] if recorded else proc.stderr[-300:]
            took = time.monotonic() - t0
            slept = f", sleep {args.step_sleep_ms:g} ms" if trees and stepped else ""
            print(
                f"run {n:>2}: rounds {rounds}{slept}, exit {proc.returncode}, {took:.0f} s; {said}",
                flush=True,
            )
    # A step of --step-rounds changes the deployment line (rounds=N): the
    # experiment is one series across it.
    across = ["--across-deployments"] if args.step_rounds is not None else []
    found = subprocess.run(
        [*BENCH, "history", "--history", args.store, "--changes", "--series",
         "--action", "issue_token", *across],
        capture_output=True, text=True,
    )  # fmt: skip
    print(found.stdout + found.stderr)
    return found.returncode


if __name__ == "__main__":
    sys.exit(main())
