"""A local LDAP directory (OpenLDAP's slapd) for Keystone's LDAP identity driver.

One directory per run, all of it in the run directory: a generated
``slapd.conf`` (mdb backend, suffix ``dc=keystone-bench,dc=test``), the
database, a log, and with TLS a certificate made for the run. slapd runs in
the foreground on a free loopback port (``-d stats``: its log gets one
``ACCEPT from IP=`` line per LDAP connection, which is how the connections are
counted), as the ``openldap`` user when started as root and that user can
enter the run directory (a 0700 run directory keeps it root, and
``runs_as_root_because`` says so), and is stopped by its pid with the rest
of the run.

The directory holds a read-only service account that Keystone binds as, and
``users`` people under ``ou=Users`` with generated passwords (stored salted
and hashed, {SSHA}, as directories store them). Their names and passwords are
written to ``directory-users.json`` (mode 0600) for the contexts that use them,
and never printed.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.deploy import files, process
from rally_keystone_bench.errors import BenchError

SUFFIX = "dc=keystone-bench,dc=test"
USERS_OU = f"ou=Users,{SUFFIX}"
GROUPS_OU = f"ou=Groups,{SUFFIX}"
SERVICE_DN = f"cn=keystone,{SUFFIX}"
DOMAIN = "LDAP"
USER_PREFIX = "ldapuser"
RUN_AS = "openldap"
START_TIMEOUT = 20.0
INSTALL_HINT = "Debian: apt-get install slapd ldap-utils"
ACCEPT = "ACCEPT from IP="
# slapd's log prefix: the time in hex seconds and hex nanoseconds since the epoch.
_LOG_TIME_RE = re.compile(r"^([0-9a-f]{8,})\.([0-9a-f]{8}) ")


def _find(name: str) -> str | None:
    """NAME on PATH, or in the sbin beside a bin on PATH (/usr/bin -> /usr/sbin).

    Daemons live in sbin, which a non-root PATH often lacks; a PATH without
    the package's directories finds nothing (that is how tests simulate a
    machine without it).
    """
    found = shutil.which(name)
    if found:
        return found
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry.rstrip("/").endswith("/bin"):
            candidate = Path(entry.rstrip("/")[: -len("bin")] + "sbin") / name
            if os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def executable(name: str = "slapd") -> str:
    """slapd (or slapadd); BenchError naming the packages when it is missing."""
    path = _find(name)
    if path is None:
        raise BenchError(f"{name} is not installed ({INSTALL_HINT})")
    return path


def openssl() -> str:
    path = shutil.which("openssl")
    if path is None:
        raise BenchError("openssl is not installed (Debian: apt-get install openssl)")
    return path


def check_installed(tls: bool = False) -> None:
    """BenchError, before anything starts, when a program the directory needs is missing."""
    executable("slapd")
    executable("slapadd")
    if tls:
        openssl()


def ssha(password: str) -> str:
    """PASSWORD as an {SSHA} userPassword value (salted SHA-1, slapd's default scheme)."""
    salt = secrets.token_bytes(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


def user_name(index: int) -> str:
    return f"{USER_PREFIX}{index:04d}"


@dataclasses.dataclass
class Directory:
    """One slapd for one run, living in RUN_DIR (its own subdirectory of the run)."""

    run_dir: Path
    port: int
    tls: bool = False
    users: int = 8

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir).resolve()

    # -- paths -------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.run_dir / "slapd.conf"

    @property
    def data_dir(self) -> Path:
        return self.run_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "slapd.log"

    @property
    def cert_path(self) -> Path:
        return self.run_dir / "cert.pem"

    @property
    def key_path(self) -> Path:
        return self.run_dir / "key.pem"

    @property
    def users_path(self) -> Path:
        """Names and passwords of the directory's users (0600), for the contexts."""
        return self.run_dir / "directory-users.json"

    @property
    def service_password_path(self) -> Path:
        return self.run_dir / "service-password"

    @property
    def url(self) -> str:
        return f"{'ldaps' if self.tls else 'ldap'}://127.0.0.1:{self.port}"

    @property
    def service_password(self) -> str:
        return self.service_password_path.read_text().strip()

    @property
    def prepared(self) -> bool:
        return (self.data_dir / "data.mdb").exists() and self.users_path.exists()

    # -- lifecycle ---------------------------------------------------------
    def prepare(self) -> None:
        """Write the config, make the certificate and fill the database (offline, once)."""
        check_installed(self.tls)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir(mode=0o700)
        if self.tls:
            self._make_certificate()
        writer.write_private(self.config_path, self.render_config())
        service_password = secrets.token_urlsafe(24)
        writer.write_private(self.service_password_path, service_password + "\n")
        people = [(user_name(i), secrets.token_urlsafe(18)) for i in range(1, self.users + 1)]
        ldif = render_ldif(service_password, people)
        proc = subprocess.run(
            [executable("slapadd"), "-q", "-f", str(self.config_path)],
            input=ldif,
            text=True,
            capture_output=True,
        )
        if proc.returncode != 0:
            reason = (proc.stderr or proc.stdout).strip().splitlines()
            raise BenchError(
                f"slapadd could not fill the directory: {reason[-1] if reason else proc.returncode}"
            )
        doc = {
            "domain": DOMAIN,
            "url": self.url,
            "users": [{"name": n, "password": p} for n, p in people],
        }
        writer.write_private(self.users_path, json.dumps(doc, indent=1) + "\n")
        self._give_to_slapd()

    def command(self) -> list[str]:
        """slapd in the foreground, logging connections and operations to stderr."""
        argv = [executable("slapd"), "-d", "stats", "-f", str(self.config_path), "-h", self.url]
        if self.run_as:
            argv += ["-u", self.run_as, "-g", self.run_as]
        return argv

    @property
    def run_as(self) -> str | None:
        """openldap when started as root and that user can reach the run directory."""
        if os.geteuid() != 0 or not _has_user(RUN_AS):
            return None
        entry = pwd.getpwnam(RUN_AS)
        for parent in self.run_dir.parents:
            if not _can_enter(parent, entry.pw_uid, entry.pw_gid):
                return None
        return RUN_AS

    def runs_as_root_because(self) -> str | None:
        """Why slapd, started as root, keeps root: the directory openldap cannot enter."""
        if os.geteuid() != 0 or self.run_as is not None:
            return None
        if not _has_user(RUN_AS):
            return f"there is no {RUN_AS} user"
        entry = pwd.getpwnam(RUN_AS)
        for parent in self.run_dir.parents:
            if not _can_enter(parent, entry.pw_uid, entry.pw_gid):
                mode = oct(parent.stat().st_mode & 0o777)[2:]
                return f"{RUN_AS} cannot enter {parent} (mode {mode})"
        return None

    def start(self) -> int:
        """Start slapd; return its pid once it accepts connections."""
        if not self.prepared:
            self.prepare()
        pid = process.spawn(self.command(), self.log_path, cwd=self.run_dir)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not process.is_alive(pid):
                raise BenchError(f"slapd exited at start; see {self.log_path}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return pid
            except OSError:
                time.sleep(0.1)
        process.terminate(pid)
        raise BenchError(f"slapd did not listen on port {self.port} within {START_TIMEOUT:.0f} s")

    def remove_data(self) -> None:
        """Delete the directory's database, its users' passwords and its keys; keep the log."""
        shutil.rmtree(self.data_dir, ignore_errors=True)
        for path in (self.users_path, self.service_password_path, self.key_path):
            path.unlink(missing_ok=True)

    # -- generated files ---------------------------------------------------
    def render_config(self) -> str:
        return files.render(
            "slapd.conf",
            run_dir=self.run_dir,
            data_dir=self.data_dir,
            suffix=SUFFIX,
            service_dn=SERVICE_DN,
            cert_path=self.cert_path if self.tls else None,
            key_path=self.key_path,
        )

    def _make_certificate(self) -> None:
        """A self-signed certificate for 127.0.0.1, valid for two days, made for this run."""
        self.key_path.unlink(missing_ok=True)
        proc = subprocess.run(
            [
                openssl(), "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                "-keyout", str(self.key_path), "-out", str(self.cert_path),
                "-days", "2", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1",
            ],
            capture_output=True,
            text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            raise BenchError(f"openssl could not make a certificate: {proc.stderr.strip()[-200:]}")
        os.chmod(self.key_path, 0o600)

    def _give_to_slapd(self) -> None:
        """slapd drops to the openldap user: it must own its config, data and key."""
        if self.run_as is None:
            return
        entry = pwd.getpwnam(self.run_as)
        paths = [self.run_dir, self.config_path, self.data_dir, *self.data_dir.iterdir()]
        if self.tls:
            paths += [self.key_path, self.cert_path]
        for path in paths:
            os.chown(path, entry.pw_uid, entry.pw_gid)


def render_ldif(service_password: str, people: Iterable[tuple[str, str]]) -> str:
    """The directory's entries: base, OUs, Keystone's service account, the users.

    Passwords are hashed here: the LDIF never holds one in clear.
    """
    return files.render(
        "directory.ldif",
        suffix=SUFFIX,
        users_ou=USERS_OU,
        groups_ou=GROUPS_OU,
        service_dn=SERVICE_DN,
        service_password_hash=ssha(service_password),
        people=[(name, ssha(password)) for name, password in people],
    )


def keystone_domain_config(
    directory: Directory,
    use_pool: bool | None,
    pool_size: int | None = None,
    auth_pool_size: int | None = None,
) -> str:
    """keystone.<domain>.conf: the LDAP identity driver on DIRECTORY, read-only.

    USE_POOL sets both ``use_pool`` and ``use_auth_pool``, explicitly (both are
    on by default in today's Keystone); None leaves Keystone's defaults.
    """
    return files.render(
        "keystone.domain.conf",
        url=directory.url,
        service_dn=SERVICE_DN,
        service_password=directory.service_password,
        suffix=SUFFIX,
        users_ou=USERS_OU,
        groups_ou=GROUPS_OU,
        cert_path=directory.cert_path if directory.tls else None,
        use_pool=use_pool,
        pool_size=pool_size,
        auth_pool_size=auth_pool_size,
    )


def load_users(path: Path | str) -> dict:
    """directory-users.json: {"domain", "url", "users": [{"name", "password"}]}."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise BenchError(f"cannot read the directory's users {path}: {exc.strerror}") from None
    except ValueError:
        raise BenchError(f"{path} is not the directory's users file (not JSON)") from None
    return doc


def log_time(line: str) -> float | None:
    """The epoch time of one slapd log line, from its hex prefix."""
    found = _LOG_TIME_RE.match(line)
    if not found:
        return None
    return int(found.group(1), 16) + int(found.group(2), 16) / 1e9


def count_accepts(log: Path | str, start: float | None = None, end: float | None = None) -> int:
    """LDAP connections slapd accepted (its ``ACCEPT from IP=`` lines), within [START, END]."""
    count = 0
    try:
        with open(log, errors="replace") as lines:
            for line in lines:
                if ACCEPT not in line:
                    continue
                if start is not None or end is not None:
                    when = log_time(line)
                    if when is None:
                        continue
                    if (start is not None and when < start) or (end is not None and when > end):
                        continue
                count += 1
    except FileNotFoundError:
        return 0
    return count


def load_window(workload: Any) -> tuple[float, float] | None:
    """A Rally workload's load: first iteration's start to the last one's end (epoch s)."""
    started = workload.iteration_started
    if started is None or not len(started):
        return None
    ends = started + workload.iteration_duration
    return float(started.min()), float(ends.max())


def count_load_accepts(log: Path | str, workloads: Sequence[Any]) -> dict[int, int]:
    """{index of a workload: LDAP connections slapd accepted during its load}.

    Context setup and cleanup (projects, grants) fall outside the window.
    """
    counts = {}
    for index, wl in enumerate(workloads):
        window = load_window(wl)
        if window is not None:
            counts[index] = count_accepts(log, *window)
    return counts


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _can_enter(path: Path, uid: int, gid: int) -> bool:
    """True when user UID (group GID) may traverse directory PATH."""
    try:
        st = path.stat()
    except OSError:
        return False
    if st.st_uid == uid:
        return bool(st.st_mode & 0o100)
    if st.st_gid == gid:
        return bool(st.st_mode & 0o010)
    return bool(st.st_mode & 0o001)
