"""What several verbs read from their command line: a deployment, a target, a cloud spec.

Not a verb: the verbs share it, and nothing below the verbs sees a Namespace.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from pathlib import Path

from rally_keystone_bench.deploy.keystone import Deployment
from rally_keystone_bench.deploy.mock import MockKeystone, check_stall
from rally_keystone_bench.driver import rally as rallyenv
from rally_keystone_bench.errors import BenchError

# Where Keystone's users live: options that gate applies to both sides.
IDENTITY_FIELDS = (
    "identity",
    "ldap_pool",
    "ldap_pool_size",
    "ldap_auth_pool_size",
    "ldap_tls",
    "ldap_port",
    "ldap_users",
)


def add_set_option(p: argparse.ArgumentParser) -> None:
    """``--set SECTION.OPTION=VALUE``, repeatable: any keystone.conf setting."""
    p.add_argument(
        "--set",
        dest="conf",
        action="append",
        default=None,
        metavar="SECTION.OPTION=VALUE",
        help="a keystone.conf setting, e.g. token.provider=jws (repeatable); checked "
        "against the Keystone's own options before anything starts",
    )


def deployment(args: argparse.Namespace) -> Deployment:
    """The Deployment of a verb's deployment options; unset options keep their defaults."""
    names = [f.name for f in dataclasses.fields(Deployment)]
    values = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    return Deployment.from_mapping(values, "the command line")


def cloud_spec(args: argparse.Namespace) -> dict:
    """The Rally env spec of an existing cloud: --spec FILE, else the OS_* variables."""
    if args.spec:
        return rallyenv.load_spec_file(args.spec)
    return rallyenv.spec_from_environ(os.environ)


def check_target(args: argparse.Namespace) -> None:
    """--target and its options (capacity, load); BenchError before any load."""
    if args.spec and args.target != "cloud":
        raise BenchError("--spec describes an existing cloud: use it with --target cloud")
    if args.target == "mock":
        if args.mock_workers < 1:
            raise BenchError(f"--mock-workers must be at least 1, not {args.mock_workers}")
        if not math.isfinite(args.mock_service_time) or args.mock_service_time < 0:
            raise BenchError(
                f"--mock-service-time must be 0 ms or more, not {args.mock_service_time:g}"
            )
        check_stall(getattr(args, "mock_stall", 0.0), getattr(args, "mock_stall_every", 0.0))
    if args.target == "cloud" and args.spec and not Path(args.spec).is_file():
        raise BenchError(f"env spec {args.spec} does not exist")


def mock(args: argparse.Namespace, run_dir: Path) -> MockKeystone:
    """The mock of --target mock, in RUN_DIR/mock (not started)."""
    return MockKeystone(
        workers=args.mock_workers,
        service_time_ms=args.mock_service_time,
        stall_s=getattr(args, "mock_stall", 0.0),
        stall_every_s=getattr(args, "mock_stall_every", 0.0),
        run_dir=run_dir / "mock",
    )
