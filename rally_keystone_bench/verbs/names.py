"""Names a user gives that become part of a path (matrix deployment names).

A name must be unique in its file and safe as one path component: letters,
digits, ``.``, ``_`` and ``-``, not starting with a dot, at most 64
characters. YAML's own rule lets a repeated key silently replace the first:
:func:`load_yaml_unique` refuses it instead.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from rally_keystone_bench.errors import BenchError

_SAFE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")


def check_name(name: object, where: str) -> str:
    """NAME as a string; BenchError when it cannot be one path component."""
    text = str(name)
    if not _SAFE.fullmatch(text):
        raise BenchError(
            f"{where}: deployment name {text!r} is not a safe directory name "
            "(letters, digits, '.', '_', '-'; no leading dot; at most 64 characters)"
        )
    return text


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a mapping with the same key twice."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict:
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        key = str(loader.construct_object(key_node, deep=True))
        if key in seen:
            raise BenchError(
                f"{key!r} appears twice (lines {seen[key]} and {key_node.start_mark.line + 1}): "
                "names must be unique"
            )
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=True)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml_unique(text: str) -> Any:
    """yaml.safe_load, but a key repeated in one mapping is a BenchError."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
