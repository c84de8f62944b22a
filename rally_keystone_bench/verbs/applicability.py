"""Which option applies to which target and engine: one table, one check.

An option given where it has no effect (``capacity --engine rally
--locust-workers 2``, ``load --target mock --identity ldap``, ``mock
--stall-every 5`` without ``--stall``) is bad input: exit 2 with one line,
before anything starts. An option counts as given when its value differs
from its parser default.

The table, per verb: option dest -> (the option that decides, the values
under which it applies). ``NONZERO`` means "when that option is set above 0".
The rules are declared by the option groups a verb composes (verbs/groups) and
by the verb for its own options, in its module's ``RULES``; the CLI passes them
to ``check``.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from typing import Any

from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.errors import BenchError

NONZERO = "nonzero"
Rule = tuple[str, Any]  # (deciding dest, allowed values or NONZERO)

# Options of a local Keystone (Deployment's fields, as the CLI spells them).
# (trace is set by run's and gate's own --trace, not a deployment option.)
DEPLOYMENT = tuple(f.name for f in dataclasses.fields(Deployment) if f.name != "trace")
# How a deciding option reads in a message.
_SAY = {
    ("target", "local"): "--target local (a local Keystone)",
    ("existing_cloud", False): "a local Keystone, not to --existing-cloud or --spec",
}


# Options whose flag is not their dest spelled with dashes.
_FLAGS = {"conf": "--set"}


def flag(dest: str) -> str:
    return _FLAGS.get(dest) or "--" + dest.replace("_", "-")


def _applies_when(decider: str, allowed: Any) -> str:
    if allowed == NONZERO:
        return f"{flag(decider)} above 0"
    said = [_SAY.get((decider, v), f"{flag(decider)} {v}") for v in allowed]
    return " or ".join(said)


def check(
    verb: str, rules: Mapping[str, Rule], args: argparse.Namespace, defaults: Mapping[str, Any]
) -> None:
    """BenchError naming the first option of VERB given where it does not apply.

    RULES: option dest -> its rule, in the order checked (the verb module's ``RULES``:
    the ``applies`` of the option groups it composed and its own options' rules).
    """
    for dest, (decider, allowed) in rules.items():
        value = getattr(args, dest, None)
        if not hasattr(args, dest) or value is None or value == defaults.get(dest):
            continue
        derive = _DERIVED.get((verb, decider))
        current = derive(args) if derive else getattr(args, decider, None)
        ok = bool(current) if allowed == NONZERO else current in allowed
        if not ok:
            line = _WORDING.get((verb, dest)) or (
                f"{flag(dest)} applies only to {_applies_when(decider, allowed)}"
                + ("" if decider in _NO_SUFFIX else f", not {_current(decider, current)}")
            )
            raise BenchError(line + _HINTS.get((verb, dest, getattr(args, "engine", None)), ""))


# Where a line of its own says it better, or a user is likely to mean another option.
_SPEC = "--spec describes an existing cloud: use it with --target cloud"
_WORDING = {("capacity", "spec"): _SPEC, ("load", "spec"): _SPEC}
_HINTS = {
    ("capacity", "workers", "locust"): (
        ": the Locust engine's worker processes are --locust-workers K"
    ),
}
# run: --spec names an existing cloud as --existing-cloud does.
_DERIVED = {("run", "existing_cloud"): lambda a: bool(a.existing_cloud or a.spec)}
_NO_SUFFIX = ("existing_cloud", "stall")  # the first half of the line says it all


def _current(decider: str, value: Any) -> str:
    return f"{flag(decider)} {value}"


def defaults_of(parser: argparse.ArgumentParser, verb: str) -> dict[str, Any]:
    """The defaults of VERB's own options (its subparser's)."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction) and verb in action.choices:  # noqa: SLF001
            return {a.dest: a.default for a in action.choices[verb]._actions}  # noqa: SLF001
    return {}
