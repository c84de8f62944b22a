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
import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rally_keystone_bench.deploy import databases, memcached, process, servers, venv
from rally_keystone_bench.errors import BenchError

SERVERS = ("uwsgi", "gunicorn", "apache")
DATABASES = ("sqlite", "postgresql", "mysql")
CACHES = ("none", "memcached")

ADMIN_USER = "admin"
ADMIN_PROJECT = "admin"
REGION = "RegionOne"
START_TIMEOUT = 120.0

Progress = Callable[[str], None]

WSGI_HOOK_MODULE = servers.HOOK_MODULE

# Imported in each server process (uWSGI ``import =``, gunicorn's and
# mod_wsgi's generated entry points) before ``keystone.wsgi.api:application``
# is looked up; it replaces that callable in place.
_WSGI_HOOK = '''"""Keystone's WSGI application, wrapped by keystone-bench for every server.

1. An exception that escapes Keystone's WSGI stack (seen: SQLite's "database is
   locked" raised under Keystone's middleware, outside Flask's error handlers)
   makes uWSGI close the worker connection without a byte of response. The
   HTTP router, in keep-alive mode, takes that empty response for a finished
   one, keeps the client connection open and waits for the next request: the
   client hangs until http-timeout (60 s), then gets
   "Remote end closed connection without response". Here such an exception
   becomes a 500 with a Content-Length, which the router forwards at once
   (gunicorn and mod_wsgi answer 500 themselves; the wrapper changes nothing
   there but the log line).
2. SQLite: oslo.db opens every transaction with a deferred BEGIN. A reader that
   later writes while another worker holds the write lock gets "database is
   locked" at once (SQLite skips the busy timeout, it could deadlock). BEGIN
   IMMEDIATE takes the write lock first, so the busy timeout queues writers.
"""

import json
import sys

import keystone.wsgi.api
from sqlalchemy import event
from sqlalchemy.engine import Engine

_keystone = keystone.wsgi.api.application
_BODY = json.dumps(
    {
        "error": {
            "code": 500,
            "title": "Internal Server Error",
            "message": "An unexpected error prevented the server from fulfilling your request.",
        }
    }
).encode()


def application(environ, start_response):
    started = []

    def _start(status, headers, exc_info=None):
        started.append(status)
        return start_response(status, headers, exc_info)

    try:
        return _keystone(environ, _start)
    except Exception:
        if started:
            raise
        sys.excepthook(*sys.exc_info())
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(_BODY)))]
        start_response("500 Internal Server Error", headers, sys.exc_info())
        return [_BODY]


@event.listens_for(Engine, "before_cursor_execute", retval=True)
def _begin_immediate(conn, cursor, statement, parameters, context, executemany):
    if statement == "BEGIN" and conn.dialect.name == "sqlite":
        statement = "BEGIN IMMEDIATE"
    return statement, parameters


keystone.wsgi.api.application = application
'''


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

    def validate(self) -> None:
        """Raise BenchError on a setting that cannot work, before anything starts."""
        if self.server not in SERVERS:
            raise BenchError(f"server must be one of {', '.join(SERVERS)}, not {self.server!r}")
        if self.db not in DATABASES:
            raise BenchError(f"db must be one of {', '.join(DATABASES)}, not {self.db!r}")
        if self.cache not in CACHES:
            raise BenchError(f"cache must be one of {', '.join(CACHES)}, not {self.cache!r}")
        if self.workers < 1:
            raise BenchError(f"workers must be at least 1, not {self.workers}")
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

    def describe(self) -> str:
        parts = [self.keystone, self.server, f"{self.workers}x{self.threads}", self.db]
        if self.cache != "none":
            parts.append(self.cache)
        if self.password_hash_rounds:
            parts.append(f"rounds={self.password_hash_rounds}")
        return " ".join(parts)


def read_password(path: Path) -> str:
    return path.read_text().strip()


