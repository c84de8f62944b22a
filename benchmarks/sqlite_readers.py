"""Does the SQLite default slow validation down while tokens are being issued?

The token suite's validation workload (each iteration issues a password
token, then validates it 5 times; 2 iterations at once, so one worker's
validations run while the other's issue holds Keystone busy) against two
local Keystones started side by side: the SQLite default and PostgreSQL
(the server at 127.0.0.1:5432, a fresh database dropped afterwards). Rounds
alternate between them, so both see the same machine load. Prints the
validate p50 and p95 of each, and SQLite's against PostgreSQL's.

Target: SQLite's validate p50 and p95 within 1.3x of PostgreSQL's.

    python benchmarks/sqlite_readers.py [ROUNDS] [ITERATIONS_PER_WORKER]
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe  # noqa: E402

from rally_keystone_bench.clients.auth import UserAuth  # noqa: E402
from rally_keystone_bench.clients.tokens import TokenClient  # noqa: E402
from rally_keystone_bench.deploy.deployment import Deployment  # noqa: E402
from rally_keystone_bench.deploy.keystone import LocalKeystone  # noqa: E402
from rally_keystone_bench.verdicts import stats  # noqa: E402

CONCURRENCY = 2  # the token suite's default
REPETITIONS = 5  # validations per issued token, as the suite
TARGET = 1.3


def run_round(ks: LocalKeystone, iterations: int, validates: list, failures: list) -> None:
    """CONCURRENCY workers, each ITERATIONS times: issue, then validate REPETITIONS times."""
    creds = ks.admin_credentials
    auth = UserAuth.from_credential(creds)

    def worker() -> None:
        client = TokenClient(creds["auth_url"])
        client.use_auth_token(client.issue(auth, include_catalog=False).token)
        for _ in range(iterations):
            issued = client.issue(auth)
            if issued.status != 201 or issued.token is None:
                failures.append(f"issue {issued.status}")
                continue
            for _ in range(REPETITIONS):
                result = client.validate(issued.token, include_catalog=False)
                if result.status != 200:
                    failures.append(f"validate {result.status}")
                validates.append(result.elapsed)

    threads = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main(argv: list[str]) -> int:
    rounds = int(argv[1]) if len(argv) > 1 else 4
    iterations = int(argv[2]) if len(argv) > 2 else 4
    print(f"machine: {describe()}")
    print(
        f"workload: {CONCURRENCY} at once, each iteration 1 password token + "
        f"{REPETITIONS} validations (GET, no catalog); {rounds} alternating rounds "
        f"of {iterations} iterations per worker"
    )
    with tempfile.TemporaryDirectory(prefix="sqlite-readers-") as tmp:
        deployments = {
            "sqlite": Deployment(),
            "postgresql": Deployment(db="postgresql"),
        }
        started: dict[str, LocalKeystone] = {}
        samples: dict[str, list[float]] = {name: [] for name in deployments}
        failures: dict[str, list[str]] = {name: [] for name in deployments}
        try:
            for name, dep in deployments.items():
                ks = LocalKeystone(dep, Path(tmp) / name)
                ks.start()
                started[name] = ks
            for r in range(rounds):
                order = list(started) if r % 2 == 0 else list(reversed(started))
                for name in order:
                    t0 = time.monotonic()
                    run_round(started[name], iterations, samples[name], failures[name])
                    print(f"round {r + 1}: {name:<10} {time.monotonic() - t0:6.1f} s", flush=True)
        finally:
            for ks in started.values():
                ks.stop()
    result = {}
    for name, values in samples.items():
        summary = stats.summarize(values)
        p50, p95 = summary["p50"], summary["p95"]
        result[name] = (p50, p95)
        print(
            f"{name:<10} validate n={len(values):4d}  p50 {p50 * 1000:7.1f} ms  "
            f"p95 {p95 * 1000:7.1f} ms  max {summary['max'] * 1000:7.1f} ms  "
            f"failed {len(failures[name])}"
        )
    r50 = result["sqlite"][0] / result["postgresql"][0]
    r95 = result["sqlite"][1] / result["postgresql"][1]
    met = r50 <= TARGET and r95 <= TARGET and not any(failures.values())
    print(f"sqlite / postgresql: p50 {r50:.2f}x, p95 {r95:.2f}x")
    print(f"target: within {TARGET}x, no failed request -> {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
