"""Rally of our own: a rally.conf and database inside one directory.

Nothing goes to Rally's default /tmp/rally.sqlite or to ~/.rally: the real
``rally`` CLI runs with ``--config-file`` pointing at our rally.conf and with
HOME set to the directory, where Rally keeps its globals file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from oslo_log import _options

from rally_keystone_bench import writer
from rally_keystone_bench.clients.credentials import DEFAULTS, from_environ, read_platform
from rally_keystone_bench.errors import BenchError

PRIVATE_UMASK = 0o077  # what Rally writes (database, logs) is its owner's only
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def rally_executable() -> str:
    """The rally CLI installed beside this Python, else the one on PATH."""
    beside = Path(sys.executable).parent / "rally"
    if beside.exists():
        return str(beside)
    found = shutil.which("rally")
    if not found:
        raise BenchError("the rally command is not installed (pip install rally)")
    return found


def keystone_spec(credentials: Mapping[str, Any], users: Sequence[Mapping[str, str]] = ()) -> dict:
    """A Rally env spec for an existing Keystone v3 with these admin credentials."""
    platform_keys = ("auth_url", "region_name", "https_cacert", "https_insecure")
    platform: dict[str, Any] = {
        "auth_url": credentials["auth_url"],
        "region_name": credentials.get("region_name") or DEFAULTS["region_name"],
        "https_insecure": bool(credentials.get("https_insecure", False)),
        "admin": {k: v for k, v in credentials.items() if k not in platform_keys},
        "api_info": {"keystone": {"version": 3, "service_type": "identity"}},
    }
    if credentials.get("https_cacert"):
        platform["https_cacert"] = credentials["https_cacert"]
    if users:
        platform["users"] = [dict(u) for u in users]
    return {"openstack": platform}


def admin_user_spec(admin: Mapping[str, Any]) -> dict:
    """A Rally env spec whose user is the ADMIN too.

    Without a user in its env, Rally's task validation makes a project and a
    user of its own for every ``rally task start`` and deletes them again:
    5 to 7 s of each probe on a 2-core machine (its log: ``Context
    users@openstack setup()`` and ``cleanup()`` under ``Task validation of
    semantic``), and a dozen admin requests in Keystone's counters. With the
    admin as the env's user, validation authenticates it once instead. Only
    for tasks whose every workload names its users context (keystone_users):
    one that names none would run as the admin.
    """
    user = {k: v for k, v in admin.items() if k != "auth_url"}
    return keystone_spec(admin, users=[user])


def spec_from_environ(environ: Mapping[str, str]) -> dict:
    """A Rally env spec from the usual OS_* variables, identity v3 set explicitly."""
    return keystone_spec(from_environ(environ))


def load_spec_file(path: str | Path) -> dict:
    """Read a Rally env spec (JSON or YAML); force identity API version 3."""
    platform = read_platform(path)
    platform.setdefault("api_info", {}).setdefault("keystone", {})["version"] = 3
    return {"openstack": platform}


def auth_url_of(spec: Mapping[str, Any]) -> str:
    return spec["openstack"]["auth_url"]


class RallyHome:
    """A directory holding rally.conf, Rally's database and its globals."""

    def __init__(self, path: str | Path) -> None:
        # Rally's database holds the env's credentials (for an existing cloud, its
        # real admin password): the directory is 0700 and Rally runs with umask 077,
        # so its database, logs and globals are 0600 from their first byte.
        self.path = Path(path).resolve()
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.path, 0o700)
        self.config_path = self.path / "rally.conf"
        # Names of the envs this home can hold: none in a database made here
        # (None: an existing database, whose envs only Rally knows).
        self._envs: set[str] | None = None
        if not self.config_path.exists():
            writer.write_private(
                self.config_path,
                "[DEFAULT]\n"
                f"log_file = {self.path / 'rally.log'}\n"
                "\n[database]\n"
                f"connection = sqlite:///{self.path / 'rally.sqlite'}\n",
            )
            self.rally("db", "ensure")
            self._envs = set()
        for name in ("rally.sqlite", "rally.log"):
            if (self.path / name).exists():
                os.chmod(self.path / name, 0o600)

    def quiet_config(self) -> Path:
        """rally.conf, plus Rally's two log lines per iteration silenced.

        For the load generator at high rates: in one profile, each
        iteration's ITER START and END lines took about 13 % of its CPU, and
        more to whoever reads stderr. The ``pooled_rps`` runner logs its own counts once a second.
        Same database and log file as rally.conf.
        """
        levels = [*_options.DEFAULT_LOG_LEVELS, "rally.task.runner=WARN"]
        path = self.path / "rally-quiet.conf"
        text = self.config_path.read_text().replace(
            "[DEFAULT]\n", f"[DEFAULT]\ndefault_log_levels = {','.join(levels)}\n", 1
        )
        writer.write_private(path, text)  # in Rally's home: its owner's only
        return path

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "RALLY_"))}
        env["HOME"] = str(self.path)
        return env

    def rally(
        self,
        *args: str,
        check: bool = True,
        capture: bool = True,
        timeout: float | None = None,
        config: Path | None = None,
    ) -> subprocess.CompletedProcess:
        """Run the real rally CLI with our config; raise BenchError on failure when CHECK."""
        cmd = [rally_executable(), "--config-file", str(config or self.config_path), *args]
        proc = subprocess.run(
            cmd,
            env=self.environ(),
            cwd=self.path,
            text=True,
            capture_output=capture,
            timeout=timeout,
            umask=PRIVATE_UMASK,
        )
        if check and proc.returncode != 0:
            raise BenchError(f"rally {' '.join(args[:2])} failed: {last_line(proc)}")
        return proc

    def create_env(self, name: str, spec: Mapping[str, Any]) -> str:
        """Create (or replace) env NAME from SPEC and return its uuid."""
        spec_path = self.path / f"{name}.spec.json"
        writer.write_json(spec_path, spec, indent=None, newline=False, private=True)
        # A database made by this object holds only the envs it created: asking
        # Rally (a process and its imports, about 2 s) is needed only otherwise.
        if self._envs is None or name in self._envs:
            existing = self.rally("env", "show", "--env", name, "--only-spec", check=False)
            if existing.returncode == 0:
                self.rally("env", "destroy", "--env", name, "--skip-cleanup", check=False)
                self.rally("env", "delete", "--env", name, "--force", check=False)
        proc = self.rally("env", "create", "--name", name, "--spec", str(spec_path), "--no-use")
        found = UUID_RE.search(proc.stdout)
        if not found:
            raise BenchError(f"rally env create printed no uuid for {name}")
        if self._envs is not None:
            self._envs.add(name)
        return found.group(0)

    def check_env(self, env: str) -> None:
        """Run ``rally env check``; BenchError naming the auth URL when it fails."""
        proc = self.rally("env", "check", "--env", env, check=False)
        if proc.returncode != 0:
            raise BenchError(f"rally env check failed for env {env}: {last_line(proc)}")


def task_report(
    home: RallyHome | None, uuid: str, out: str | Path, *, html: bool = False
) -> subprocess.CompletedProcess:
    """``rally task report`` of task UUID into OUT: Rally's JSON, or with HTML its static page.

    The one place that runs it: in HOME (a Rally home of ours), else with the
    rally command's own configuration. The caller reads the exit code.
    """
    args = ("task", "report", uuid, "--html-static" if html else "--json", "--out", str(out))
    if home is not None:
        return home.rally(*args, check=False)
    return subprocess.run([rally_executable(), *args], capture_output=True, text=True)


def last_line(proc: subprocess.CompletedProcess) -> str:
    """The last meaningful line Rally printed, for a one-line error."""
    text = (proc.stderr or "") + "\n" + (proc.stdout or "")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if not ln.startswith(("+", "|", "-", "Traceback", "WARNING")):
            return ln[:300]
    return f"exit code {proc.returncode}"
