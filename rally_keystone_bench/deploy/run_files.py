"""Where each file of a local Keystone's run lives, in its run directory.

The run directory keeps everything: keystone.conf, the database, the key
repositories, the logs, ``admin-password`` and ``openrc`` (both mode 0600)
and ``state.json``, which lets ``keystone down`` in another process find the
pids it must stop. Only the SQLite file may live elsewhere (on tmpfs).
"""

from __future__ import annotations

import os
from pathlib import Path

from rally_keystone_bench.deploy import storage
from rally_keystone_bench.deploy.deployment import Deployment


class RunFiles:
    """The paths of one run of DEPLOYMENT in RUN_DIR, and what is read back from them."""

    def __init__(self, deployment: Deployment, run_dir: Path) -> None:
        self.deployment = deployment
        self.run_dir = run_dir

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
    def initialised_path(self) -> Path:
        """Present once keystone-manage has set this run's database and keys up."""
        return self.run_dir / ".initialised"

    @property
    def admin_password(self) -> str:
        return self.password_path.read_text().strip()

    def keystone_env(self) -> dict[str, str]:
        """The environment of every Keystone process: this run's config, none of our OS_*."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env["OS_KEYSTONE_CONFIG_FILES"] = str(self.config_path)
        env.pop("PYTHONPATH", None)
        return env

    def log_tail(self, lines: int = 20) -> str:
        """The last LINES of the server and Keystone logs, for a failed start."""
        out = []
        for path in (self.server_log_path, self.keystone_log_path):
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {path} (last {len(tail)} lines)")
                out.extend(tail)
        return "\n".join(out)
