"""What Keystone's tracing costs, and whether its counts are right.

    python benchmarks/tracing_overhead.py [--requests 60] [--rate 1]

One local Keystone (SQLite, 1 uWSGI worker, 4 bcrypt rounds) with OSprofiler
on and SQLAlchemy's own statement audit on. Two clients send the same
requests in random order, one pair at a time: one signs RATE of its
requests (1: each is traced, SQL included; the run's default), the other
signs none (Keystone's middleware lets it through untraced). It prints the
latency of each action traced and not, and the cost of tracing as the
median of the paired differences (signed minus unsigned, the pair sent back
to back, so a busy spell of the machine hits both) with its 95 % confidence
interval (the sign test's order statistics), in ms and in % of the unsigned
median; then per action the traced SQL statement count against the direct
count of SQLAlchemy's before_cursor_execute event, per request.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import math
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from rally_keystone_bench.clients import tracing as client_tracing  # noqa: E402
from rally_keystone_bench.clients.tokens import TokenClient, UserAuth  # noqa: E402
from rally_keystone_bench.deploy import tracing  # noqa: E402
from rally_keystone_bench.deploy.deployment import Deployment  # noqa: E402
from rally_keystone_bench.deploy.keystone import LocalKeystone  # noqa: E402
from rally_keystone_bench.verdicts import counters  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def median_ci(values: list[float], z: float = 1.96) -> tuple[float, float, float]:
    """The median of VALUES and its ~95 % interval from order statistics (sign test)."""
    ordered = sorted(values)
    n = len(ordered)
    spread = z * math.sqrt(n)
    low = max(0, math.floor((n - spread) / 2) - 1)  # ranks j and k, 1-based, as 0-based indexes
    high = min(n - 1, math.ceil(1 + (n + spread) / 2) - 1)
    return statistics.median(ordered), ordered[low], ordered[high]


def measure(
    ks: LocalKeystone, requests: int, seed: int, rate: float = 1.0
) -> dict[tuple[str, bool], list[float]]:
    key = tracing.key_path(ks.run_dir).read_text().strip()
    clients = {True: TokenClient(ks.auth_url), False: TokenClient(ks.auth_url)}
    clients[True]._tracer = client_tracing.Sampler(key, rate)
    clients[False]._tracer = None
    auth = UserAuth.from_credential(ks.admin_credentials)
    for c in clients.values():
        c.authorize(auth)
    rng = random.Random(seed)
    times: dict[tuple[str, bool], list[float]] = collections.defaultdict(list)
    for _ in range(requests):
        for action in ("issue", "validate"):
            order = [True, False]
            rng.shuffle(order)
            for traced in order:
                c = clients[traced]
                timed = contextlib.nullcontext  # only a timed request is signed
                if action == "issue":
                    result = c.issue(auth, timer=timed)
                else:
                    result = c.validate(c.auth_token, timer=timed)
                times[(action, traced)].append(result.elapsed * 1000)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60, help="pairs per action")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--rate", type=float, default=1.0, help="fraction the signing client signs (default 1)"
    )
    args = parser.parse_args()
    print(f"machine: {_machine.describe()}")
    print(f"load average before: {os.getloadavg()[0]:.2f} (other jobs may be running)")
    with tempfile.TemporaryDirectory(prefix="tracing-overhead-") as tmp:
        run_dir = Path(tmp) / "keystone"
        os.environ["KEYSTONE_BENCH_SQL_AUDIT"] = "1"
        os.environ["KEYSTONE_BENCH_TRACE_DIR"] = str(tracing.store_path(run_dir))
        dep = Deployment(workers=1, password_hash_rounds=4, trace=True)
        with LocalKeystone(dep, run_dir) as ks:
            times = measure(ks, args.requests, args.seed, args.rate)
            records = tracing.read_records(run_dir)
            audit = tracing.read_records(run_dir, "audit")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(
        f"{args.requests} requests per action and side, pairs in random order, 1 worker, "
        f"signing client's trace rate {args.rate:g}"
    )
    print(f"{'action':<10} {'side':<9} {'p50 ms':>8} {'p90 ms':>8}")
    for action in ("issue", "validate"):
        for traced in (False, True):
            v = times[(action, traced)]
            side = "traced" if traced else "untraced"
            print(f"{action:<10} {side:<9} {percentile(v, 0.5):>8.2f} {percentile(v, 0.9):>8.2f}")
        on, off = times[(action, True)], times[(action, False)]
        ratio = statistics.median(on) / statistics.median(off)
        print(f"{action:<10} traced/untraced median: {ratio:.3f} ({(ratio - 1) * 100:+.1f} %)")
        mid, low, high = median_ci([a - b for a, b in zip(on, off, strict=True)])
        base = statistics.median(off)
        print(
            f"{action:<10} paired difference: {mid:+.2f} ms [{low:+.2f}, {high:+.2f}] "
            f"= {mid / base * 100:+.1f} % [{low / base * 100:+.1f}, {high / base * 100:+.1f}]"
        )
    direct = collections.Counter(r["base_id"] for r in audit if r.get("base_id"))
    costs = counters.request_costs(records)
    print("SQL statements per request, traced (OSprofiler) against direct (SQLAlchemy events):")
    for action, group in sorted(collections.defaultdict(list, _group(costs)).items()):
        equal = sum(c.sql_count == direct[c.base_id] for c in group)
        med = statistics.median_low([c.sql_count for c in group])
        med_direct = statistics.median_low([direct[c.base_id] for c in group])
        print(
            f"  {action}: {len(group)} requests, median {med} traced / {med_direct} direct, "
            f"equal in {equal} of {len(group)}"
        )
    print("trace store and key removed with the run directory:", not run_dir.exists())
    return 0


def _group(costs: list[counters.RequestCost]) -> dict[str, list[counters.RequestCost]]:
    out: dict[str, list[counters.RequestCost]] = collections.defaultdict(list)
    for c in costs:
        out[c.action].append(c)
    return out


if __name__ == "__main__":
    sys.exit(main())
