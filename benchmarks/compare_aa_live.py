"""compare on A/A pairs of real runs, a one-core CPU hog in random stretches: how many exit 1.

One local Keystone (SQLite, uWSGI 2x1, 4 bcrypt rounds) serves every run;
each pair is two ``keystone-bench run --existing-cloud`` of the same small
token task, one after the other, and ``keystone-bench compare`` judges it.
Meanwhile a busy loop runs in random stretches (on for 5-40 s, off for
5-40 s, seeded), so some runs are disturbed and some are not. Same code on
both sides: every exit 1 is a false alarm. Target: none.

    python benchmarks/compare_aa_live.py [--pairs 20] [--times 20] [--seed 1]
    python benchmarks/compare_aa_live.py --pairs 1 --times 3   # smallest
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe  # noqa: E402

from rally_keystone_bench.deploy.deployment import Deployment  # noqa: E402
from rally_keystone_bench.deploy.keystone import LocalKeystone  # noqa: E402

BENCH = [sys.executable, "-m", "rally_keystone_bench.cli"]


def task(path: Path, times: int) -> Path:
    path.write_text(json.dumps({
        "version": 2, "title": "aa", "subtasks": [
            {"title": "issue tokens",
             "scenario": {"KeystoneTokens.authenticate": {"method": "password"}},
             "runner": {"constant": {"times": times, "concurrency": 1}},
             "contexts": {"users": {"tenants": 1, "users_per_tenant": 2}}},
            {"title": "validate tokens",
             "scenario": {"KeystoneTokens.validate": {"repetitions": 2}},
             "runner": {"constant": {"times": times, "concurrency": 1}},
             "contexts": {"users": {"tenants": 1, "users_per_tenant": 2}}},
        ]}))  # fmt: skip
    return path


def hog_in_stretches(stop: threading.Event, rng: random.Random) -> None:
    """A one-core busy loop, on and off at random, until STOP."""
    code = "while True: pass"
    while not stop.is_set():
        proc = subprocess.Popen([sys.executable, "-c", code])
        stop.wait(rng.uniform(5, 40))
        proc.kill()
        proc.wait()
        stop.wait(rng.uniform(5, 40))


def run(ks: LocalKeystone, task_path: Path, reports: Path) -> str:
    cred = ks.admin_credentials
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update(OS_AUTH_URL=cred["auth_url"], OS_USERNAME=cred["username"],
               OS_PASSWORD=cred["password"], OS_PROJECT_NAME=cred["project_name"],
               OS_USER_DOMAIN_NAME="Default", OS_PROJECT_DOMAIN_NAME="Default")  # fmt: skip
    argv = [*BENCH, "run", "--existing-cloud", str(task_path), "--reports-dir", str(reports)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    found = re.findall(r"Rally JSON: (\S+)", proc.stdout)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"run failed ({proc.returncode}): {proc.stderr[-500:]}")
    return found[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--times", type=int, default=20, help="iterations per workload")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"machine: {describe()}")
    rng = random.Random(args.seed)
    codes: collections.Counter[int] = collections.Counter()
    with tempfile.TemporaryDirectory(prefix="compare-aa-") as tmp:
        root = Path(tmp)
        dep = Deployment(workers=2, password_hash_rounds=4)
        with LocalKeystone(dep, root / "keystone") as ks:
            task_path = task(root / "aa.json", args.times)
            stop = threading.Event()
            hog = threading.Thread(target=hog_in_stretches, args=(stop, rng), daemon=True)
            hog.start()
            try:
                for n in range(1, args.pairs + 1):
                    began = time.monotonic()
                    a = run(ks, task_path, root / f"a{n}")
                    b = run(ks, task_path, root / f"b{n}")
                    cmp = subprocess.run([*BENCH, "compare", a, b], capture_output=True,
                                         text=True, timeout=600)  # fmt: skip
                    codes[cmp.returncode] += 1
                    head = cmp.stdout.splitlines()[0] if cmp.stdout else cmp.stderr.strip()
                    load = os.getloadavg()[0]
                    print(f"pair {n:2d}: exit {cmp.returncode} in {time.monotonic() - began:.0f} s "
                          f"(load {load:.1f}): {head[:160]}", flush=True)  # fmt: skip
            finally:
                stop.set()
                hog.join()
    print(f"pairs: {args.pairs}; exit 0: {codes[0]}, exit 3: {codes[3]}, "
          f"exit 1 (false alarms): {codes[1]} (target: 0)")  # fmt: skip
    return 0 if codes[1] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
