"""Record the token suite on each Keystone release into one store, and print its history.

    python benchmarks/history_releases.py --store /tmp/releases.sqlite
        3 runs of tasks/token-suite.yaml (small: 10 iterations a workload at
        concurrency 2) on each release that installs on this machine's Python,
        oldest first, then ``history --changes`` and the issue and validation
        series, and history.html beside the store.

Each run is a real ``keystone-bench run`` on a fresh local Keystone of that
release (SQLite, uWSGI, Fernet, the dependencies of the release's day), the
same deployment and bcrypt rounds for all, so the runs of one action form one
series across releases (the store keeps the release apart from the deployment
line). A release's environment is built the first time it is used.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BENCH = [sys.executable, "-m", "rally_keystone_bench.cli"]
# doc/source/install.rst: what installs on Python 3.11 (22.x and older do not)
RELEASES = "23.0.0,24.0.0,25.0.0,26.0.0,27.0.0,28.0.0,29.0.0,29.1.0,30.0.0"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", required=True)
    p.add_argument("--releases", default=RELEASES, help=f"default {RELEASES}")
    p.add_argument("--runs", type=int, default=3, help="runs per release")
    p.add_argument("--times", type=int, default=10, help="iterations per workload")
    p.add_argument("--rounds", type=int, default=4, help="--password-hash-rounds of the runs")
    args = p.parse_args()
    releases = [r.strip() for r in args.releases.split(",") if r.strip()]
    if not releases or args.runs < 1 or args.times < 2:
        p.error("need a release, --runs 1 or more and --times 2 or more")
    task_args = json.dumps({"times": args.times, "concurrency": 2, "bursts": 2})
    print(f"machine: {_machine.describe()}")
    reports = Path(args.store).resolve().parent / "history-releases-reports"
    for release in releases:
        for n in range(1, args.runs + 1):
            cmd = [*BENCH, "run", str(ROOT / "tasks" / "token-suite.yaml"),
                   "--keystone", f"keystone=={release}", "--task-args", task_args,
                   "--password-hash-rounds", str(args.rounds), "--trace", "off",
                   "--profile", "off", "--history", args.store,
                   "--reports-dir", str(reports)]  # fmt: skip
            t0 = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=reports.parent)
            said = [ln for ln in proc.stdout.splitlines() if ln.startswith("history:")]
            why = said[-1] if said else (proc.stderr.strip().splitlines() or ["no output"])[-1]
            print(
                f"{release} run {n}: exit {proc.returncode}, {time.monotonic() - t0:.0f} s; {why}",
                flush=True,
            )
    html = Path(args.store).resolve().with_suffix(".html")
    asks = [
        ["--changes"],
        ["--series", "--action", "issue_token"],
        ["--series", "--action", "validate_token"],
        ["--html", str(html)],
    ]
    for extra in asks:
        found = subprocess.run(
            [*BENCH, "history", "--history", args.store, *extra], capture_output=True, text=True
        )
        print(found.stdout + found.stderr, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
