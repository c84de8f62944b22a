"""A flame graph of collapsed stacks as one self-contained SVG (no script, no link).

Root at the bottom, callees above; a frame's width is its share of the
samples; each box's tooltip (``<title>``) names it with its samples and share.
Frames narrower than MIN_SHARE of the whole are left out. ``Flames`` is what
summary.html shows of a task's samples: one graph per workload.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from xml.sax.saxutils import escape


@dataclasses.dataclass(frozen=True)
class WorkloadFlame:
    """One workload's flame graph: the samples taken while its iterations ran."""

    svg: str | None  # None: py-spy took no sample in the workload's window
    samples: int
    seconds: float  # the window: its first iteration's start to its last one's end
    requests_served: Mapping[str, int]  # what Keystone's access log says it served then


@dataclasses.dataclass(frozen=True)
class Flames:
    """summary.html's flame graphs: one per workload, or one of the whole task when the
    samples carry no time (a profile kept without slices)."""

    per_workload: Sequence[WorkloadFlame] = ()
    whole: str | None = None
    samples: int = 0
    slice_s: float | None = None


WIDTH = 1200
ROW = 16
MIN_SHARE = 0.002


def _color(name: str) -> str:
    h = int(hashlib.sha1(name.encode()).hexdigest()[:4], 16)
    return f"rgb({205 + h % 50},{80 + (h >> 6) % 120},{40 + (h >> 3) % 40})"


def _tree(stacks: Mapping[tuple[str, ...], int]) -> dict:
    root: dict = {"n": 0, "kids": {}}
    for frames, n in stacks.items():
        node = root
        node["n"] += n
        for frame in frames:
            node = node["kids"].setdefault(frame, {"n": 0, "kids": {}})
            node["n"] += n
    return root


def flame_svg(stacks: Mapping[tuple[str, ...], int], title: str) -> str:
    """The SVG text of a flame graph of STACKS."""
    root = _tree(stacks)
    total = root["n"] or 1
    boxes: list[tuple[int, float, float, str, int]] = []  # depth, x, width, frame, samples
    depth_max = 0

    def walk(node: dict, depth: int, x: float) -> None:
        nonlocal depth_max
        for frame, kid in sorted(node["kids"].items()):
            width = kid["n"] / total * WIDTH
            if kid["n"] / total >= MIN_SHARE:
                boxes.append((depth, x, width, frame, kid["n"]))
                depth_max = max(depth_max, depth)
                walk(kid, depth + 1, x)
            x += width

    walk(root, 0, 0.0)
    height = (depth_max + 1) * ROW + 40
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="11">',
        f'<text x="4" y="16" font-size="13">{escape(title)} ({total} samples)</text>',
    ]
    for depth, x, width, frame, n in boxes:
        y = height - (depth + 1) * ROW - 4
        fits = int((width - 4) / 6.6)
        label = frame if len(frame) <= fits else frame[: max(0, fits - 2)] + ".."
        share = n / total * 100
        parts.append(
            f"<g><title>{escape(frame)}: {n} samples, {share:.1f} %</title>"
            f'<rect x="{x:.1f}" y="{y}" width="{max(width - 0.5, 0.5):.1f}" height="{ROW - 1}" '
            f'fill="{_color(frame)}"/>'
            + (f'<text x="{x + 2:.1f}" y="{y + 11}">{escape(label)}</text>' if fits > 5 else "")
            + "</g>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
