"""Start and stop server processes by pid, so that nothing is left running."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from rally_keystone_bench import writer
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
    with writer.open_stream(log, "ab") as out:
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


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends, then take their usual course.

    Around a spawn and its record: an interrupt between the two would leave
    a process that nobody knows about. Outside the main thread, a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    sigs = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda n, _f: pending.append(n)) for s in sigs}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for n in dict.fromkeys(pending):
            signal.raise_signal(n)


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


# -- which process a recorded pid names ------------------------------------------
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def identity(pid: int, wait: float = 2.0) -> dict | None:
    """What tells PID's process from a later one with the same pid: boot, start time, argv.

    A child just forked may not have run its program yet: its command line is
    then still ours (or empty, during the exec), so wait up to WAIT seconds for it.
    """
    start = _start_time(pid)
    if start is None:
        return None
    own = _cmdline(os.getpid())
    deadline = time.monotonic() + wait
    argv = _cmdline(pid)
    while (not argv or argv == own) and time.monotonic() < deadline:  # [] mid-exec
        time.sleep(0.02)
        argv = _cmdline(pid)
    return {"pid": pid, "boot_id": _boot_id(), "start_time": start, "cmdline": argv}


def is_same_process(recorded: dict) -> bool:
    """True when the process now at RECORDED's pid is the one recorded.

    The boot and the start time must match (together they name one process);
    the command line, which a server may rewrite (``gunicorn: master``), must
    still name one of the recorded program's words.
    A record without all three (boot id, start time, command line) names no
    process for sure: it is never taken for ours.
    """
    if not is_complete(recorded):
        return False
    pid = int(recorded["pid"])
    if not is_alive(pid):
        return False
    if recorded["boot_id"] != _boot_id() or recorded["start_time"] != _start_time(pid):
        return False
    was = [os.path.basename(a) for a in recorded["cmdline"] if not a.startswith("-")]
    now = " ".join(_cmdline(pid))
    return bool(now) and any(word and word in now for word in was)


def is_complete(recorded: dict) -> bool:
    """True when RECORDED holds a pid, a boot id, a start time and a command line."""
    return (
        isinstance(recorded.get("pid"), int)
        and bool(recorded.get("boot_id"))
        and isinstance(recorded.get("start_time"), int)
        and bool(recorded.get("cmdline"))
    )
