"""What to deploy: every knob of a local Keystone, checked before anything starts.

A ``Deployment`` comes from a deployment file, CLI options or KEY=VALUE
pairs (``from_mapping``) and is frozen once made: a variant of one is
``dataclasses.replace``. ``validate`` refuses a setting that cannot work in
one line, and ``describe`` names the deployment in reports. A new knob is a
field here and a line of the template that uses it (``deploy/templates/``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rally_keystone_bench.deploy import (
    balancer as balancing,
)
from rally_keystone_bench.deploy import (
    conf_options,
    databases,
    directory,
    gitref,
    limits,
    memcached,
    nginx,
    process,
    storage,
    venv,
)
from rally_keystone_bench.errors import BenchError

SERVERS = ("uwsgi", "gunicorn", "apache", "nginx")
DATABASES = ("sqlite", "postgresql", "mysql")
CACHES = ("none", "memcached")
IDENTITIES = ("sql", "ldap")
# Keystone's LDAP driver and its connection pools, in Keystone's environment.
# ldappool imports six without declaring it.
LDAP_PACKAGES = ("python-ldap", "ldappool", "six")


@dataclasses.dataclass(frozen=True)
class Deployment:
    """What to deploy. Every field has the upstream-default meaning when unset.

    Frozen: what a run deploys is what it was given at the door (conf too, though a
    dict: nobody changes it in place)."""

    keystone: str = venv.DEFAULT_SPEC
    workers: int = 2
    threads: int = 1
    server: str = "uwsgi"
    db: str = "sqlite"
    db_url: str | None = None
    cache: str = "none"
    password_hash_rounds: int | None = None
    port: int | None = None
    # identity: sql, or ldap (a local slapd; its users in a domain of their own)
    identity: str = "sql"
    ldap_pool: bool | None = None  # use_pool and use_auth_pool; None: Keystone's default
    ldap_pool_size: int | None = None
    ldap_auth_pool_size: int | None = None
    ldap_tls: bool = False
    ldap_port: int | None = None
    ldap_users: int = 8
    nodes: int | None = None  # N Keystone servers behind the balancer; None: one, no balancer
    balancer: str | None = None  # haproxy (the default once nodes is set)
    db_storage: str = "disk"  # disk, or tmpfs (/dev/shm): where the database's files live
    # uWSGI's HTTP router gives up on a silent worker after this many seconds (a
    # 502), so a request whose worker died answers sooner than uWSGI's 60 s. It
    # stays above the SQLite default's 30 s busy timeout, so that a writer that
    # waits out a held lock still answers its own 500 (test_keepalive).
    request_timeout: int = 35
    # OSprofiler on, SQL traced, for requests signed with the run's key (deploy/tracing.py)
    trace: bool = False
    # keystone.conf settings over the rendered ones: {"section.option": "value"} (--set, conf:)
    conf: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        # An on/off field given as a word ("on", "no") when built directly: as a bool.
        for name, what in (("ldap_pool", "--ldap-pool"), ("ldap_tls", "--ldap-tls")):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, _on_off(value, what))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str) -> Deployment:
        """A Deployment from KEY: VALUE pairs (a deployment file, CLI options, KEY=VALUE).

        Unset keys keep their defaults. WHERE names the source in the
        BenchError for an unknown key or a bad value.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        defaults = cls()
        given: dict[str, Any] = {}
        for key, value in values.items():
            name = str(key).replace("-", "_")
            if name not in fields:
                known = ", ".join(sorted(fields))
                raise BenchError(f"{where}: unknown key {key!r} (known: {known})")
            default = getattr(defaults, name)
            if value is None and default is not None:
                raise BenchError(f"{where}: {key} needs a value (default {default})")
            if value is not None:
                given[name] = _field_value(str(fields[name].type), value, f"{where}: {key}")
        return cls(**given)

    def validate(self) -> None:
        """Raise BenchError on a setting that cannot work, before anything starts."""
        venv.check_spec(self.keystone)
        if self.server not in SERVERS:
            raise BenchError(f"server must be one of {', '.join(SERVERS)}, not {self.server!r}")
        if self.db not in DATABASES:
            raise BenchError(f"db must be one of {', '.join(DATABASES)}, not {self.db!r}")
        if self.cache not in CACHES:
            raise BenchError(f"cache must be one of {', '.join(CACHES)}, not {self.cache!r}")
        if self.workers < 1:
            raise BenchError(f"workers must be at least 1, not {self.workers}")
        if not 1 <= self.request_timeout <= 3600:
            raise BenchError(f"request timeout must be 1-3600 s, not {self.request_timeout}")
        if self.threads < 1:
            raise BenchError(f"threads must be at least 1, not {self.threads}")
        if self.password_hash_rounds is not None and not 4 <= self.password_hash_rounds <= 31:
            raise BenchError(
                f"password hash rounds must be 4-31 (bcrypt), not {self.password_hash_rounds}"
            )
        if self.port is not None:
            process.ensure_port_free(self.port)
        if self.db != "sqlite":
            databases.check_reachable(self.db, databases.server_url(self.db, self.db_url))
        elif self.db_url:
            raise BenchError("--db-url needs --db postgresql or --db mysql")
        if self.cache == "memcached":
            memcached.executable()
        if self.server == "nginx":
            nginx.executable()
        balancing.check(self.nodes, self.balancer, self.db)
        limits.check_size(self.nodes, self.workers)
        storage.check(self.db_storage, self.db, self.db_url)
        self._validate_identity()

    def _validate_identity(self) -> None:
        if self.identity not in IDENTITIES:
            raise BenchError(
                f"identity must be one of {', '.join(IDENTITIES)}, not {self.identity!r}"
            )
        ldap_only = {
            "--ldap-pool": self.ldap_pool is not None,
            "--ldap-pool-size": self.ldap_pool_size is not None,
            "--ldap-auth-pool-size": self.ldap_auth_pool_size is not None,
            "--ldap-tls": bool(self.ldap_tls),
            "--ldap-port": self.ldap_port is not None,
            "--ldap-users": self.ldap_users != Deployment.ldap_users,
        }
        if self.identity != "ldap":
            given = [flag for flag, is_set in ldap_only.items() if is_set]
            if given:
                raise BenchError(f"{given[0]} needs --identity ldap")
            return
        for name in ("ldap_pool_size", "ldap_auth_pool_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                flag = "--" + name.replace("_", "-")
                raise BenchError(f"{flag} must be at least 1, not {value}")
        if self.ldap_users < 1:
            raise BenchError(f"--ldap-users must be at least 1, not {self.ldap_users}")
        directory.check_installed(bool(self.ldap_tls))
        if self.ldap_port is not None:
            if self.ldap_port == self.port:
                raise BenchError(f"--ldap-port {self.ldap_port} is Keystone's --port too")
            process.ensure_port_free(self.ldap_port)

    def ldap_settings(self) -> str:
        """The LDAP part of describe(): pools, sizes, TLS."""
        if self.identity != "ldap":
            return ""
        pool = {None: "default", True: "on", False: "off"}[self.ldap_pool]
        parts = [f"ldap{'s' if self.ldap_tls else ''}", f"pool={pool}"]
        if self.ldap_pool_size is not None:
            parts.append(f"pool_size={self.ldap_pool_size}")
        if self.ldap_auth_pool_size is not None:
            parts.append(f"auth_pool_size={self.ldap_auth_pool_size}")
        return " ".join(parts)

    def storage_device(self) -> str:
        """``tmpfs``, or the disk's device as lsblk describes it (rotational or not)."""
        if self.db_storage == "tmpfs":
            return "tmpfs"
        where = {"postgresql": "/var/lib/postgresql", "mysql": "/var/lib/mysql"}.get(self.db, ".")
        return storage.device_of(Path(where) if Path(where).exists() else Path("."))

    def describe(self) -> str:
        keystone = gitref.label(self.keystone)
        parts = [keystone, self.server, f"{self.workers}x{self.threads}", self.db]
        if self.cache != "none":
            parts.append(self.cache)
        if self.password_hash_rounds:
            parts.append(f"rounds={self.password_hash_rounds}")
        if self.trace:
            parts.append("traced")
        if self.identity == "ldap":
            parts.append(self.ldap_settings())
        if self.nodes is not None:
            parts.append(f"{self.nodes} nodes behind {self.balancer or 'haproxy'}")
        parts.append(f"db on {self.storage_device()}")
        if self.conf:
            parts.append(conf_options.describe(self.conf))
        return " ".join(parts)

    def extra_packages(self) -> tuple[str, ...]:
        """What Keystone's environment needs beyond Keystone for this deployment."""
        extras: list[str] = []
        if self.server == "gunicorn":
            extras.append("gunicorn")
        if self.server == "apache":
            extras.append("mod_wsgi")
        if self.db == "postgresql":
            extras.append("psycopg2-binary")
        if self.db == "mysql":
            extras.append("PyMySQL")
        if self.cache == "memcached":
            extras.append("pymemcache")
        if self.identity == "ldap":
            extras.extend(LDAP_PACKAGES)
        return tuple(extras)


def _on_off(value: Any, what: str = "--ldap-pool") -> bool:
    """VALUE as on/off: true, "on", "yes" or their opposites."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("on", "true", "yes", "1"):
        return True
    if text in ("off", "false", "no", "0"):
        return False
    raise BenchError(f"{what} must be on or off, not {value!r}")


def _field_value(kind: str, value: Any, what: str) -> Any:
    """VALUE as the type a Deployment field is annotated with (int, bool or str).

    An integer is 3 or "3", never 2.9, true or "two"; a word is never a
    mapping, a list or a boolean.
    """
    if kind.startswith("bool"):
        return _on_off(value, what)
    if kind.startswith("dict"):
        return conf_options.normalise(value, what)
    if kind.startswith("int"):
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise BenchError(f"{what} must be an integer, not {value!r}")
        try:
            return int(value)
        except (TypeError, ValueError, OverflowError):
            raise BenchError(f"{what} must be an integer, not {value!r}") from None
    if isinstance(value, dict | list | bool):
        raise BenchError(f"{what} must be a word, not {value!r}")
    return str(value)
