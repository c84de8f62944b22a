"""The record of a local Keystone: where it serves, what it started, ``state.json``.

Each process is recorded (pid, boot id, start time, command line) the
moment it starts, so that an interrupt a moment later, or ``keystone down``
from another shell, finds it and signals only what this deployment started.
The ``openrc`` of its admin is written here too.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rally_keystone_bench.clients import credentials
from rally_keystone_bench.deploy import balancer as balancing
from rally_keystone_bench.deploy import databases, directory, process
from rally_keystone_bench.deploy.bootstrap import ADMIN_PROJECT, ADMIN_USER, REGION
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.files import write_private
from rally_keystone_bench.deploy.run_files import RunFiles
from rally_keystone_bench.errors import BenchError

Progress = Callable[[str], None]


class KeystoneState(RunFiles):
    """What one local Keystone in RUN_DIR started and where it serves, as ``state.json`` has it."""

    def __init__(self, deployment: Deployment | None, run_dir: Path, progress: Progress) -> None:
        super().__init__(deployment or Deployment(), run_dir)
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
        return credentials.project_admin(
            self.auth_url, ADMIN_USER, self.admin_password, ADMIN_PROJECT
        )

    def nodes(self) -> list[tuple[str, int]]:
        """(name, port) of each node behind the balancer; empty without one."""
        return list(zip(balancing.node_names(len(self.node_ports)), self.node_ports, strict=True))

    # -- the processes it started ----------------------------------------------
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

    # -- state.json and openrc ---------------------------------------------------
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
