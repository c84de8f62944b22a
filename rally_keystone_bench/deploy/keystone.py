"""A real Keystone on loopback, as processes we start and stop by pid.

Default deployment: SQLite, Fernet tokens, uWSGI behind its HTTP router on a
free loopback port, 2 worker processes, upstream defaults for the rest.

    with LocalKeystone(Deployment(), run_dir) as ks:
        ks.auth_url, ks.admin_credentials, ks.access_log_path

This module is process control: ports, backends, the servers, the wait
until Keystone serves, stop by pid and ``state.json``. What to deploy is
``deployment.Deployment``; where each file lives ``run_files``; keystone.conf
``keystone_conf``; keystone-manage ``bootstrap``; the readiness checks
``readiness``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rally_keystone_bench.clients import credentials
from rally_keystone_bench.deploy import (
    balancer as balancing,
)
from rally_keystone_bench.deploy import (
    bootstrap,
    conf_options,
    databases,
    directory,
    keystone_conf,
    memcached,
    nginx,
    ports,
    process,
    readiness,
    servers,
    shared_view,
    storage,
    tracing,
    venv,
)
from rally_keystone_bench.deploy.bootstrap import ADMIN_PROJECT, ADMIN_USER, REGION
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.files import write_private
from rally_keystone_bench.deploy.run_files import RunFiles
from rally_keystone_bench.errors import BenchError

START_TIMEOUT = 120.0

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


class StartCancelled(BenchError):
    """LocalKeystone.start() gave up because cancel_start() was called."""


class LocalKeystone(RunFiles):
    """One local Keystone deployment living in RUN_DIR (its files: ``RunFiles``)."""

    def __init__(
        self,
        deployment: Deployment | None = None,
        run_dir: Path | str = ".keystone-bench",
        progress: Progress = _quiet,
    ) -> None:
        super().__init__(deployment or Deployment(), Path(run_dir).resolve())
        # Without a deployment (keystone down/status), the run's own is read from its state.
        self._deployment_given = deployment is not None
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

    # -- paths and credentials ---------------------------------------------
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
        # A SPEC that does not install, a --set it refuses: before the run directory exists.
        self.venv = venv.ensure_keystone_env(
            dep.keystone, extras=dep.extra_packages(), progress=self.progress
        )
        if dep.conf:  # checked against this Keystone's own options before anything starts
            fresh = venv.is_local_checkout(dep.keystone)
            conf_options.check(dep.conf, conf_options.registry_of(self.venv, fresh=fresh))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.run_dir, 0o700)  # keys, database, config: its owner's only
        self._load_state()
        self._pick_ports()
        if self.pids:
            raise BenchError(f"a Keystone from {self.run_dir} is already running: stop it first")
        # A retry's stop() removes the trace key; the next attempt writes the same one back,
        # or a key shared with other deployments (the gate's) would no longer match ours.
        trace_key = tracing.read_key(self.run_dir) if dep.trace else None
        for attempt in range(1, ports.ATTEMPTS + 1):
            marks = ports.log_marks(self.run_dir)
            try:
                self._check_cancelled()
                self._start_backends()
                if dep.trace:
                    tracing.prepare(self.run_dir, trace_key)
                    trace_key = tracing.read_key(self.run_dir)
                if not self.initialised_path.exists():
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
                shared_view.remove(run_dir)
        if teardown:
            tracing.remove(self.run_dir, self.config_path)
        found = self.ldap_directory
        if teardown and found is not None:
            found.remove_data()
            self.initialised_path.unlink(missing_ok=True)
        if teardown and self.deployment.db_storage == "tmpfs":
            # A private server's data, or the SQLite file: all of it goes.
            storage.remove(self.run_dir)
            self.progress(f"removed {storage.tmpfs_dir(self.run_dir)}")
            self.database = None
            self.initialised_path.unlink(missing_ok=True)
        if teardown and self.database is not None and self.venv is not None:
            databases.drop(self.venv, self.database)
            self.progress(f"dropped database {self.database.name}")
            self.database = None
            self.initialised_path.unlink(missing_ok=True)
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
        return readiness.answers(self.auth_url)

    # -- backends: database, memcached, slapd ---------------------------------
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

    # -- config and keystone-manage (keystone_conf, bootstrap) -----------------
    def _render_config(self) -> str:
        return keystone_conf.render(
            self, keystone_conf.database_url(self, self.database), self.memcached_port
        )

    def _initialise(self) -> None:
        assert self.venv is not None
        config = self._render_config()
        bootstrap.initialise(self, self.venv, config, self.auth_url, self.progress)

    def _write_domain_config(self) -> None:
        keystone_conf.write_domain_config(self, self.ldap_directory)

    # -- servers -------------------------------------------------------------
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
                    process.spawn,
                    argv,
                    site.server_log_path,
                    env=self.keystone_env(),
                    cwd=site.run_dir,
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
            lambda: process.spawn(
                argv, self.server_log_path, env=self.keystone_env(), cwd=self.run_dir
            ),
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
            # The record (boot id, start time, command line) too: without it a
            # stop refuses to signal the pid, and a SIGTERM here left it running.
            self._write_state()

    # -- readiness and state.json ---------------------------------------------
    def _wait_ready(self) -> None:
        """Wait until /v3 answers and the admin can get a token."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            self._check_cancelled()
            if not all(process.is_alive(p) for p in self.pids.values()):
                raise BenchError(f"Keystone exited during start; see {self.server_log_path}")
            if self._serves():
                return
            time.sleep(0.3)
        raise BenchError(
            f"Keystone did not answer within {START_TIMEOUT:.0f} s; see {self.server_log_path}"
        )

    def _serves(self) -> bool:
        """Each node is UP behind the balancer, /v3 answers and the admin gets a token."""
        return (
            readiness.nodes_up(self.port, self.nodes())
            and self.answers()
            and readiness.admin_token_status(self.auth_url, self.admin_password) == 201
        )

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
