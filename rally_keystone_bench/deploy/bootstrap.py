"""A new run's Keystone set up by keystone-manage: schema, keys, the admin, the LDAP domain.

It runs once per run directory (until its ``.initialised`` mark is
removed); a restart keeps the database, keys and admin it made.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

from rally_keystone_bench.deploy import directory, fernet, files, jws, keystone_conf
from rally_keystone_bench.deploy.run_files import RunFiles
from rally_keystone_bench.errors import BenchError

ADMIN_USER = "admin"
ADMIN_PROJECT = "admin"
REGION = "RegionOne"


def initialise(
    run: RunFiles, venv: Path, config: str, auth_url: str, progress: Callable[[str], None]
) -> None:
    """Write CONFIG, create the database schema, the keys and the admin serving AUTH_URL."""
    progress(f"initialising Keystone in {run.run_dir}")
    files.write_private(run.config_path, config)
    for sub in ("fernet-keys", "credential-keys"):
        (run.run_dir / sub).mkdir(mode=0o700, exist_ok=True)
    if run.deployment.identity == "ldap":
        run.domain_config_dir.mkdir(mode=0o700, exist_ok=True)
    if not run.password_path.exists():
        files.write_private(run.password_path, secrets.token_urlsafe(24) + "\n")
    owner = ("--keystone-user", str(os.getuid()), "--keystone-group", str(os.getgid()))
    manage(run, venv, ("db_sync",), ("fernet_setup", *owner), ("credential_setup", *owner))
    conf = run.deployment.conf
    held = fernet.fill(
        str(venv / "bin" / "python"), run.config_path, conf, run.run_dir, run.keystone_env()
    )
    if held is not None:
        progress(f"{held} active Fernet keys in {fernet.repository(conf, run.run_dir)}")
    if jws.wanted(run.deployment.conf):
        keys = keystone_conf.settings(run)
        jws.create_keypair(
            str(venv / "bin" / "keystone-manage"), run.config_path, keys, run.keystone_env()
        )
    if run.deployment.db == "sqlite":
        sqlite_wal(run.sqlite_path)
    # The password goes through the environment, never on a command line.
    env = run.keystone_env()
    env["OS_BOOTSTRAP_PASSWORD"] = run.admin_password
    bootstrap = (
        "bootstrap",
        "--bootstrap-username", ADMIN_USER,
        "--bootstrap-project-name", ADMIN_PROJECT,
        "--bootstrap-region-id", REGION,
        "--bootstrap-admin-url", auth_url,
        "--bootstrap-internal-url", auth_url,
        "--bootstrap-public-url", auth_url,
    )  # fmt: skip
    manage(run, venv, bootstrap, env=env)
    if run.deployment.identity == "ldap":
        create_ldap_domain(run, venv)
    run.initialised_path.write_text("")


def manage(
    run: RunFiles, venv: Path, *commands: tuple[str, ...], env: dict[str, str] | None = None
) -> None:
    """Run keystone-manage COMMANDS side by side; each logs to its own file.

    They are independent (key repositories, database), and each pays
    about two seconds of imports, so running them at once shortens a start.
    """
    running = []
    for args in commands:
        log = run.run_dir / f"keystone-manage-{args[0]}.log"
        cmd = [str(venv / "bin" / "keystone-manage"), "--config-file", str(run.config_path), *args]
        with open(log, "a") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env or run.keystone_env()
            )
        running.append((args[0], log, proc))
    failed = [(name, log, proc.wait()) for name, log, proc in running]
    for name, log, rc in failed:
        if rc != 0:
            raise BenchError(f"keystone-manage {name} failed (exit {rc}); see {log}")


def create_ldap_domain(run: RunFiles, venv: Path) -> None:
    """Create the LDAP domain in SQL before any Keystone worker reads the domain configs.

    Each worker reads ``domain_config_dir`` once, at its first identity
    call, and ignores a file whose domain does not exist yet; so the
    domain is made here, through Keystone's own managers as ``keystone-manage
    bootstrap`` does, before the server starts.
    """
    log = run.run_dir / "keystone-manage-create-domain.log"
    script = files.write(
        run.run_dir / "keystone_bench_create_domain.py",
        "keystone_bench_create_domain.py",
        description="Users of keystone-bench's LDAP directory (read-only)",
    )
    with open(log, "w") as out:
        argv = [str(venv / "bin" / "python"), str(script), str(run.config_path)]
        proc = subprocess.run(
            [*argv, directory.DOMAIN],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=run.keystone_env(),
        )
    if proc.returncode != 0:
        raise BenchError(f"could not create the {directory.DOMAIN} domain; see {log}")


def sqlite_wal(path: Path) -> None:
    """Put the database in WAL mode: readers then never block the one writer."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
