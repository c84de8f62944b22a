"""A real Keystone on loopback, as processes we start and stop by pid.

Default deployment: SQLite, Fernet tokens, uWSGI behind its HTTP router on a
free loopback port, 2 worker processes, upstream defaults for the rest.

    with LocalKeystone(Deployment(), run_dir) as ks:
        ks.auth_url, ks.admin_credentials, ks.access_log_path

This module starts it: ports, the servers, the wait until Keystone serves,
and a start retried on new ports. What to deploy is
``deployment.Deployment``; where each file lives ``run_files``; what it
started and where it serves, ``state.json``, ``keystone_state``; its
database, memcached and slapd ``keystone_backends``; keystone.conf
``keystone_conf``; keystone-manage ``bootstrap``; the readiness checks
``readiness``; stopping and teardown ``keystone_stop``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
from pathlib import Path

from rally_keystone_bench.deploy import balancer as balancing
from rally_keystone_bench.deploy import (
    bootstrap,
    conf_options,
    keystone_backends,
    keystone_conf,
    keystone_stop,
    nginx,
    ports,
    process,
    readiness,
    servers,
    tracing,
    venv,
)
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.files import write_private
from rally_keystone_bench.deploy.keystone_state import KeystoneState, Progress
from rally_keystone_bench.errors import BenchError

START_TIMEOUT = 120.0


def _quiet(_: str) -> None:
    pass


class StartCancelled(BenchError):
    """LocalKeystone.start() gave up because cancel_start() was called."""


class LocalKeystone(KeystoneState):
    """One local Keystone deployment living in RUN_DIR (its record: ``KeystoneState``)."""

    def __init__(
        self,
        deployment: Deployment | None = None,
        run_dir: Path | str = ".keystone-bench",
        progress: Progress = _quiet,
    ) -> None:
        super().__init__(deployment, Path(run_dir).resolve(), progress)
        # Set by cancel_start() from another thread: start() stops at its next step.
        self._cancelled = threading.Event()

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
        keystone_stop.stop(self, teardown)

    def restart(self) -> None:
        """Stop and start again on the same port with the same data."""
        self.stop(teardown=False)
        self.start()

    def answers(self) -> bool:
        """True when GET /v3 answers 200."""
        return readiness.answers(self.auth_url)

    # -- backends: database, memcached, slapd ---------------------------------
    def _start_backends(self) -> None:
        """Create the PostgreSQL/MySQL database (once) and start memcached (and slapd)."""
        keystone_backends.start_backends(self)

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

    # -- readiness -------------------------------------------------------------
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
