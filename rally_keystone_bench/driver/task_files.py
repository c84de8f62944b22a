"""A task file checked as Rally would load it, before anything is built or started.

    path = task_files.checked("tasks/token-suite.yaml", task_args)

The file is read, rendered with Rally's own jinja2 template functions and
TASK_ARGS, parsed as YAML (or JSON) and checked against Rally's task format;
anything wrong is one BenchError naming the file, the line where it is
known, and what is wrong. What needs a cloud (plugins' own validators, the
scenario's arguments) is left to ``rally task validate`` once a target
answers.
"""

from __future__ import annotations

import builtins
import math
import re
import stat
from pathlib import Path
from typing import Any

from rally_keystone_bench import shipped
from rally_keystone_bench.errors import BenchError, read_input


def checked(name: str | Path, task_args: dict[str, Any]) -> Path:
    """NAME as a path (else the one shipped in the package), once it renders to a Rally task."""
    path = shipped.resolve(name, "tasks")
    _check_kind(path)
    text = read_input(path, "task file")
    rendered = _render(path, text, task_args)
    _check_config(path, _parse(path, rendered))
    return path


def _check_kind(path: Path) -> None:
    """BenchError unless PATH is a regular file (a FIFO would block the read)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise BenchError(f"task file {path} does not exist") from None
    except OSError as exc:
        raise BenchError(f"cannot read task file {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise BenchError(f"task file {path} is a directory, not a file")
    if not stat.S_ISREG(mode):
        raise BenchError(f"task file {path} is not a regular file (a FIFO, socket or device)")


# The functions Rally gives every task template (rally.api._Task.create_template_functions):
# importing rally.api for them costs seconds before a verb can say a word.
TEMPLATE_FUNCTIONS = {
    "min": min,
    "max": max,
    "round": lambda value: int(round(value)),
    "ceil": lambda value: int(math.ceil(value)),
}


def _render(path: Path, text: str, task_args: dict[str, Any]) -> str:
    """TEXT rendered as ``rally task start`` renders it (functions, missing arguments)."""
    import jinja2
    import jinja2.meta

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(path.parent), encoding="utf8"))
    env.globals.update(TEMPLATE_FUNCTIONS)
    try:
        needed = jinja2.meta.find_undeclared_variables(env.parse(text))
        missing = sorted(
            name
            for name in needed - set(task_args) - set(dir(builtins)) - set(env.globals)
            if _really_missing(name, text)
        )
        if missing:
            raise BenchError(
                f"task file {path} needs the task argument(s) {', '.join(missing)}: "
                "give them with --task-args"
            )
        return env.from_string(text).render(**task_args)
    except jinja2.TemplateSyntaxError as exc:
        raise BenchError(f"task file {path} line {exc.lineno}: {exc.message}") from None
    except jinja2.TemplateError as exc:
        raise BenchError(f"task file {path} does not render: {exc}") from None


def _really_missing(name: str, text: str) -> bool:
    """Rally's rule: a variable set from itself or given a default() is not missing."""
    escaped = re.escape(name)
    if re.search(r"{%\s*set\s+" + escaped + r"\s*=\s*" + escaped + r"[^\w]+", text):
        return False
    return not re.search(escaped + r"\s*\|\s*default\(", text)


def _parse(path: Path, rendered: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(rendered)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" line {mark.line + 1}" if mark is not None else ""
        what = exc.problem or exc.context or "not YAML"
        raise BenchError(f"task file {path}{where}: {what} (not valid YAML or JSON)") from None
    except yaml.YAMLError as exc:
        raise BenchError(f"task file {path} is not valid YAML or JSON: {exc}") from None


def _check_config(path: Path, config: Any) -> None:
    """BenchError unless CONFIG is a task in one of Rally's formats."""
    from rally import exceptions
    from rally.task import task_cfg

    if not isinstance(config, dict):
        kind = "empty" if config is None else f"a {type(config).__name__}, not a mapping"
        raise BenchError(f"task file {path} is not a Rally task: it is {kind}")
    try:
        task_cfg.TaskConfig(config)
    except exceptions.InvalidTaskException as exc:
        # Its first line says what (jsonschema's dump of the schema follows).
        reason = str(exc).removeprefix("Task config is invalid: ").strip("`").split("\n")[0]
        raise BenchError(f"task file {path} is not a Rally task: {reason}") from None
