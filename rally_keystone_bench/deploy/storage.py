"""Where the database's files live: on disk, or on tmpfs (RAM) as in Bogomolov et al.

The paper ran each configuration with its database on an HDD, an SSD and
tmpfs. ``--db-storage tmpfs`` puts the files in a directory of their own
under ``/dev/shm`` (a tmpfs on every Linux), removed at teardown:

- sqlite: the database file;
- postgresql: a private PostgreSQL server (initdb into that directory, its
  own port and socket directory, run as the ``postgres`` account when we
  are root), stopped with the deployment;
- mysql: refused. A private MariaDB (mariadb-install-db and mariadbd on a
  tmpfs datadir) is not built yet; use postgresql or sqlite on tmpfs.

``--db-storage disk`` (the default) leaves the files where they are; the
deployment's description names the disk's device and whether lsblk calls
it rotational, so "HDD" and "SSD" rows say what this machine really has.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

from rally_keystone_bench import writer
from rally_keystone_bench.deploy import process
from rally_keystone_bench.errors import BenchError

STORAGES = ("disk", "tmpfs")
TMPFS_ROOT = Path("/dev/shm")
PG_ACCOUNT = "postgres"
PG_INSTALL = "apt-get install postgresql"


def is_tmpfs(path: Path) -> bool:
    """True when PATH is on a tmpfs mount."""
    out = subprocess.run(
        ["df", "--output=fstype", str(path)], capture_output=True, text=True, check=False
    ).stdout.split()
    return out[-1:] == ["tmpfs"]


def pg_bin(name: str) -> str | None:
    """A PostgreSQL server binary (initdb, postgres) of the newest installed version."""
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=_version)
    return str(found[-1]) if found else shutil.which(name)


def _version(path: Path) -> float:
    try:
        return float(path.parts[-3])
    except (ValueError, IndexError):
        return 0.0


def check(storage: str, db: str, db_url: str | None) -> None:
    """BenchError on a storage that cannot work, before anything starts."""
    if storage not in STORAGES:
        raise BenchError(f"db storage must be one of {', '.join(STORAGES)}, not {storage!r}")
    if storage == "disk":
        return
    if not TMPFS_ROOT.is_dir() or not is_tmpfs(TMPFS_ROOT):
        raise BenchError(f"--db-storage tmpfs needs {TMPFS_ROOT} on a tmpfs, which it is not here")
    if db == "mysql":
        raise BenchError(
            "--db-storage tmpfs is not supported with --db mysql (a private MariaDB on tmpfs "
            "is not built yet): use --db postgresql or --db sqlite"
        )
    if db == "postgresql":
        if db_url:
            raise BenchError("--db-storage tmpfs starts its own PostgreSQL: drop --db-url")
        if pg_bin("initdb") is None or pg_bin("postgres") is None:
            raise BenchError(
                f"--db-storage tmpfs with postgresql needs PostgreSQL's server ({PG_INSTALL})"
            )


def tmpfs_dir(run_dir: Path) -> Path:
    """The run's own directory on tmpfs (one per run directory)."""
    digest = hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:12]
    return TMPFS_ROOT / f"keystone-bench-{digest}"


def remove(run_dir: Path) -> None:
    shutil.rmtree(tmpfs_dir(run_dir), ignore_errors=True)


def device_of(path: Path) -> str:
    """What PATH is stored on: ``tmpfs``, or ``vda (SSD)`` / ``sda (HDD)`` as lsblk says."""
    out = subprocess.run(
        ["df", "--output=source,fstype", str(path)], capture_output=True, text=True, check=False
    ).stdout.split()
    if len(out) < 4:
        return "unknown device"
    source, fstype = out[-2], out[-1]
    if fstype == "tmpfs":
        return "tmpfs"
    lsblk = subprocess.run(
        ["lsblk", "-ndo", "NAME,ROTA,PKNAME", source], capture_output=True, text=True, check=False
    ).stdout.split()
    if len(lsblk) < 2:
        return f"{source} ({fstype})"
    kind = "HDD, rotational" if lsblk[1] == "1" else "SSD, not rotational"
    return f"{lsblk[0]} ({kind})"


def _as_account() -> list[str]:
    """Run as the postgres account when we are root (PostgreSQL refuses root)."""
    return ["runuser", "-u", PG_ACCOUNT, "--"] if os.geteuid() == 0 else []


def pg_data_dir(run_dir: Path) -> Path:
    return tmpfs_dir(run_dir) / "pgdata"


def start_postgres(run_dir: Path, port: int, log: Path) -> int:
    """A private PostgreSQL with its data on tmpfs (initdb once); its pid once it accepts."""
    data = pg_data_dir(run_dir)
    if not (data / "PG_VERSION").exists():
        data.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            entry = pwd.getpwnam(PG_ACCOUNT)
            os.chown(data.parent, entry.pw_uid, entry.pw_gid)
            os.chown(data, entry.pw_uid, entry.pw_gid)
        initdb = [*_as_account(), pg_bin("initdb"), "-D", str(data), "-U", "postgres"]
        initdb += ["--auth=trust", "--no-sync"]
        with writer.open_stream(log, "a") as out:
            done = subprocess.run(initdb, stdout=out, stderr=subprocess.STDOUT, check=False)
        if done.returncode != 0:
            raise BenchError(f"initdb failed (exit {done.returncode}); see {log}")
    argv = [
        *_as_account(), pg_bin("postgres"), "-D", str(data), "-p", str(port),
        "-k", str(data), "-c", "listen_addresses=127.0.0.1",
    ]  # fmt: skip
    pid = process.spawn(argv, log, cwd=data.parent)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not process.is_alive(pid):
            raise BenchError(f"the private PostgreSQL exited during start; see {log}")
        try:
            process.ensure_port_free(port)
        except BenchError:
            return pid  # it listens
        time.sleep(0.3)
    process.terminate(pid)
    raise BenchError(f"the private PostgreSQL did not listen within 60 s; see {log}")
