"""A real Keystone on loopback, as processes we start and stop by pid.

Default deployment: SQLite, Fernet tokens, uWSGI behind its HTTP router on a
free loopback port, 2 worker processes, upstream defaults for the rest.

    with LocalKeystone(Deployment(), run_dir) as ks:
        ks.auth_url, ks.admin_credentials, ks.access_log_path

The run directory keeps everything: keystone.conf, the database, the key
repositories, the logs, ``admin-password`` and ``openrc`` (both mode 0600)
and ``state.json``, which lets ``keystone down`` in another process find the
pids it must stop.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import secrets
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rally_keystone_bench.clients import credentials
from rally_keystone_bench.clients.auth import UserAuth, auth_request_body
from rally_keystone_bench.deploy import (
    balancer as balancing,
)
from rally_keystone_bench.deploy import (
    conf_options,
    databases,
    directory,
    fernet,
    files,
    gitref,
    jws,
    limits,
    memcached,
    nginx,
    ports,
    process,
    servers,
    storage,
    tracing,
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

ADMIN_USER = "admin"
ADMIN_PROJECT = "admin"
REGION = "RegionOne"
START_TIMEOUT = 120.0

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclasses.dataclass
class Deployment:
    """What to deploy. Every field has the upstream-default meaning when unset."""

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

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str) -> Deployment:
        """A Deployment from KEY: VALUE pairs (a deployment file, CLI options, KEY=VALUE).

        Unset keys keep their defaults. WHERE names the source in the
        BenchError for an unknown key or a bad value.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        dep = cls()
        for key, value in values.items():
            name = str(key).replace("-", "_")
            if name not in fields:
                known = ", ".join(sorted(fields))
                raise BenchError(f"{where}: unknown key {key!r} (known: {known})")
            default = getattr(dep, name)
            if value is None and default is not None:
                raise BenchError(f"{where}: {key} needs a value (default {default})")
            if value is not None:
                setattr(dep, name, _field_value(str(fields[name].type), value, f"{where}: {key}"))
        return dep

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
        if isinstance(self.ldap_pool, str):
            self.ldap_pool = _on_off(self.ldap_pool)
        if isinstance(self.ldap_tls, str):
            self.ldap_tls = _on_off(self.ldap_tls, "--ldap-tls")
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


def read_password(path: Path) -> str:
    return path.read_text().strip()


class StartCancelled(BenchError):
    """LocalKeystone.start() gave up because cancel_start() was called."""


