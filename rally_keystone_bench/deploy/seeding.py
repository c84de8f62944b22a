"""Seed a running local Keystone with a :class:`seed_plan.SeedPlan`, in its own venv.

The data is made by ``keystone_bench_seed.py`` through Keystone's managers
(as ``keystone-manage bootstrap`` makes its own), with the run's
keystone.conf, so its cache invalidations reach the running servers'
memcached. The gate calls :func:`seed_all` before any timed window.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.deploy import files
from rally_keystone_bench.deploy.bootstrap import ADMIN_PROJECT, ADMIN_USER
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.deploy.seed_plan import SeedPlan
from rally_keystone_bench.errors import BenchError

SCRIPT = "keystone_bench_seed.py"


def _run(ks: LocalKeystone, mode: str, stdin: str = "") -> dict[str, Any]:
    if ks.venv is None:
        raise BenchError("Keystone is not started: nothing to seed")
    script = files.write(ks.run_dir / SCRIPT, SCRIPT)
    log = ks.run_dir / f"keystone-seed-{mode}.log"
    with writer.open_stream(log, "w") as err:
        proc = subprocess.run(
            [str(ks.venv / "bin" / "python"), str(script), str(ks.config_path), mode],
            input=stdin,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=ks.keystone_env(),
            check=False,
        )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise BenchError(f"seeding Keystone ({mode}) failed (exit {proc.returncode}); see {log}")
    return json.loads(lines[-1])


def seed(ks: LocalKeystone, plan: SeedPlan) -> dict[str, Any]:
    """Make PLAN's data in KS; what the script reports (counts per table, seconds)."""
    given = {"plan": json.loads(plan.to_json()), "admin": {"user": ADMIN_USER}}
    given["admin"]["project"] = ADMIN_PROJECT
    return _run(ks, "seed", json.dumps(given))


def seed_all(keystones: Mapping[str, LocalKeystone], plan: SeedPlan) -> tuple[dict, float]:
    """Seed every deployment at once; (name -> report, wall seconds)."""
    started = time.monotonic()
    reports: dict[str, dict] = {}
    errors: dict[str, BaseException] = {}

    def one(name: str) -> None:
        try:
            reports[name] = seed(keystones[name], plan)
        except BaseException as exc:  # raised below, in the caller's thread
            errors[name] = exc

    threads = [threading.Thread(target=one, args=(n,)) for n in keystones]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, exc in errors.items():
        raise BenchError(f"{name}: {exc}") from exc
    return reports, time.monotonic() - started


def seeded_path(run_dir: Path) -> Path:
    """Where the gate writes what it seeded (JSON, beside the run's logs)."""
    return run_dir / "seeded.json"
