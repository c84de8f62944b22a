"""A new run's Keystone set up by keystone-manage: schema, keys, the admin, the LDAP domain.

It runs once per run directory (until its ``.initialised`` mark is
removed); a restart keeps the database, keys and admin it made.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

from rally_keystone_bench import writer
from rally_keystone_bench.deploy import directory, fernet, files, jws, keystone_conf, process
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
    with Manage(run, venv) as manage:
        manage.run(("db_sync",), ("fernet_setup", *owner), ("credential_setup", *owner))
        _keys_and_admin(run, venv, auth_url, manage, progress)
    if run.deployment.identity == "ldap":
        create_ldap_domain(run, venv)
    writer.write_text(run.initialised_path, "")


def _keys_and_admin(
    run: RunFiles, venv: Path, auth_url: str, manage: Manage, progress: Callable[[str], None]
) -> None:
    """After the schema and the key repositories: more keys if asked, WAL, the admin."""
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
    bootstrap = (
        "bootstrap",
        "--bootstrap-username", ADMIN_USER,
        "--bootstrap-project-name", ADMIN_PROJECT,
        "--bootstrap-region-id", REGION,
        "--bootstrap-admin-url", auth_url,
        "--bootstrap-internal-url", auth_url,
        "--bootstrap-public-url", auth_url,
    )  # fmt: skip
    manage.run(bootstrap, env={"OS_BOOTSTRAP_PASSWORD": run.admin_password})


class Manage:
    """keystone-manage's commands, with Keystone imported once for all of them.

    A keystone-manage process spends about 3.7 s of CPU importing
    Keystone before its command starts (on the 2-core machines of
    doc/source/gate-ci.rst), and a new deployment needs four. One helper
    (``keystone_bench_manage.py`` in the run directory, Keystone's own
    Python) imports ``keystone.cmd.manage`` once and runs each command in a
    child forked after the imports, with the argv, ``main()`` and exit code
    of the keystone-manage script, its output in
    ``keystone-manage-COMMAND.log`` as before. The helper and its children
    share a process group of their own: if the start is interrupted, the
    group is killed and nothing of it outlives the start.
    """

    def __init__(self, run: RunFiles, venv: Path) -> None:
        self.run_files = run
        self.venv = venv
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Manage:
        run = self.run_files
        script = files.write(run.run_dir / "keystone_bench_manage.py", "keystone_bench_manage.py")
        log = writer.open_stream(run.run_dir / "keystone-manage.log")  # the imports' warnings
        try:
            self.proc = subprocess.Popen(
                [str(self.venv / "bin" / "python"), str(script), str(run.config_path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=run.keystone_env(),
                text=True,
                start_new_session=True,  # its own group, for terminate()
            )
        finally:
            log.close()
        return self

    def run(self, *commands: tuple[str, ...], env: dict[str, str] | None = None) -> None:
        """Run keystone-manage COMMANDS side by side; BenchError naming the first that failed.

        They must be independent of one another (the schema, the key
        repositories); ENV is added to their environment.
        """
        assert self.proc is not None and self.proc.stdin is not None
        assert self.proc.stdout is not None
        logs = [self.run_files.run_dir / f"keystone-manage-{args[0]}.log" for args in commands]
        pairs = zip(logs, commands, strict=True)
        request = {"commands": [[str(log), list(args)] for log, args in pairs], "env": env or {}}
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the helper died: its log says why, below
        answer = self.proc.stdout.readline()
        if not answer:
            self.proc.wait()
            helper_log = self.run_files.run_dir / "keystone-manage.log"
            raise BenchError(
                f"keystone-manage could not start (exit {self.proc.returncode}); see {helper_log}"
            )
        for args, log, rc in zip(commands, logs, json.loads(answer), strict=True):
            if rc != 0:
                raise BenchError(f"keystone-manage {args[0]} failed (exit {rc}); see {log}")

    def __exit__(self, kind: object, *rest: object) -> None:
        proc = self.proc
        if proc is None:
            return
        if kind is None:
            try:
                proc.communicate(timeout=60)  # stdin closed: no more requests, the helper exits
                return
            except subprocess.TimeoutExpired:
                pass
        process.terminate(proc.pid, timeout=5.0)  # its group: the helper and its children
        proc.communicate()


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
    with writer.open_stream(log, "w") as out:
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
