"""``keystone-bench cleanup``: delete what our contexts left in a cloud.

``--reuse TAG``: the projects and users a reuse tag kept, then its state
(the users' passwords) and token_pool's kept tokens. ``--workload-id ID``
(repeatable): what a workload's contexts created and could not delete, a
task cut short (keystone-bench prints this command with the IDs when that
may have happened). ``--load ID`` (repeatable): the users and project of a
Locust load whose master was killed before it deleted them.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

from rally_keystone_bench.clients import credentials
from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.clients.retry import KeystoneAdminError
from rally_keystone_bench.engines.locust import setup as locust_setup
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.plugins.contexts import leftovers, reuse
from rally_keystone_bench.verbs import options


@dataclasses.dataclass(frozen=True)
class CleanupSettings:
    """What to delete (one of reuse, workload, load) and whose admin credentials."""

    reuse: str | None  # a reuse TAG
    workload: list[str] | None  # --workload-id IDs
    load: list[str] | None  # --load IDs
    spec: str | None  # admin credentials: a Rally env spec file
    run_dir: str | None  # ... or a local Keystone's openrc (else the OS_* variables)


def admin_credential(spec: str | None, run_dir: str | None) -> dict[str, Any]:
    """Admin credentials from SPEC (--spec), RUN_DIR's openrc, or the OS_* variables."""
    if spec:
        return credentials.from_spec_file(spec)
    if run_dir:
        openrc = Path(run_dir) / "openrc"
        if not openrc.exists():
            raise BenchError(f"{openrc} does not exist: is that a keystone-bench run directory?")
        return credentials.from_openrc(openrc)
    return credentials.from_environ(os.environ)


def main(args: argparse.Namespace) -> int:
    """Delete the tag's projects, users and state file, or what the workloads left."""
    settings = options.read(CleanupSettings, args)
    given = [o for o in (settings.reuse, settings.workload, settings.load) if o]
    if len(given) != 1:
        raise BenchError("cleanup needs one of --reuse TAG, --workload-id ID or --load ID")
    if settings.workload:
        return clean_workloads(settings)
    if settings.load:
        return clean_loads(settings)
    tag = reuse.check_tag(settings.reuse)
    cred = admin_credential(settings.spec, settings.run_dir)
    admin = AdminClient(cred)
    try:
        projects, users = reuse.delete_tag(admin, tag)
    except KeystoneAdminError as exc:
        raise BenchError(f"cleanup of reuse tag {tag}: {exc}") from None
    reuse.forget(tag, cred["auth_url"])  # its users' passwords and kept tokens
    retries = f", {admin.stats.describe()}" if admin.stats.total else ""
    print(f"reuse tag {tag}: deleted {projects} projects and {users} users{retries}")
    return 0


def clean_workloads(settings: CleanupSettings) -> int:
    """Delete what each --workload-id's contexts left; one line per workload."""
    shorts = list(dict.fromkeys(leftovers.check_workload(w) for w in settings.workload or ()))
    admin = AdminClient(admin_credential(settings.spec, settings.run_dir))
    for short in shorts:
        names = " and ".join(f"{p}*" for p in leftovers.prefixes(short))
        try:
            counts = leftovers.delete_workload(admin, short)
        except KeystoneAdminError as exc:
            raise BenchError(f"cleanup of workload {short} ({names}): {exc}") from None
        print(f"workload {short}: deleted {leftovers.describe(counts)} ({names})")
    return 0


def clean_loads(settings: CleanupSettings) -> int:
    """Delete the users and project each --load's Locust master left; one line per load."""
    run_ids = list(dict.fromkeys(locust_setup.check_run_id(r) for r in settings.load or ()))
    admin = AdminClient(admin_credential(settings.spec, settings.run_dir))
    for run_id in run_ids:
        name = f"{locust_setup.run_prefix(run_id)}*"
        try:
            counts = locust_setup.delete_run(admin, run_id)
        except KeystoneAdminError as exc:
            raise BenchError(f"cleanup of load {run_id} ({name}): {exc}") from None
        print(f"load {run_id}: deleted {leftovers.describe(counts)} ({name})")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench cleanup``."""
    parser.add_argument(
        "--reuse",
        default=None,
        metavar="TAG",
        help="delete the users and projects kept by a run with this --reuse TAG",
    )
    parser.add_argument(
        "--workload-id",
        dest="workload",
        action="append",
        default=None,
        metavar="ID",
        help="delete what this workload's contexts left (its uuid or first 8 hex digits, "
        "as an interrupted run printed it); repeatable",
    )
    # history's --workload filters by a workload's name
    options.add_deprecated_alias(parser, "--workload", "--workload-id", dest="workload")
    parser.add_argument(
        "--load",
        action="append",
        default=None,
        metavar="ID",
        help="delete the users and project a Locust load's master left (kbl-ID*, its 8 hex "
        "digits as keystone-bench printed them); repeatable",
    )
    parser.add_argument(
        "--spec",
        default=None,
        help="admin credentials from this Rally env spec file (default: --run-dir, else OS_*)",
    )
    parser.add_argument(
        "--run-dir", default=None, help="admin credentials from this local Keystone's openrc"
    )
