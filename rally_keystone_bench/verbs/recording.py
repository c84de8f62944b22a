"""What a verb hands the results store: the summaries it wrote, and the Keystone it measured.

history/ takes values (rows, a Keystone identity) and finds nothing itself:
a verb hands over the summary documents it kept in memory when report/ wrote
them (``summaries_of``), and asks deploy/ which Keystone ran. Only
``history --from-report`` reads summary.json files: a report folder is its
input (``summaries_under``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rally_keystone_bench.deploy import identity
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.history import records


def keystone_of(spec: str) -> records.Keystone:
    """SPEC as recorded: a checkout's (or git-commit: spec's) commit and ``git describe``."""
    return records.Keystone(spec=spec, **identity.describe(spec))


def summaries_of(
    written: Iterable[tuple[Path, Mapping[str, Any]]], out_dir: Path, verb: str
) -> list[tuple[str, Mapping[str, Any]]]:
    """(task name, summary) of the summaries a verb wrote under OUT_DIR, given as (the
    summary.json's or summary.html's path, its document) in the order of their paths;
    each task named after its folder below OUT_DIR, less -summary."""
    base = out_dir.resolve()
    found = sorted(
        ((Path(path).resolve().with_name("summary.json"), doc) for path, doc in written),
        key=lambda pair: pair[0],
    )
    return [(task_name(path, base, verb), doc) for path, doc in found]


def summaries_of_outcomes(outcomes: Iterable[Any], out_dir: Path, verb: str) -> list:
    """The summaries of driver TaskOutcomes (their summary.html and its document)."""
    written = [(o.summary, o.summary_doc) for o in outcomes if o.summary_doc is not None]
    return summaries_of(written, out_dir, verb)


def summaries_under(out_dir: Path, verb: str) -> list[tuple[str, dict[str, Any]]]:
    """(task name, summary) of every summary.json a verb wrote under OUT_DIR, in a
    stable order; the task is named after its folder below OUT_DIR, less -summary."""
    if not out_dir.is_dir():
        return []
    return [
        (task_name(p, out_dir, verb), load_summary(p))
        for p in sorted(out_dir.rglob("summary.json"))
    ]


def task_name(summary: Path, out_dir: Path, verb: str) -> str:
    """What a summary's workloads are named after: its folder below OUT_DIR, less -summary."""
    rel = summary.parent.relative_to(out_dir) if summary.parent != out_dir else Path(verb)
    return str(rel).removesuffix("-summary")


def load_summary(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BenchError(f"{path}: not a keystone-bench summary.json ({exc})") from None
    if not isinstance(doc, dict) or "workloads" not in doc:
        raise BenchError(f"{path}: not a keystone-bench summary.json (no workloads)")
    return doc
