"""The files a deployment generates (configs, small Python modules), from templates/.

Every file is rendered from a template shipped in ``deploy/templates/``: no
module keeps a generated file in a string constant.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2

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
    path.write_text(render(template, **values))
    return path
