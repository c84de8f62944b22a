"""The base of an option group, and the rules its options apply under."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from rally_keystone_bench.verbs.applicability import NONZERO, Rule

LOCAL: Rule = ("target", ("local",))
MOCK: Rule = ("target", ("mock",))
LOCUST: Rule = ("engine", ("locust",))
RALLY: Rule = ("engine", ("rally",))
__all__ = ["LOCAL", "LOCUST", "MOCK", "NONZERO", "RALLY", "OptionGroup", "rules"]


class OptionGroup:
    """A group of options: ``add`` declares them on a verb's parser, ``applies`` maps
    each of their dests to the rule it applies under ((deciding dest, allowed values)
    or (deciding dest, NONZERO); a dest missing applies everywhere), and ``settings``
    reads them back from the parsed arguments as a frozen dataclass, defaults resolved
    there."""

    applies: Mapping[str, Rule] = {}

    def add(self, parser: argparse.ArgumentParser) -> None:
        raise NotImplementedError

    def settings(self, args: argparse.Namespace) -> Any:
        raise NotImplementedError


def rules(*parts: OptionGroup | Mapping[str, Rule]) -> dict[str, Rule]:
    """The applicability rules of a verb, in the order they are checked: each group's
    ``applies`` (or a mapping of the verb's own options' rules)."""
    found: dict[str, Rule] = {}
    for part in parts:
        found.update(part.applies if isinstance(part, OptionGroup) else part)
    return found


def fields(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """NAMES as ARGS holds them (every one declared by the group that reads them)."""
    return {n: vars(args)[n] for n in names}
