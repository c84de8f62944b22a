"""How much Keystone's own time per token moves from one block of tokens to the next.

    python benchmarks/keystone_block_noise.py --blocks 6 --tokens 40

Starts the 1-worker, 4-round Keystone of the engines' test (SQLite, uWSGI),
pins it to the last core and this process to the others, as that test does,
then issues the admin's password token (with the catalog) in BLOCKS blocks of
TOKENS, one after the other with GAP seconds between tokens, and prints
Keystone's own p50 for each block from its access log (the time its worker
spent, no client or queue in it) and the spread of those p50s. Nothing else
changes between blocks: what moves is the machine under Keystone. A comparison
that runs two variants one after the other inherits this spread.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from rally_keystone_bench.clients.tokens import TokenClient, UserAuth  # noqa: E402
from rally_keystone_bench.deploy.deployment import Deployment  # noqa: E402
from rally_keystone_bench.deploy.keystone import LocalKeystone  # noqa: E402
from rally_keystone_bench.procstat import read_access_log, tree_pids  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--tokens", type=int, default=40, help="tokens per block")
    p.add_argument("--gap", type=float, default=0.12, help="seconds between tokens")
    args = p.parse_args()
    if args.blocks < 2 or args.tokens < 1 or args.gap < 0:
        p.error("need --blocks 2 or more, --tokens 1 or more, --gap 0 or more")
    print(f"machine: {_machine.describe()}")
    with open("/proc/loadavg") as f:
        print(f"load average before: {' '.join(f.read().split()[:3])}")
    with tempfile.TemporaryDirectory(prefix="ks-noise-") as tmp:
        ks = LocalKeystone(Deployment(workers=1, password_hash_rounds=4), Path(tmp))
        ks.start()
        try:
            cpus = sorted(os.sched_getaffinity(0))
            if len(cpus) > 1:
                for pid in tree_pids(ks.pids.values()):
                    os.sched_setaffinity(pid, {cpus[-1]})
                os.sched_setaffinity(0, set(cpus[:-1]))
            client = TokenClient(ks.auth_url)
            auth = UserAuth.from_credential(ks.admin_credentials)
            for _ in range(5):  # the connection, the first token of the day
                client.issue(auth)
            p50s = []
            for n in range(1, args.blocks + 1):
                start = time.time()
                for _ in range(args.tokens):
                    client.issue(auth)
                    time.sleep(args.gap)
                end = time.time()
                spent = [
                    r.seconds
                    for r in read_access_log(ks.access_log_path)
                    if start <= r.start <= end
                ]
                p50s.append(float(np.median(spent)) * 1000)
                print(f"block {n}: Keystone's own p50 {p50s[-1]:.1f} ms over {len(spent)} requests")
        finally:
            ks.stop()
    lo, hi, mid = min(p50s), max(p50s), float(np.median(p50s))
    print(
        f"block p50s from {lo:.1f} to {hi:.1f} ms: spread {hi - lo:.1f} ms, "
        f"{(hi - lo) / mid:.0%} of their median {mid:.1f} ms"
    )
    with open("/proc/loadavg") as f:
        print(f"load average after: {' '.join(f.read().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
