"""JSON records a verb keeps beside its reports: deployment.json, identity.json, load.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_json(
    path: Path, doc: Any, *, indent: int | None = 2, default: Callable[[Any], Any] | None = None
) -> None:
    """DOC as JSON at PATH; indented records end with a newline."""
    path.write_text(json.dumps(doc, indent=indent, default=default) + ("\n" if indent else ""))
