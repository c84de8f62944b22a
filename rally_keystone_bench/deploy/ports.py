"""A port picked free can be taken before the server binds it: start again on new ports.

``process.find_free_port`` binds port 0, reads the port back and releases
it; the server binds it later. In between, another socket on the machine
may take it, and the server exits with "Address already in use". Every
server of a local deployment (uWSGI, gunicorn, nginx, HAProxy, slapd,
memcached, a private PostgreSQL) logs into the run directory: a start that
failed is retried on new ports when a log written during it names a bind
failure. (The mock binds port 0 itself and reads its port back: no race.)
"""

from __future__ import annotations

from pathlib import Path

ATTEMPTS = 3
BIND_FAILURES = (
    "Address already in use",  # uWSGI, nginx, memcached, slapd, PostgreSQL
    "cannot bind socket",  # HAProxy
    "errno=98",  # slapd
)


def log_marks(run_dir: Path) -> dict[Path, int]:
    """The size of every log under RUN_DIR now."""
    marks = {}
    for path in run_dir.rglob("*.log"):
        try:
            marks[path] = path.stat().st_size
        except OSError:
            continue
    return marks


def bind_failure_since(run_dir: Path, marks: dict[Path, int]) -> Path | None:
    """The log under RUN_DIR whose lines written since MARKS name a bind failure."""
    for path in sorted(run_dir.rglob("*.log")):
        try:
            with open(path, "rb") as f:
                f.seek(marks.get(path, 0))
                new = f.read().decode(errors="replace")
        except OSError:
            continue
        if any(phrase in new for phrase in BIND_FAILURES):
            return path
    return None
