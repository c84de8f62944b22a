"""Start and stop server processes by pid, so that nothing is left running."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from rally_keystone_bench.errors import BenchError


def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on HOST that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def ensure_port_free(port: int, host: str = "127.0.0.1") -> None:
    """Raise BenchError when PORT on HOST is taken or out of range."""
    if not 0 < port < 65536:
        raise BenchError(f"port {port} is not a TCP port (1-65535)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise BenchError(f"port {port} on {host} is already in use") from None
            raise BenchError(f"cannot bind {host}:{port}: {exc.strerror}") from None


def spawn(
    argv: Sequence[str],
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start ARGV in a new session (its own process group); return its pid.

    Output goes to LOG. The process outlives this one, so that ``keystone up``
    and ``keystone down`` can be separate commands; ``terminate`` stops it.
    """
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    return proc.pid


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours is not alive: reap it.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return _state(pid) not in ("Z", "X", None)


def _state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def group_members(pgid: int) -> list[int]:
    """Live pids whose process group is PGID (read from /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def terminate(pid: int, timeout: float = 15.0) -> None:
    """Stop the process group led by PID: SIGTERM, then SIGKILL after TIMEOUT."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap(pid)
            if not group_members(pid):
                return
            time.sleep(0.1)
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