def write_private(path: Path, text: str) -> None:
    """Write TEXT to PATH readable by its owner only (0600) from the first byte."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)


class LocalKeystone:
    """One local Keystone deployment living in RUN_DIR."""

    def __init__(
        self,
        deployment: Deployment | None = None,
        run_dir: Path | str = ".keystone-bench",
        progress: Progress = _quiet,
    ) -> None:
        self.deployment = deployment or Deployment()
        self.run_dir = Path(run_dir).resolve()
        self.progress = progress
        self.port: int | None = self.deployment.port
        self.pids: dict[str, int] = {}
        self.venv: Path | None = None
        self.database: databases.Database | None = None  # dropped at teardown
        self.memcached_port: int | None = None

    # -- paths -------------------------------------------------------------
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
        self._load_state()
        if self.port is None:
            self.port = process.find_free_port()
        elif self.pids:
            raise BenchError(f"a Keystone from {self.run_dir} is already running: stop it first")
        self.venv = venv.ensure_keystone_env(
            dep.keystone, extras=self._extra_packages(), progress=self.progress
        )
        try:
            self._start_backends()
            if not (self.run_dir / ".initialised").exists():
                self._initialise()
            self._start_server()
            self._write_state()
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self._write_openrc()

    def stop(self, teardown: bool = True) -> None:
        """Stop every process this deployment started; keep the logs.

        With ``teardown`` (the default) the deployment is gone for good: its
        PostgreSQL/MySQL database is dropped too. ``restart`` keeps it.
        """
        self._load_state()
        for _name, pid in sorted(self.pids.items()):
            process.terminate(pid)
        self.pids = {}
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
        return bool(self.pids) and all(process.is_alive(p) for p in self.pids.values())

    def answers(self) -> bool:
        """True when GET /v3 answers 200."""
        try:
            with urllib.request.urlopen(self.auth_url, timeout=5) as resp:
                return resp.status == 200
        except (OSError, urllib.error.URLError):
            return False

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
            return f"sqlite:///{self.run_dir / 'keystone.db'}?timeout=30"
        if self.database is None:
            raise BenchError(f"no {self.deployment.db} database was created")
        return self.database.keystone_url

    def _start_backends(self) -> None:
        """Create the PostgreSQL/MySQL database (once) and start memcached."""
        dep = self.deployment
        assert self.venv is not None
        if dep.db != "sqlite" and self.database is None:
            url = databases.server_url(dep.db, dep.db_url)
            self.database = databases.create(self.venv, dep.db, url)
            self.progress(f"created {dep.db} database {self.database.name}")
            self._write_state()
        if dep.cache == "memcached":
            if self.memcached_port is None:
                self.memcached_port = process.find_free_port()
            log = self.run_dir / "memcached.log"
            self.pids["memcached"] = memcached.start(self.memcached_port, log)
            self.progress(f"memcached started on port {self.memcached_port}")
            self._write_state()

    def _render_config(self) -> str:
        dep = self.deployment
        lines = [
            "[DEFAULT]",
            f"log_file = {self.keystone_log_path}",
            "use_stderr = false",
            "",
            "[database]",
            f"connection = {self._database_url()}",
            "",
            "[token]",
            "provider = fernet",
            "",
            "[fernet_tokens]",
            f"key_repository = {self.run_dir / 'fernet-keys'}",
            "",
            "[fernet_receipts]",
            f"key_repository = {self.run_dir / 'fernet-keys'}",
            "",
            "[credential]",
            f"key_repository = {self.run_dir / 'credential-keys'}",
            "",
        ]
        if dep.password_hash_rounds is not None:
            lines += [
                "[identity]",
                f"password_hash_rounds = {dep.password_hash_rounds}",
                "",
            ]
        if self.memcached_port is not None:
            lines += memcached.cache_section(self.memcached_port)
        return "\n".join(lines)

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
        self.config_path.write_text(self._render_config())
        for sub in ("fernet-keys", "credential-keys"):
            (self.run_dir / sub).mkdir(mode=0o700, exist_ok=True)
        if not self.password_path.exists():
            write_private(self.password_path, secrets.token_urlsafe(24) + "\n")
        owner = ("--keystone-user", str(os.getuid()), "--keystone-group", str(os.getgid()))
        self._manage(("db_sync",), ("fernet_setup", *owner), ("credential_setup", *owner))
        if self.deployment.db == "sqlite":
            _sqlite_wal(self.run_dir / "keystone.db")
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
        (self.run_dir / ".initialised").write_text("")

    def _uwsgi_ini(self) -> str:
        dep = self.deployment
        return "\n".join(
            [
                "[uwsgi]",
                # The HTTP router, not http-socket: a kept-alive client
                # connection must not pin a worker process.
                f"http = 127.0.0.1:{self.port}",
                "http-keepalive = 1",
                # Every request gets a response with a size, so a kept-alive
                # client never waits on an empty one (see the hook module).
                f"pythonpath = {self.run_dir}",
                f"import = {WSGI_HOOK_MODULE}",
                "module = keystone.wsgi.api:application",
                f"env = OS_KEYSTONE_CONFIG_FILES={self.config_path}",
                "master = true",
                f"processes = {dep.workers}",
                f"threads = {dep.threads}",
                "enable-threads = true",
                "lazy-apps = true",
                "need-app = true",
                "die-on-term = true",
                "buffer-size = 65535",
                "listen = 128",
                f"logger = file:{self.server_log_path}",
                f"req-logger = file:{self.access_log_path}",
                "log-format = %(tmsecs) %(method) %(uri) %(status) %(micros) %(pid)",
                "",
            ]
        )

    def _start_server(self) -> None:
        # Every server imports it (SQLite's BEGIN IMMEDIATE matters to all).
        (self.run_dir / f"{WSGI_HOOK_MODULE}.py").write_text(_WSGI_HOOK)
        argv = servers.command(self)
        self.progress(f"starting Keystone ({self.deployment.describe()}) on port {self.port}")
        pid = process.spawn(
            argv,
            self.server_log_path,
            env=self._env(),
            cwd=self.run_dir,
        )
        self.pids["server"] = pid

    def _wait_ready(self) -> None:
        """Wait until /v3 answers and the admin can get a token."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not all(process.is_alive(p) for p in self.pids.values()):
                raise BenchError(f"Keystone exited during start; see {self.server_log_path}")
            if self.answers() and self._admin_token_status() == 201:
                return
            time.sleep(0.3)
        raise BenchError(
            f"Keystone did not answer within {START_TIMEOUT:.0f} s; see {self.server_log_path}"
        )

    def _admin_token_status(self) -> int | None:
        body = json.dumps(
            {
                "auth": {
                    "identity": {
                        "methods": ["password"],
                        "password": {
                            "user": {
                                "name": ADMIN_USER,
                                "domain": {"name": "Default"},
                                "password": self.admin_password,
                            }
                        },
                    },
                    "scope": {
                        "project": {
                            "name": ADMIN_PROJECT,
                            "domain": {"name": "Default"},
                        }
                    },
                }
            }
        ).encode()
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
        creds = self.admin_credentials
        lines = [
            f"export OS_AUTH_URL={creds['auth_url']}",
            f"export OS_USERNAME={creds['username']}",
            f"export OS_PASSWORD={creds['password']}",
            f"export OS_PROJECT_NAME={creds['project_name']}",
            f"export OS_USER_DOMAIN_NAME={creds['user_domain_name']}",
            f"export OS_PROJECT_DOMAIN_NAME={creds['project_domain_name']}",
            f"export OS_REGION_NAME={REGION}",
            "export OS_IDENTITY_API_VERSION=3",
            "",
        ]
        write_private(self.openrc_path, "\n".join(lines))

    def _write_state(self) -> None:
        state = {
            "port": self.port,
            "pids": self.pids,
            "deployment": dataclasses.asdict(self.deployment),
            "venv": str(self.venv) if self.venv else None,
            "database": self.database.as_state() if self.database else None,
            "memcached_port": self.memcached_port,
        }
        self.state_path.write_text(json.dumps(state, indent=2) + "\n")

    def _load_state(self) -> None:
        if not self.state_path.exists():
            return
        try:
            state: dict[str, Any] = json.loads(self.state_path.read_text())
        except ValueError:
            return
        if self.port is None:
            self.port = state.get("port")
        self.pids = {k: int(v) for k, v in (state.get("pids") or {}).items()}
        if self.venv is None and state.get("venv"):
            self.venv = Path(state["venv"])
        if state.get("database"):
            self.database = databases.Database(**state["database"])
        self.memcached_port = self.memcached_port or state.get("memcached_port")

    def log_tail(self, lines: int = 20) -> str:
        """The last LINES of the server and Keystone logs, for a failed start."""
        out = []
        for path in (self.server_log_path, self.keystone_log_path):
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {path} (last {len(tail)} lines)")
                out.extend(tail)
        return "\n".join(out)


def _sqlite_wal(path: Path) -> None:
    """Put the database in WAL mode: readers then never block the one writer."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
