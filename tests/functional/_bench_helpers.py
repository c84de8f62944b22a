"""Helpers of the deployment, matrix and gate functional tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rally_keystone_bench.deploy import process

BENCH = [sys.executable, "-m", "rally_keystone_bench.cli"]
ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([*BENCH, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def tiny_task(path: Path, times: int = 3, concurrency: int = 1) -> Path:
    """One workload: password tokens from 2 users, TIMES iterations."""
    task = {
        "version": 2,
        "title": "tiny",
        "subtasks": [
            {
                "title": "issue tokens",
                "scenario": {"KeystoneTokens.authenticate": {"method": "password"}},
                "runner": {"constant": {"times": times, "concurrency": concurrency}},
                "contexts": {"users": {"tenants": 1, "users_per_tenant": 2}},
                "sla": {"failure_rate": {"max": 0}},
            }
        ],
    }
    path.write_text(json.dumps(task))
    return path


def bench_databases() -> set[str]:
    """keystone_bench_* databases on the local PostgreSQL and MariaDB."""
    pg = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-Atc",
         "SELECT datname FROM pg_database WHERE datname LIKE 'keystone_bench_%'"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    my = subprocess.run(
        ["mysql", "-h127.0.0.1", "-uroot", "-Nse", "SHOW DATABASES LIKE 'keystone_bench_%'"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return set(pg) | set(my)


def states(root: Path) -> list[dict]:
    """Every Keystone state.json under ROOT."""
    return [json.loads(p.read_text()) for p in root.rglob("keystone/state.json")]


def live_pids(state: dict) -> list[int]:
    """Pids a state ever recorded that still run (stop() empties the list, so read the logs)."""
    return [p for p in (state.get("pids") or {}).values() if process.is_alive(p)]