def write_private(path: Path, text: str) -> None:
    """Write TEXT to PATH readable by its owner only (0600) from the first byte.

    Through a temporary file renamed over PATH: a kill mid-write leaves the
    old file whole (state.json must never be half a record).
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


class LocalKeystone:
    """One local Keystone deployment living in RUN_DIR."""

    def __init__(
        self,
        deployment: Deployment | None = None,
        run_dir: Path | str = ".keystone-bench",
        progress: Progress = _quiet,
    ) -> None:
        self.deployment = deployment or Deployment()
        # Without a deployment (keystone down/status), the run's own is read from its state.
        self._deployment_given = deployment is not None
        self.run_dir = Path(run_dir).resolve()
        self.progress = progress
        self.port: int | None = self.deployment.port
        self.pids: dict[str, int] = {}
        self.processes: dict[str, dict] = {}  # name -> process.identity() when started
        self._spawned: dict[str, int] = {}  # name -> pid spawned by this object
        self.venv: Path | None = None
        self.database: databases.Database | None = None  # dropped at teardown
        self.memcached_port: int | None = None
        self.ldap_port: int | None = self.deployment.ldap_port
        self.node_ports: list[int] = []  # with nodes: each node's own port
        self.private_db_port: int | None = None  # --db-storage tmpfs: our own PostgreSQL
        # Set by cancel_start() from another thread: start() stops at its next step.
        self._cancelled = threading.Event()

    # -- paths -------------------------------------------------------------
    @property
    def sqlite_path(self) -> Path:
        """The SQLite database file: in the run directory, or on tmpfs."""
        if self.deployment.db_storage == "tmpfs":
            return storage.tmpfs_dir(self.run_dir) / "keystone.db"
        return self.run_dir / "keystone.db"

    @property
    def config_path(self) -> Path:
        return self.run_dir / "keystone.conf"

    @property
    def keystone_log_path(self) -> Path:
        return self.run_dir / "keystone.log"

    @property
    def server_log_path(self) -> Path:
        return self.run_dir / "server.log"

    @property
    def access_log_path(self) -> Path:
        """One line per HTTP request: epoch ms, method, path, status, server microseconds, pid."""
        return self.run_dir / "access.log"

    @property
    def openrc_path(self) -> Path:
        return self.run_dir / "openrc"

    @property
    def password_path(self) -> Path:
        return self.run_dir / "admin-password"

    @property
    def state_path(self) -> Path:
        return self.run_dir / "state.json"

    @property
    def domain_config_dir(self) -> Path:
        return self.run_dir / "domains"

    @property
    def ldap_directory(self) -> directory.Directory | None:
        """The run's LDAP directory (identity ldap), in RUN_DIR/ldap."""
        if self.deployment.identity != "ldap" or self.ldap_port is None:
            return None
        dep = self.deployment
        return directory.Directory(
            self.run_dir / "ldap", self.ldap_port, tls=bool(dep.ldap_tls), users=dep.ldap_users
        )

    @property
    def directory_users_path(self) -> Path | None:
        """Names and passwords of the LDAP domain's users (0600), or None with SQL identity."""
        found = self.ldap_directory
        return found.users_path if found is not None else None

    @property
    def auth_url(self) -> str:
        if self.port is None:
            raise BenchError("Keystone has no port yet: start it first")
        return f"http://127.0.0.1:{self.port}/v3"

    @property
    def admin_password(self) -> str:
        return read_password(self.password_path)

    @property
    def admin_credentials(self) -> dict[str, str]:
        return {
            "auth_url": self.auth_url,
            "username": ADMIN_USER,
            "password": self.admin_password,
            "project_name": ADMIN_PROJECT,
            "user_domain_name": "Default",
            "project_domain_name": "Default",
        }

    # -- lifecycle ---------------------------------------------------------
    def __enter__(self) -> LocalKeystone:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Install (once), configure, initialise and start Keystone; wait until it serves.

        Starting again after ``stop`` keeps the same port, database and keys.
        """
        dep = self.deployment
        dep.validate()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.run_dir, 0o700)  # keys, database, config: its owner's only
        self._load_state()
        self._pick_ports()
        if self.pids:
            raise BenchError(f"a Keystone from {self.run_dir} is already running: stop it first")
        self.venv = venv.ensure_keystone_env(
            dep.keystone, extras=self._extra_packages(), progress=self.progress
        )
        if dep.conf:  # checked against this Keystone's own options before anything starts
            fresh = venv.is_local_checkout(dep.keystone)
            conf_options.check(dep.conf, conf_options.registry_of(self.venv, fresh=fresh))
        for attempt in range(1, ports.ATTEMPTS + 1):
            marks = ports.log_marks(self.run_dir)
            try:
                self._check_cancelled()
                self._start_backends()
                if dep.trace:
                    tracing.prepare(self.run_dir)
                if not (self.run_dir / ".initialised").exists():
                    self._initialise()
                elif dep.trace:
                    write_private(self.config_path, self._render_config())
                self._check_cancelled()
                self._start_server()
                self._write_state()
                self._wait_ready()
                break
            except BenchError:
                self.stop()
                taken = ports.bind_failure_since(self.run_dir, marks)
                if taken is None or attempt == ports.ATTEMPTS:
                    raise
                self.progress(
                    f"a port was taken between its pick and its bind (see {taken}): "
                    f"starting again on new ports ({attempt + 1} of {ports.ATTEMPTS})"
                )
                self._pick_ports(again=True)
            except BaseException:
                self.stop()
                raise
        self._write_openrc()

    def _pick_ports(self, again: bool = False) -> None:
        """A free port for every server whose port was not given (AGAIN: new ones)."""
        dep = self.deployment
        if again:
            self.port = dep.port
            self.node_ports = []
            self.memcached_port = None
            self.ldap_port = dep.ldap_port
            self.private_db_port = None
        if self.port is None:
            self.port = process.find_free_port()
        if dep.nodes is not None and len(self.node_ports) != dep.nodes:
            self.node_ports = []
            while len(self.node_ports) < dep.nodes:
                free = process.find_free_port()
                if free != self.port and free not in self.node_ports:
                    self.node_ports.append(free)

    def cancel_start(self) -> None:
        """Make a start() running in another thread give up at its next step.

        It then stops what it started itself and raises BenchError; join its
        thread before stop(), or a process it spawns meanwhile would outlive
        the stop.
        """
        self._cancelled.set()

    def _check_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise StartCancelled("Keystone's start was cancelled")

    def stop(self, teardown: bool = True) -> None:
        """Stop every process this deployment started; keep the logs.

        With ``teardown`` (the default) the deployment is gone for good: its
        PostgreSQL/MySQL database is dropped too. ``restart`` keeps it.
        """
        self._load_state()
        # What this object spawned itself and a signal kept out of state.json.
        for name, pid in self._spawned.items():
            if self.pids.get(name) != pid and process.is_alive(pid):
                self.pids[name] = pid
                self.processes[name] = process.identity(pid) or {}
        self._spawned = {}
        for name, pid in sorted(self.pids.items()):
            recorded = self.processes.get(name)
            if recorded is None or recorded.get("pid") != pid or not process.is_complete(recorded):
                if process.is_alive(pid):
                    self.progress(
                        f"{name}: pid {pid} has no full record (boot id, start time, command "
                        "line), so it may not be the process this deployment started: "
                        "not signalled"
                    )
                continue
            if not process.is_same_process(recorded):
                if process.is_alive(pid):
                    self.progress(
                        f"{name}: pid {pid} is no longer the process this deployment "
                        "started (another start time or command): not signalled"
                    )
                continue
            process.terminate(pid)
        self.pids = {}
        self.processes = {}
        if self.deployment.server == "apache":
            for run_dir in [self.run_dir, *(self.run_dir / name for name, _ in self.nodes())]:
                servers.remove_wsgi_socket_dir(run_dir)
        if teardown:
            tracing.remove(self.run_dir, self.config_path)
        found = self.ldap_directory
        if teardown and found is not None:
            found.remove_data()
            (self.run_dir / ".initialised").unlink(missing_ok=True)
        if teardown and self.deployment.db_storage == "tmpfs":
            # A private server's data, or the SQLite file: all of it goes.
            storage.remove(self.run_dir)
            self.progress(f"removed {storage.tmpfs_dir(self.run_dir)}")
            self.database = None
            (self.run_dir / ".initialised").unlink(missing_ok=True)
        if teardown and self.database is not None and self.venv is not None:
            databases.drop(self.venv, self.database)
            self.progress(f"dropped database {self.database.name}")
            self.database = None
            (self.run_dir / ".initialised").unlink(missing_ok=True)
        if self.state_path.exists():
            self._write_state()

    def restart(self) -> None:
        """Stop and start again on the same port with the same data."""
        self.stop(teardown=False)
        self.start()

    def is_running(self) -> bool:
        self._load_state()
        return bool(self.pids) and all(self._is_ours(n, p) for n, p in self.pids.items())

    def _is_ours(self, name: str, pid: int) -> bool:
        recorded = self.processes.get(name)
        return (
            recorded is not None
            and recorded.get("pid") == pid
            and (process.is_same_process(recorded))
        )

    def answers(self) -> bool:
        """True when GET /v3 answers 200."""
        return _answers(self.auth_url)

    # -- internals ---------------------------------------------------------
    def _extra_packages(self) -> tuple[str, ...]:
        extras: list[str] = []
        if self.deployment.server == "gunicorn":
            extras.append("gunicorn")
        if self.deployment.server == "apache":
            extras.append("mod_wsgi")
        if self.deployment.db == "postgresql":
            extras.append("psycopg2-binary")
        if self.deployment.db == "mysql":
            extras.append("PyMySQL")
        if self.deployment.cache == "memcached":
            extras.append("pymemcache")
        if self.deployment.identity == "ldap":
            extras.extend(LDAP_PACKAGES)
        return tuple(extras)

    def _bin(self, name: str) -> str:
        assert self.venv is not None
        return str(self.venv / "bin" / name)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env["OS_KEYSTONE_CONFIG_FILES"] = str(self.config_path)
        env.pop("PYTHONPATH", None)
        return env

    def _database_url(self) -> str:
        if self.deployment.db == "sqlite":
            # A busy timeout makes writers wait for each other instead of
            # failing at once with "database is locked".
            return f"sqlite:///{self.sqlite_path}?timeout=30"
        if self.database is None:
            raise BenchError(f"no {self.deployment.db} database was created")
        return self.database.keystone_url

    def _start_backends(self) -> None:
        """Create the PostgreSQL/MySQL database (once) and start memcached."""
        dep = self.deployment
        assert self.venv is not None
        if dep.db == "sqlite" and dep.db_storage == "tmpfs":
            self.sqlite_path.parent.mkdir(mode=0o700, exist_ok=True)
        db_url = dep.db_url
        if dep.db == "postgresql" and dep.db_storage == "tmpfs":
            db_url = self._start_private_postgres()
        if dep.db != "sqlite" and self.database is None:
            url = databases.server_url(dep.db, db_url)
            self.database = databases.create(self.venv, dep.db, url)
            self.progress(f"created {dep.db} database {self.database.name}")
            self._write_state()
        if dep.cache == "memcached":
            if self.memcached_port is None:
                self.memcached_port = process.find_free_port()
            log = self.run_dir / "memcached.log"
            self._record("memcached", lambda: memcached.start(self.memcached_port, log))
            self.progress(f"memcached started on port {self.memcached_port}")
        if dep.identity == "ldap":
            self._start_directory()

    def _start_private_postgres(self) -> str:
        """PostgreSQL of our own with its data on tmpfs; its server URL."""
        if self.private_db_port is None:
            self.private_db_port = process.find_free_port()
        log = self.run_dir / "postgresql.log"
        # Named to sort after every Keystone process: stop() ends it last.
        self._record(
            "storage-postgres",
            functools.partial(storage.start_postgres, self.run_dir, self.private_db_port, log),
        )
        self.progress(
            f"private PostgreSQL on port {self.private_db_port}, data in "
            f"{storage.pg_data_dir(self.run_dir)} (tmpfs)"
        )
        self._write_state()
        return f"postgresql://postgres@127.0.0.1:{self.private_db_port}"

    def _start_directory(self) -> None:
        """slapd on its own port, filled with the run's users before Keystone starts."""
        if self.ldap_port is None:
            self.ldap_port = process.find_free_port()
            while self.ldap_port == self.port:
                self.ldap_port = process.find_free_port()
        found = self.ldap_directory
        assert found is not None
        if not found.prepared:
            found.prepare()
            self.progress(f"LDAP directory filled with {found.users} users in {found.run_dir}")
        self._record("slapd", found.start)
        self.progress(f"slapd started on {found.url}")
        why = found.runs_as_root_because()
        if why:
            self.progress(f"slapd runs as root: {why}")

    def _render_config(self) -> str:
        dep = self.deployment
        text = files.render(
            "keystone.conf",
            log_file=self.keystone_log_path,
            connection=self._database_url(),
            run_dir=self.run_dir,
            password_hash_rounds=dep.password_hash_rounds,
            memcached_port=self.memcached_port,
            domain_config_dir=self.domain_config_dir if dep.identity == "ldap" else None,
            profiler=tracing.config(self.run_dir) if dep.trace else None,
        )
        return conf_options.apply(text, self._conf_settings())

    def _conf_settings(self) -> dict[str, str]:
        """The deployment's --set settings, plus the JWS key repositories they need."""
        conf = self.deployment.conf
        return {**jws.repositories(self.run_dir), **conf} if jws.wanted(conf) else dict(conf)

    def _manage(self, *commands: tuple[str, ...], env: dict[str, str] | None = None) -> None:
        """Run keystone-manage COMMANDS side by side; each logs to its own file.

        They are independent (key repositories, database), and each pays
        about two seconds of imports, so running them at once shortens a start.
        """
        running = []
        for args in commands:
            log = self.run_dir / f"keystone-manage-{args[0]}.log"
            cmd = [self._bin("keystone-manage"), "--config-file", str(self.config_path), *args]
            with open(log, "a") as out:
                proc = subprocess.Popen(
                    cmd, stdout=out, stderr=subprocess.STDOUT, env=env or self._env()
                )
            running.append((args[0], log, proc))
        failed = [(name, log, proc.wait()) for name, log, proc in running]
        for name, log, rc in failed:
            if rc != 0:
                raise BenchError(f"keystone-manage {name} failed (exit {rc}); see {log}")

    def _initialise(self) -> None:
        self.progress(f"initialising Keystone in {self.run_dir}")
        write_private(self.config_path, self._render_config())
        for sub in ("fernet-keys", "credential-keys"):
            (self.run_dir / sub).mkdir(mode=0o700, exist_ok=True)
        if self.deployment.identity == "ldap":
            self.domain_config_dir.mkdir(mode=0o700, exist_ok=True)
        if not self.password_path.exists():
            write_private(self.password_path, secrets.token_urlsafe(24) + "\n")
        owner = ("--keystone-user", str(os.getuid()), "--keystone-group", str(os.getgid()))
        self._manage(("db_sync",), ("fernet_setup", *owner), ("credential_setup", *owner))
        conf = self.deployment.conf
        held = fernet.fill(self._bin("python"), self.config_path, conf, self.run_dir, self._env())
        if held is not None:
            self.progress(f"{held} active Fernet keys in {fernet.repository(conf, self.run_dir)}")
        if jws.wanted(self.deployment.conf):
            keys = self._conf_settings()
            jws.create_keypair(self._bin("keystone-manage"), self.config_path, keys, self._env())
        if self.deployment.db == "sqlite":
            _sqlite_wal(self.sqlite_path)
        # The password goes through the environment, never on a command line.
        env = self._env()
        env["OS_BOOTSTRAP_PASSWORD"] = self.admin_password
        bootstrap = (
            "bootstrap",
            "--bootstrap-username", ADMIN_USER,
            "--bootstrap-project-name", ADMIN_PROJECT,
            "--bootstrap-region-id", REGION,
            "--bootstrap-admin-url", self.auth_url,
            "--bootstrap-internal-url", self.auth_url,
            "--bootstrap-public-url", self.auth_url,
        )  # fmt: skip
        self._manage(bootstrap, env=env)
        if self.deployment.identity == "ldap":
            self._create_ldap_domain()
        (self.run_dir / ".initialised").write_text("")

    def _create_ldap_domain(self) -> None:
        """Create the LDAP domain in SQL before any Keystone worker reads the domain configs.

        Each worker reads ``domain_config_dir`` once, at its first identity
        call, and ignores a file whose domain does not exist yet; so the
        domain is made here, through Keystone's own managers as ``keystone-manage
        bootstrap`` does, before the server starts.
        """
        log = self.run_dir / "keystone-manage-create-domain.log"
        script = files.write(
            self.run_dir / "keystone_bench_create_domain.py",
            "keystone_bench_create_domain.py",
            description="Users of keystone-bench's LDAP directory (read-only)",
        )
        with open(log, "w") as out:
            argv = [self._bin("python"), str(script), str(self.config_path)]
            proc = subprocess.run(
                [*argv, directory.DOMAIN],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
            )
        if proc.returncode != 0:
            raise BenchError(f"could not create the {directory.DOMAIN} domain; see {log}")

    def _write_domain_config(self) -> None:
        """keystone.<domain>.conf (0600: it holds the directory's service password)."""
        found = self.ldap_directory
        if found is None:
            return
        dep = self.deployment
        self.domain_config_dir.mkdir(mode=0o700, exist_ok=True)
        text = directory.keystone_domain_config(
            found, dep.ldap_pool, dep.ldap_pool_size, dep.ldap_auth_pool_size
        )
        write_private(self.domain_config_dir / f"keystone.{directory.DOMAIN}.conf", text)

    def site(self) -> servers.Site:
        """What the WSGI server needs to serve this Keystone."""
        assert self.port is not None and self.venv is not None
        dep = self.deployment
        return servers.Site(
            server=dep.server,
            port=self.port,
            workers=dep.workers,
            threads=dep.threads,
            run_dir=self.run_dir,
            config_path=self.config_path,
            server_log_path=self.server_log_path,
            access_log_path=self.access_log_path,
            venv=self.venv,
            progress=self.progress,
            request_timeout=dep.request_timeout,
        )

    def nodes(self) -> list[tuple[str, int]]:
        """(name, port) of each node behind the balancer; empty without one."""
        return list(zip(balancing.node_names(len(self.node_ports)), self.node_ports, strict=True))

    def node_site(self, name: str, port: int) -> servers.Site:
        """One node: its own port, directory, server log and access log; the shared config."""
        node_dir = self.run_dir / name
        node_dir.mkdir(exist_ok=True)
        return dataclasses.replace(
            self.site(),
            port=port,
            run_dir=node_dir,
            server_log_path=node_dir / "server.log",
            access_log_path=node_dir / "access.log",
        )

    def _start_nodes(self) -> None:
        """Each node's server (and its nginx), then HAProxy on the auth URL's port."""
        assert self.port is not None
        dep = self.deployment
        if dep.server == "apache" and os.geteuid() == 0:
            # The nodes read the shared config and keys above their directories.
            whole = dataclasses.replace(self.site(), run_dir=self.run_dir)
            servers.share_with(servers.apache_user(), whole)
        for name, port in self.nodes():
            site = self.node_site(name, port)
            servers.write_hook(site.run_dir)
            argv = servers.command(site)
            self.progress(f"starting Keystone {name} ({dep.describe()}) on port {port}")
            self._record(
                f"{name}-server",
                functools.partial(
                    process.spawn, argv, site.server_log_path, env=self._env(), cwd=site.run_dir
                ),
            )
            if dep.server == "nginx":
                self._record(
                    f"{name}-nginx",
                    functools.partial(
                        process.spawn,
                        nginx.command(site),
                        site.run_dir / "nginx-error.log",
                        cwd=site.run_dir,
                    ),
                )
        argv = balancing.command(self.run_dir, self.port, self.nodes())
        self.progress(f"starting haproxy on port {self.port} in front of {len(self.node_ports)}")
        self._record(
            "haproxy",
            functools.partial(process.spawn, argv, self.run_dir / "haproxy.log", cwd=self.run_dir),
        )

    def _start_server(self) -> None:
        if self.deployment.nodes is not None:
            self._start_nodes()
            return
        # Every server imports it (SQLite's BEGIN IMMEDIATE matters to all).
        servers.write_hook(self.run_dir)
        self._write_domain_config()
        argv = servers.command(self.site())
        self.progress(f"starting Keystone ({self.deployment.describe()}) on port {self.port}")
        self._record(
            "server",
            lambda: process.spawn(argv, self.server_log_path, env=self._env(), cwd=self.run_dir),
        )
        if self.deployment.server == "nginx":
            self._record(
                "nginx",
                lambda: process.spawn(
                    nginx.command(self.site()), self.run_dir / "nginx-error.log", cwd=self.run_dir
                ),
            )

    def _record(self, name: str, start: Callable[[], int]) -> None:
        """Run START (it starts a process and returns its pid) and record it as NAME.

        No SIGINT/SIGTERM comes between the start and the record (they wait
        until both are done), and state.json has it at once: an interrupt a
        moment later, or ``keystone down`` from another shell, still finds it.
        """
        with process.signals_deferred():
            pid = start()
            self.pids[name] = pid
            self._spawned[name] = pid
        self._write_state()

    def _wait_ready(self) -> None:
        """Wait until /v3 answers and the admin can get a token."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            self._check_cancelled()
            if not all(process.is_alive(p) for p in self.pids.values()):
                raise BenchError(f"Keystone exited during start; see {self.server_log_path}")
            nodes_up = self._nodes_up()
            if nodes_up and self.answers() and self._admin_token_status() == 201:
                return
            time.sleep(0.3)
        raise BenchError(
            f"Keystone did not answer within {START_TIMEOUT:.0f} s; see {self.server_log_path}"
        )

    def _nodes_up(self) -> bool:
        """Each node answers /v3 and HAProxy counts it UP (True without nodes).

        HAProxy marks a node DOWN while it loads, and UP only at its next check
        after it answers: a run started before that check would send every
        request to the nodes that came up first.
        """
        nodes = self.nodes()
        if not nodes:
            return True
        if not all(_answers(f"http://127.0.0.1:{p}/v3") for _, p in nodes):
            return False
        assert self.port is not None
        states = balancing.node_states(self.port)
        return all(states.get(name) == "UP" for name, _ in nodes)

    def _admin_token_status(self) -> int | None:
        auth = UserAuth(
            username=ADMIN_USER, password=self.admin_password, project_name=ADMIN_PROJECT
        )
        body = json.dumps(auth_request_body(auth)).encode()
        req = urllib.request.Request(
            self.auth_url + "/auth/tokens?nocatalog",
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (OSError, urllib.error.URLError):
            return None

    def _write_openrc(self) -> None:
        creds = {**self.admin_credentials, "region_name": REGION}
        write_private(self.openrc_path, credentials.openrc_text(creds))

    def _write_state(self) -> None:
        # Each pid with its start time and command line: `down` signals only
        # the processes it started, never one that reused a pid.
        for name, pid in self.pids.items():
            if (self.processes.get(name) or {}).get("pid") != pid:
                found = process.identity(pid)
                if found is not None:
                    self.processes[name] = found
        self.processes = {n: r for n, r in self.processes.items() if n in self.pids}
        state = {
            "port": self.port,
            "pids": self.pids,
            "processes": self.processes,
            "deployment": dataclasses.asdict(self.deployment),
            "venv": str(self.venv) if self.venv else None,
            "database": self.database.as_state() if self.database else None,
            "memcached_port": self.memcached_port,
            "ldap_port": self.ldap_port,
            "node_ports": self.node_ports,
            "private_db_port": self.private_db_port,
        }
        # It holds the database server's URL (to drop the database at teardown),
        # password included: its owner's only.
        write_private(self.state_path, json.dumps(state, indent=2) + "\n")

    def _load_state(self) -> None:
        if not self.state_path.exists():
            return
        try:
            state: dict[str, Any] = json.loads(self.state_path.read_text())
            pids = {str(k): int(v) for k, v in (state.get("pids") or {}).items()}
            processes = {
                str(k): dict(v, pid=int(v["pid"]))
                for k, v in (state.get("processes") or {}).items()
            }
        except (ValueError, TypeError, AttributeError, KeyError):
            raise BenchError(
                f"{self.state_path} is corrupt, so which processes it started is unknown: "
                "stop them by hand, then delete the file"
            ) from None
        if self.port is None:
            self.port = state.get("port")
        self.pids = pids
        self.processes = processes
        if self.venv is None and state.get("venv"):
            self.venv = Path(state["venv"])
        if state.get("database"):
            self.database = databases.Database(**state["database"])
        self.memcached_port = self.memcached_port or state.get("memcached_port")
        if not self._deployment_given and isinstance(state.get("deployment"), dict):
            known = {f.name for f in dataclasses.fields(Deployment)}
            saved = {k: v for k, v in state["deployment"].items() if k in known}
            self.deployment = Deployment(**saved)
            self._deployment_given = True
        self.ldap_port = self.ldap_port or state.get("ldap_port")
        self.node_ports = self.node_ports or list(state.get("node_ports") or [])
        self.private_db_port = self.private_db_port or state.get("private_db_port")

    def log_tail(self, lines: int = 20) -> str:
        """The last LINES of the server and Keystone logs, for a failed start."""
        out = []
        for path in (self.server_log_path, self.keystone_log_path):
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {path} (last {len(tail)} lines)")
                out.extend(tail)
        return "\n".join(out)


def _answers(url: str) -> bool:
    """True when GET URL answers 200 within 5 s."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _sqlite_wal(path: Path) -> None:
    """Put the database in WAL mode: readers then never block the one writer."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
