"""Where and how one server serves Keystone: what servers.py and nginx.py both read."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path


def _quiet(_: str) -> None:
    pass


@dataclasses.dataclass(frozen=True)
class Site:
    """Where and how one server serves Keystone: all a server needs, nothing above it."""

    server: str
    port: int
    workers: int
    threads: int
    run_dir: Path
    config_path: Path
    server_log_path: Path
    access_log_path: Path
    venv: Path
    progress: Callable[[str], None] = _quiet
    request_timeout: int = 35  # seconds before the server gives up on a silent worker

    def bin(self, name: str) -> str:
        """An executable of Keystone's environment."""
        return str(self.venv / "bin" / name)
