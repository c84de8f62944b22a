"""JSON records a verb keeps beside its reports: deployment.json, identity.json, load.json."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer


def write_json(
    path: Path, doc: Any, *, indent: int | None = 2, default: Callable[[Any], Any] | None = None
) -> None:
    """DOC as JSON at PATH; indented records end with a newline."""
    writer.write_json(path, doc, indent=indent, newline=bool(indent), default=default)
