"""memcached for Keystone's cache: started on a free loopback port, stopped by pid."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import time
from pathlib import Path

from rally_keystone_bench.deploy import process
from rally_keystone_bench.errors import BenchError

START_TIMEOUT = 10.0


def executable() -> str:
    """The memcached binary; BenchError naming the package when it is missing."""
    path = shutil.which("memcached") or (
        "/usr/bin/memcached" if os.path.exists("/usr/bin/memcached") else None
    )
    if path is None:
        raise BenchError("memcached is not installed (Debian: apt-get install memcached)")
    return path


def command(port: int, memory_mb: int = 64) -> list[str]:
    """memcached's command line: loopback only, TCP only, in the foreground."""
    argv = [executable(), "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", str(memory_mb)]
    if os.geteuid() == 0:
        # memcached refuses to run as root unless told which user to be.
        argv += ["-u", pwd.getpwuid(0).pw_name]
    return argv


def start(port: int, log: Path) -> int:
    """Start memcached on PORT; return its pid once it accepts connections."""
    pid = process.spawn(command(port), log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if not process.is_alive(pid):
            raise BenchError(f"memcached exited at start; see {log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return pid
        except OSError:
            time.sleep(0.1)
    process.terminate(pid)
    raise BenchError(f"memcached did not listen on port {port} within {START_TIMEOUT:.0f} s")
