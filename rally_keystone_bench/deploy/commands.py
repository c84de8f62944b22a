"""The ``keystone-bench keystone up|down|status`` verbs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rally_keystone_bench.deploy.keystone import Deployment, LocalKeystone
from rally_keystone_bench.errors import BenchError

DEFAULT_RUN_DIR = ".keystone-bench/keystone"


def progress(message: str) -> None:
    print(f"keystone-bench: {message}", file=sys.stderr, flush=True)


def deployment_from_args(args: argparse.Namespace) -> Deployment:
    """A Deployment from the deployment options of a verb; unset options keep defaults."""
    dep = Deployment()
    for field in (
        "keystone",
        "workers",
        "threads",
        "server",
        "db",
        "db_url",
        "cache",
        "password_hash_rounds",
        "port",
    ):
        value = getattr(args, field, None)
        if value is not None:
            setattr(dep, field, value)
    return dep


def _run_dir(args: argparse.Namespace) -> Path:
    return Path(args.run_dir or DEFAULT_RUN_DIR)


def start_or_explain(ks: LocalKeystone) -> None:
    """Start KS; when it fails to start, print the tail of its logs before the error."""
    try:
        ks.start()
    except BenchError:
        tail = ks.log_tail()
        if tail:
            print(tail, file=sys.stderr)
        raise


def keystone_up(args: argparse.Namespace) -> int:
    run_dir = _run_dir(args)
    ks = LocalKeystone(deployment_from_args(args), run_dir, progress=progress)
    if ks.is_running():
        raise BenchError(f"a Keystone from {ks.run_dir} is already running: keystone down first")
    start_or_explain(ks)
    print(f"Keystone is up: {ks.auth_url}")
    print(f"credentials: source {ks.openrc_path}")
    print(f"logs: {ks.run_dir}")
    return 0


def keystone_down(args: argparse.Namespace) -> int:
    ks = LocalKeystone(run_dir=_run_dir(args))
    if not ks.state_path.exists():
        print(f"no Keystone was started from {ks.run_dir}")
        return 0
    was_running = ks.is_running()
    ks.stop()
    print(("stopped" if was_running else "was not running:") + f" Keystone in {ks.run_dir}")
    print(f"logs kept: {ks.run_dir}")
    return 0


def keystone_status(args: argparse.Namespace) -> int:
    ks = LocalKeystone(run_dir=_run_dir(args))
    if not ks.state_path.exists():
        print(f"no Keystone was started from {ks.run_dir}")
        return 2
    if ks.is_running() and ks.answers():
        print(f"running: {ks.auth_url} (pids {', '.join(map(str, ks.pids.values()))})")
        return 0
    print(f"not running: {ks.run_dir}")
    return 2
