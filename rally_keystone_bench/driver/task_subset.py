"""A task cut down to some of its subtasks: the gate's extension runs only the workloads it needs.

The task file is rendered as ``rally task start`` renders it (Rally's own
``render_template``, with the same task arguments), and the subtasks whose
titles are named are written to a JSON task of their own, rendered already:
the same workloads, arguments and contexts, nothing else. When a subtask
has no title, or a title names more than one subtask, nothing can be picked
out by name and the caller runs the whole task.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml

from rally_keystone_bench import writer


def render(task: Path, task_args: dict[str, Any]) -> dict[str, Any]:
    """TASK rendered with TASK_ARGS, as Rally renders it, and loaded."""
    from rally import api

    text = task.read_text()
    rendered = api._Task(None).render_template(
        task_template=text, template_dir=str(task.parent), **task_args
    )
    return yaml.safe_load(rendered)


def subset(
    task: Path, task_args: dict[str, Any], titles: Collection[str], dest: Path
) -> Path | None:
    """A task file at DEST holding only TASK's subtasks titled TITLES.

    None when they cannot be told apart by title, and when every subtask is
    wanted (the whole task is the subset).
    """
    doc = render(task, task_args)
    subtasks = doc.get("subtasks") if isinstance(doc, dict) else None
    if not isinstance(subtasks, list) or not subtasks:
        return None
    names = [s.get("title") if isinstance(s, dict) else None for s in subtasks]
    if None in names or len(set(names)) != len(names) or not set(titles) <= set(names):
        return None
    kept = [s for s in subtasks if s["title"] in titles]
    if len(kept) == len(subtasks):
        return None
    out = {**doc, "subtasks": kept}
    if out.get("title"):
        out["title"] = f"{out['title']} ({len(kept)} of {len(subtasks)} workloads)"
    dest.parent.mkdir(parents=True, exist_ok=True)
    writer.write_json(dest, out, indent=1)
    return dest
