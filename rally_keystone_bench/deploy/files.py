"""The files a deployment generates (configs, small Python modules), from templates/.

Every file is rendered from a template shipped in ``deploy/templates/``: no
module keeps a generated file in a string constant. Files that hold a secret
or a deployment's state (keystone.conf, uwsgi.ini, passwords, openrc,
state.json) go through ``write_private``. Both write through the one writer
(``rally_keystone_bench/writer.py``, the bottom floor: deploy/ may not
import report/), atomically.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2

from rally_keystone_bench import writer

TEMPLATES = Path(__file__).resolve().parent / "templates"


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.filters["pyrepr"] = repr
    return env


def render(template: str, **values: Any) -> str:
    """The text of TEMPLATE (a name under templates/, without .j2) with VALUES."""
    return _environment().get_template(f"{template}.j2").render(**values)


def write(path: Path, template: str, **values: Any) -> Path:
    """Render TEMPLATE into PATH; return PATH."""
    return writer.write_text(path, render(template, **values))


def write_private(path: Path, text: str) -> None:
    """Write TEXT to PATH readable by its owner only (0600) from the first byte.

    Through a temporary file renamed over PATH: a kill mid-write leaves the
    old file whole (state.json must never be half a record).
    """
    writer.write_private(path, text)
