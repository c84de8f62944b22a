"""The task and deployment files shipped inside the package (data/tasks, data/deployments).

A verb's default task is named as a user would write it in a checkout
(``tasks/gate.yaml``); when no such file exists where the verb runs, the
copy shipped in the package is used, so a pip-installed tool works from any
directory. In a checkout, top-level ``tasks/`` and ``deployments/`` are
links to the same files.
"""

from __future__ import annotations

from pathlib import Path

from rally_keystone_bench.errors import BenchError

DATA = Path(__file__).resolve().parent / "data"
KINDS = ("tasks", "deployments")
PROBE_TASK_NAME = "capacity-probe.yaml"


def files(kind: str) -> list[Path]:
    """The shipped files of KIND (tasks or deployments), sorted by name."""
    return sorted(p for p in (DATA / kind).glob("*.yaml") if p.is_file())


def resolve(name: str | Path, kind: str) -> Path:
    """NAME as given when it exists; else the shipped file of KIND with its file name.

    ``tasks/gate.yaml`` or ``gate.yaml`` outside a checkout both give the
    shipped gate task. A name that is neither is returned as given (the
    caller says it does not exist).
    """
    path = Path(name)
    if path.exists():
        return path
    parts = path.parts
    if len(parts) == 1 or (len(parts) == 2 and parts[0] == kind):
        shipped = DATA / kind / path.name
        if shipped.is_file():
            return shipped
    return path


def probe_task_path() -> Path:
    """The probe task shipped in the package."""
    path = DATA / "tasks" / PROBE_TASK_NAME
    if not path.is_file():
        raise BenchError(f"the package lacks its probe task {path}: reinstall rally-keystone-bench")
    return path


def describe(path: Path) -> str:
    """One line on the file at PATH: a task's title at its template defaults, else the
    first sentence of its opening comment."""
    text = path.read_text(encoding="utf-8")
    if text.startswith("{#"):
        try:  # jinja2 and yaml import only here: `tasks` is the one caller
            import jinja2
            import yaml

            title = yaml.safe_load(jinja2.Environment().from_string(text).render()).get("title")
        except Exception:  # a template that needs arguments: its comment instead
            title = None
        if title:
            return " ".join(str(title).split())
        comment = text[2:].split("#}", 1)[0]
    else:
        comment = "\n".join(
            line.lstrip("#") for line in text.splitlines() if line.startswith("#")
        ).split("\n \n", 1)[0]
    first = " ".join(comment.split()).split(". ", 1)[0]
    colons = [i for i in range(len(first)) if first.startswith(": ", i)]
    heads = [first[:i] for i in colons if first[:i].count('"') % 2 == 0]  # not inside a title
    first = heads[0] if heads else first
    return first if len(first) <= 100 else first[:99] + "…"
