"""The local Keystone's options: the deployment (server, database, cache, nodes), where
its users live (identity) and any keystone.conf setting (--set). The Deployment group's
settings is the deploy.deployment.Deployment, validated at the door."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rally_keystone_bench import boundary
from rally_keystone_bench.deploy.deployment import Deployment as DeploymentSettings
from rally_keystone_bench.verbs.applicability import DEPLOYMENT, Rule
from rally_keystone_bench.verbs.groups.base import LOCAL, OptionGroup, fields


@dataclasses.dataclass(frozen=True)
class IdentitySettings:
    """Where Keystone's users live, as given: gate applies it to both sides. Each field
    is the Deployment field of the same name; None: not given."""

    identity: str | None = None
    ldap_pool: bool | None = None
    ldap_pool_size: int | None = None
    ldap_auth_pool_size: int | None = None
    ldap_tls: bool | None = None
    ldap_port: int | None = None
    ldap_users: int | None = None

    def given(self) -> dict[str, Any]:
        """The options given (a value other than None), by Deployment field."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


class Deployment(OptionGroup):
    """A local Keystone: --port, --workers (WORKERS false: load names its server workers
    --server-workers), --threads, --keystone, --server, the database, cache and nodes,
    the identity options and --set; each applies WHEN (a local target by default)."""

    def __init__(self, workers: bool = True, when: Rule = LOCAL) -> None:
        self.workers = workers
        self.applies = dict.fromkeys((d for d in DEPLOYMENT if workers or d != "workers"), when)

    def add(self, parser: argparse.ArgumentParser) -> None:
        _add_deployment_options(parser, self.workers)

    def unchecked(self, args: argparse.Namespace, trace: bool = False) -> DeploymentSettings:
        """The Deployment of the options; unset ones keep their defaults. TRACE is the
        field no deployment option sets: run's --trace, resolved by its Tracing group."""
        names = [n for n in DEPLOYMENT if n != "workers" or self.workers]
        # (without its own --workers, the verb's are not the server's: load's are Locust's)
        values = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
        return DeploymentSettings.from_mapping({**values, "trace": trace}, "the command line")

    def settings(self, args: argparse.Namespace, workers: int | None = None) -> DeploymentSettings:
        """The deployment, validated, its Keystone environment built and its --set
        checked: bad input said at the door, before a verb makes a file. WORKERS: its
        server workers, when the verb names them otherwise (load's --server-workers)."""
        from rally_keystone_bench.driver import targets

        found = self.unchecked(args)
        if workers is not None:
            found = dataclasses.replace(found, workers=workers)
        found.validate()
        targets.check_deployment(found)
        return found


class Identity(OptionGroup):
    """Where Keystone's users live: --identity and the --ldap-* options."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        _add_identity_options(parser)

    def settings(self, args: argparse.Namespace) -> IdentitySettings:
        names = [f.name for f in dataclasses.fields(IdentitySettings)]
        return IdentitySettings(**fields(args, names))


class ConfSet(OptionGroup):
    """``--set SECTION.OPTION=VALUE`` (dest conf), repeatable."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        _add_set_option(parser)

    def settings(self, args: argparse.Namespace) -> tuple[str, ...]:
        return tuple(args.conf or ())


def _add_deployment_options(p: argparse.ArgumentParser, workers: bool = True) -> None:
    """Options that describe a local Keystone deployment (``load`` names its
    server workers --server-workers: its --workers are Locust's)."""
    p.add_argument(
        "--port", type=boundary.port, default=None, help="loopback port (default: a free one)"
    )
    if workers:
        p.add_argument(
            "--workers",
            type=boundary.positive_int,
            default=None,
            help="server worker processes (default 2)",
        )
    p.add_argument(
        "--threads", type=boundary.positive_int, default=None, help="threads per worker (default 1)"
    )
    p.add_argument(
        "--keystone",
        metavar="SPEC",
        default=None,
        help="pip requirement (keystone==30.0.0) or a local checkout path "
        "(default: the newest release)",
    )
    p.add_argument(
        "--server",
        choices=["uwsgi", "gunicorn", "apache", "nginx"],
        default=None,
        help="WSGI server (default uwsgi; nginx: nginx in front of uWSGI)",
    )
    _add_storage_options(p)


def _add_storage_options(p: argparse.ArgumentParser) -> None:
    """The database, its files, the cache, the nodes and the server's limits."""
    p.add_argument(
        "--db",
        choices=["sqlite", "postgresql", "mysql"],
        default=None,
        help="database backend (default sqlite)",
    )
    p.add_argument(
        "--db-url",
        default=None,
        help="server URL for postgresql/mysql; a fresh database is created there "
        "and dropped at teardown",
    )
    p.add_argument(
        "--cache",
        choices=["none", "memcached"],
        default=None,
        help="oslo.cache backend (default none)",
    )
    p.add_argument(
        "--db-storage",
        choices=["disk", "tmpfs"],
        default=None,
        help="where the database's files live: disk (default) or tmpfs (/dev/shm; "
        "postgresql gets a private server there)",
    )
    p.add_argument(
        "--nodes",
        type=int,
        default=None,
        metavar="N",
        help="N Keystone servers sharing database and keys, behind --balancer",
    )
    p.add_argument(
        "--balancer",
        choices=["haproxy"],
        default=None,
        help="load balancer in front of --nodes on the auth URL's port (default with --nodes: "
        "haproxy)",
    )
    p.add_argument(
        "--password-hash-rounds",
        type=boundary.number_in(4, 31, int),
        default=None,
        metavar="R",
        help="bcrypt rounds for new passwords (default: upstream's)",
    )
    p.add_argument(
        "--request-timeout",
        type=boundary.number_in(1, 3600, int),
        default=None,
        metavar="S",
        help="the server gives up on a worker silent this long, e.g. one that died "
        "mid-request: uWSGI's router and nginx answer 502, gunicorn and Apache restart "
        "the worker (default 35 s: above SQLite's 30 s busy timeout)",
    )
    _add_identity_options(p)
    _add_set_option(p)


def on_off(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"must be on or off, not {text!r}")
    return value == "on"


def _add_identity_options(p: argparse.ArgumentParser) -> None:
    """Where Keystone's users live: SQL, or a local LDAP directory (slapd)."""
    p.add_argument(
        "--identity",
        choices=["sql", "ldap"],
        default=None,
        help="identity backend of the load's users: sql (default), or ldap: a local slapd "
        "whose users live in a domain of their own (admin stays in SQL)",
    )
    p.add_argument(
        "--ldap-pool",
        type=on_off,
        default=None,
        metavar="on|off",
        help="Keystone's LDAP connection pools: sets use_pool and use_auth_pool "
        "(default: Keystone's, on)",
    )
    p.add_argument("--ldap-pool-size", type=int, default=None, metavar="N", help="[ldap] pool_size")
    p.add_argument(
        "--ldap-auth-pool-size", type=int, default=None, metavar="N", help="[ldap] auth_pool_size"
    )
    p.add_argument(
        "--ldap-tls",
        action="store_true",
        default=None,
        help="serve ldaps:// with a certificate made for the run",
    )
    p.add_argument("--ldap-port", type=int, default=None, help="slapd's port (default: a free one)")
    p.add_argument(
        "--ldap-users",
        type=int,
        default=None,
        metavar="N",
        help="users in the directory (default 8)",
    )


def _add_set_option(p: argparse.ArgumentParser) -> None:
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
