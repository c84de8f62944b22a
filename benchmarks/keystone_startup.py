"""Time from `keystone-bench keystone up` to the first issued token, cold and warm.

Cold: Keystone's virtual environment is built first (a fresh cache directory).
Warm: the environment is cached, as on every start after the first.
Target: warm within 15 s. Each line also gives the CPU seconds (user and
system) that ``keystone up`` and the processes it waited for spent: the
keystone-manage commands and the installs, not the server's own (its
workers outlive ``up``). On a shared 2-core machine, such as CI's, that is
what one start takes from the tests beside it.

    python benchmarks/keystone_startup.py [--skip-cold] [--warm N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe  # noqa: E402

BENCH = [sys.executable, "-m", "rally_keystone_bench.cli"]


def first_token(run_dir: Path) -> None:
    """Issue one token with the admin credentials from RUN_DIR/openrc."""
    env = dict(
        line.removeprefix("export ").split("=", 1)
        for line in (run_dir / "openrc").read_text().splitlines()
        if line.startswith("export ")
    )
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {
                        "name": env["OS_USERNAME"],
                        "domain": {"name": env["OS_USER_DOMAIN_NAME"]},
                        "password": env["OS_PASSWORD"],
                    }
                },
            }
        }
    }
    req = urllib.request.Request(
        env["OS_AUTH_URL"] + "/auth/tokens",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status == 201


def measure(label: str, cache: str | None) -> float:
    env = dict(os.environ)
    if cache:
        env["KEYSTONE_BENCH_CACHE"] = cache
    with tempfile.TemporaryDirectory(prefix="rkb-startup-") as tmp:
        run_dir = Path(tmp) / "ks"
        t0 = time.monotonic()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        up = subprocess.run(
            [*BENCH, "keystone", "up", "--run-dir", str(run_dir)],
            env=env,
            capture_output=True,
            text=True,
        )
        try:
            if up.returncode != 0:
                raise SystemExit(f"{label}: keystone up failed: {up.stderr.strip()[-500:]}")
            first_token(run_dir)
            elapsed = time.monotonic() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        finally:
            subprocess.run(
                [*BENCH, "keystone", "down", "--run-dir", str(run_dir)],
                env=env,
                capture_output=True,
            )
    print(f"{label:<5} keystone up -> first token: {elapsed:6.1f} s   CPU of up: {cpu:5.1f} s")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-cold", action="store_true", help="measure the warm start only")
    parser.add_argument("--warm", type=int, default=2, help="warm starts to measure (default 2)")
    args = parser.parse_args()
    if args.warm < 1:
        parser.error("--warm must be at least 1")
    print(f"machine: {describe()}")
    if not args.skip_cold:
        with tempfile.TemporaryDirectory(prefix="rkb-cache-") as cache:
            measure("cold", cache)
    warm = [measure("warm", None) for _ in range(args.warm)]  # the default cache
    warm = sorted(warm)[len(warm) // 2]
    print(f"median warm start: {warm:.1f} s")
    print(f"target: warm within 15 s -> {'met' if warm <= 15 else 'NOT met'}")


if __name__ == "__main__":
    main()
