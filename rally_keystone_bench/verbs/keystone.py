"""The ``keystone-bench keystone up|down|status`` verbs."""

from __future__ import annotations

import argparse
from pathlib import Path

from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver.targets import start_explained
from rally_keystone_bench.driver.task import progress
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verbs import groups

DEFAULT_RUN_DIR = ".keystone-bench/keystone"
DEPLOYMENT = groups.Deployment()  # keystone up's options


def _run_dir(given: str | None) -> Path:
    """The --run-dir GIVEN (None: the default), checked."""
    path = Path(given or DEFAULT_RUN_DIR)
    check_run_dir(path)
    return path


def check_run_dir(path: Path, flag: str = "--run-dir") -> None:
    """BenchError when PATH exists and is not a directory."""
    if path.exists() and not path.is_dir():
        raise BenchError(f"{flag} {path} is a file, not a directory")


def keystone_up(args: argparse.Namespace) -> int:
    run_dir = _run_dir(args.run_dir)
    deployment = DEPLOYMENT.settings(args)  # a bad SPEC or --set: before the run dir is made
    ks = LocalKeystone(deployment, run_dir, progress=progress)
    if ks.is_running():
        raise BenchError(f"a Keystone from {ks.run_dir} is already running: keystone down first")
    start_explained(ks)
    print(f"Keystone is up: {ks.auth_url}")
    print(f"credentials: source {ks.openrc_path}")
    print(f"logs: {ks.run_dir}")
    return 0


def keystone_down(args: argparse.Namespace) -> int:
    ks = LocalKeystone(run_dir=_run_dir(args.run_dir), progress=progress)
    if not ks.state_path.exists():
        print(f"no Keystone was started from {ks.run_dir}")
        return 0
    was_running = ks.is_running()
    ks.stop()
    print(("stopped" if was_running else "was not running:") + f" Keystone in {ks.run_dir}")
    print(f"logs kept: {ks.run_dir}")
    return 0


def keystone_status(args: argparse.Namespace) -> int:
    ks = LocalKeystone(run_dir=_run_dir(args.run_dir))
    if not ks.state_path.exists():
        raise BenchError(f"no Keystone was started from {ks.run_dir}")
    if ks.is_running() and ks.answers():
        print(f"running: {ks.auth_url} (pids {', '.join(map(str, ks.pids.values()))})")
        return 0
    raise BenchError(f"not running: Keystone in {ks.run_dir}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The actions of ``keystone-bench keystone`` (up, down, status) and their options."""
    ks_sub = parser.add_subparsers(dest="action", metavar="ACTION")
    ks_sub.required = True
    up = ks_sub.add_parser("up", help="start a local Keystone and write RUN_DIR/openrc")
    DEPLOYMENT.add(up)
    up.add_argument(
        "--run-dir",
        default=None,
        help=f"where config, logs and openrc go (default {DEFAULT_RUN_DIR})",
    )
    up.set_defaults(func=keystone_up)
    down = ks_sub.add_parser("down", help="stop the local Keystone, keep its logs")
    down.add_argument(
        "--run-dir",
        default=None,
        help=f"the run directory of `keystone up` (default {DEFAULT_RUN_DIR})",
    )
    down.set_defaults(func=keystone_down)
    status = ks_sub.add_parser("status", help="say whether the local Keystone answers")
    status.add_argument(
        "--run-dir",
        default=None,
        help=f"the run directory of `keystone up` (default {DEFAULT_RUN_DIR})",
    )
    status.set_defaults(func=keystone_status)
