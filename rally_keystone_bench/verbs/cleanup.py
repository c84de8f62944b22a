"""``keystone-bench cleanup --reuse TAG``: delete the projects and users a reuse tag kept."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rally_keystone_bench.clients import credentials
from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.clients.retry import KeystoneAdminError
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.plugins.contexts import reuse


def admin_credential(args: argparse.Namespace) -> dict[str, Any]:
    """Admin credentials from --spec, --run-dir's openrc, or the OS_* variables."""
    if getattr(args, "spec", None):
        return credentials.from_spec_file(args.spec)
    if getattr(args, "run_dir", None):
        openrc = Path(args.run_dir) / "openrc"
        if not openrc.exists():
            raise BenchError(f"{openrc} does not exist: is that a keystone-bench run directory?")
        return credentials.from_openrc(openrc)
    return credentials.from_environ(os.environ)


def main(args: argparse.Namespace) -> int:
    """Delete the tag's projects, users and state file."""
    tag = reuse.check_tag(args.reuse)
    cred = admin_credential(args)
    admin = AdminClient(cred)
    try:
        projects, users = reuse.delete_tag(admin, tag)
    except KeystoneAdminError as exc:
        raise BenchError(f"cleanup of reuse tag {tag}: {exc}") from None
    path = reuse.state_path(tag, cred["auth_url"])
    if path.exists():
        path.unlink()
    retries = f", {admin.stats.describe()}" if admin.stats.total else ""
    print(f"reuse tag {tag}: deleted {projects} projects and {users} users{retries}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench cleanup``."""
    parser.add_argument("--reuse", required=True, metavar="TAG")
    parser.add_argument("--spec", default=None)
    parser.add_argument("--run-dir", default=None)
