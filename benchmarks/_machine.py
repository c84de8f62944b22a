"""One line that names the machine a benchmark ran on."""

from __future__ import annotations

import os
import platform


def describe() -> str:
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(open("/proc/meminfo").readline().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    py = platform.python_version()
    return f"{platform.machine()}, {os.cpu_count()} cores, {model}{mem}, Python {py}"
