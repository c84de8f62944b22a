"""One flag, one meaning: a flag declared by several verbs has one type, default and choices.

The test walks the parser cli.py builds (every verb, and keystone's sub-verbs)
and compares each flag across the verbs that declare it. A user who learnt
``--workers`` in one verb must not get another thing from it in the next.
"""

from __future__ import annotations

import argparse
import ast
import collections
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.verbs.options import DeprecatedAlias

# A default that is part of the verb's own meaning, said in each verb's --help:
# load probes the mock with Locust for a few seconds, capacity searches a local
# Keystone with Rally, each probe warmed up for a minute.
PER_VERB_DEFAULTS = {
    "--target": "load measures the mock by default, capacity a local Keystone",
    "--engine": "load is the Locust engine's verb, capacity runs on Rally by default",
    "--warmup": "capacity warms each probe up for 60 s; load's one probe keeps every second",
    "--mock-service-time": "capacity's mock is slower (20 ms: 50 rps a worker), load's 5 ms",
}
# Disagreements not fixed yet, with where the fix goes. None left (issue 43): a new
# disagreement is fixed, not listed. --locust-workers and --scenario are declared once
# (verbs/options.py); --workload meant three things: scale's became --request, cleanup's
# --workload-id, history's filter kept it (each old spelling an alias for one release).
KNOWN_DISAGREEMENTS: dict[str, str] = {}


REQUIRED = object()  # the "default" of a flag its verb requires


def verb_parsers(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(verb, its parser) for every verb below PARSER, sub-verbs as "keystone up"."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix}{name}", sub
                yield from verb_parsers(sub, f"{prefix}{name} ")


def type_of(kind: Any) -> Any:
    """A comparable form of an argparse type: boundary.number_in's by its bounds and kind."""
    if kind is None:
        return None
    cells = getattr(kind, "__closure__", None) or ()
    names = getattr(getattr(kind, "__code__", None), "co_freevars", ())
    bound = dict(zip(names, (c.cell_contents for c in cells), strict=True))
    if bound:
        return (kind.__qualname__, tuple(sorted(bound.items(), key=lambda kv: kv[0])))
    return getattr(kind, "__qualname__", repr(kind))


def declarations() -> dict[str, dict[str, dict[str, Any]]]:
    """flag -> verb -> what it is there (action, type, default, choices)."""
    found: dict[str, dict[str, dict[str, Any]]] = collections.defaultdict(dict)
    for verb, parser in verb_parsers(cli.build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, DeprecatedAlias)):
                continue  # a deprecated spelling is checked by its own test
            for flag in action.option_strings:
                if flag.startswith("--"):
                    found[flag][verb] = {
                        "action": type(action).__name__,
                        "type": type_of(action.type),
                        "default": REQUIRED if action.required else action.default,
                        "choices": sorted(action.choices) if action.choices else None,
                    }
    return found


def disagreements() -> dict[str, list[str]]:
    """flag -> what differs between the verbs that declare it ("default: load 5.0, ...")."""
    out = {}
    for flag, by_verb in declarations().items():
        fields = ("action", "type", "choices")
        fields += () if flag in PER_VERB_DEFAULTS else ("default",)
        differs = []
        for field in fields:
            # a verb that requires the flag has no default to disagree with
            values = {v: d[field] for v, d in by_verb.items() if d[field] is not REQUIRED}
            if len({repr(v) for v in values.values()}) > 1:
                differs.append(f"{field}: " + ", ".join(f"{v} {x!r}" for v, x in values.items()))
        if differs:
            out[flag] = differs
    return out


def test_a_flag_of_several_verbs_has_one_type_default_and_choices():
    found = {f: d for f, d in disagreements().items() if f not in KNOWN_DISAGREEMENTS}
    assert found == {}


def test_known_disagreements_are_still_there():
    """A fixed disagreement comes off the list, so that it cannot come back unseen."""
    assert sorted(set(KNOWN_DISAGREEMENTS) - set(disagreements())) == []


def test_each_per_verb_default_still_differs():
    """A default that became one comes off PER_VERB_DEFAULTS."""
    found = declarations()
    defaults = {
        f: {repr(d["default"]) for d in found[f].values() if d["default"] is not REQUIRED}
        for f in PER_VERB_DEFAULTS
    }
    same = [f for f, seen in defaults.items() if len(seen) < 2]
    assert same == []


def test_the_walk_sees_every_verb_and_what_differs():
    verbs = {verb for by_verb in declarations().values() for verb in by_verb}
    assert {"capacity", "load", "run", "keystone up", "mock", "gate", "history"} <= verbs
    # load's --target defaults to the mock and capacity's to a local Keystone:
    # without its entry in PER_VERB_DEFAULTS the check would say so.
    target = declarations()["--target"]
    assert target["load"]["default"] == "mock" and target["capacity"]["default"] == "local"
    assert "--target" not in disagreements()


def test_number_types_compare_by_their_bounds():
    from rally_keystone_bench import boundary

    assert type_of(boundary.number_in(1, None, int)) == type_of(boundary.positive_int)
    assert type_of(boundary.number_in(0, None, int)) != type_of(boundary.positive_int)
    assert type_of(int) != type_of(boundary.positive_int)


@pytest.mark.parametrize("flag", ["--workers", "--locust-workers"])
def test_load_takes_locust_workers_and_its_old_spelling_with_a_note(flag, capsys):
    args = cli.build_parser().parse_args(["load", "--scenario", "validate", flag, "3"])
    assert args.workers == 3
    err = capsys.readouterr().err
    if flag == "--workers":
        assert err.splitlines() == [
            "keystone-bench: --workers is deprecated here, use --locust-workers "
            "(the old spelling goes in the next release)"
        ]
    else:
        assert err == ""


def test_the_old_spelling_is_not_in_load_help(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["load", "--help"])
    out = capsys.readouterr().out
    assert "--locust-workers K" in out
    assert re.search(r"(?<![\w-])--workers\b", out) is None


SCALE = ["scale", "--dimension", "d", "--values", "1"]


@pytest.mark.parametrize(
    "argv, dest, value, old, new",
    [
        ([*SCALE, "--workload", "authenticate"], "request", "authenticate",
         "--workload", "--request"),
        (["cleanup", "--workload-id", "4a88fea2", "--workload", "0badcafe"], "workload",
         ["4a88fea2", "0badcafe"], "--workload", "--workload-id"),
    ],
)  # fmt: skip
def test_a_renamed_flag_keeps_its_old_spelling_for_a_release(argv, dest, value, old, new, capsys):
    """scale's --workload (a request) and cleanup's (a workload's uuid), renamed: the old
    spelling still works, appends where the new one appends, and says what to use."""
    args = cli.build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    assert capsys.readouterr().err.splitlines() == [
        f"keystone-bench: {old} is deprecated here, use {new} "
        "(the old spelling goes in the next release)"
    ]


def test_the_old_spelling_keeps_the_new_ones_choices(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args([*SCALE, "--workload", "nosuch"])
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err


def test_only_history_names_a_workload_with_workload():
    assert sorted(declarations()["--workload"]) == ["history"]
    assert declarations()["--request"]["scale"]["choices"] == [
        "authenticate",
        "validate",
        "validate-catalog",
    ]


# -- one dest, one help: the option groups (verbs/groups) declare each once -------------
# A flag whose dest differs between verbs, with why.
PER_VERB_DESTS = {
    "--locust-workers": "load keeps dest workers, which its deprecated --workers also sets",
}
# A flag whose help differs between verbs because it means the verb's own thing there
# (or says the verb's own default). A new flag of several verbs says one thing.
PER_VERB_HELP = {
    "--alpha": "compare and gate judge runs, history the change points of a series",
    "--engine": "load probes once, capacity probes every step (their defaults differ)",
    "--force": "capacity and load pass a rate ceiling, scale a data size limit",
    "--html": "compare's page of an A/B, history's of its series",
    "--locust-workers": "load waits for --expect-workers with 0; capacity starts its own",
    "--mock-service-time": "the defaults differ (PER_VERB_DEFAULTS)",
    "--out": "history's export file, report's directory",
    "--port": "mock's own port, a local Keystone's elsewhere",
    "--profile": "run profiles its Keystone, gate both sides",
    "--run-dir": "cleanup reads its openrc, mock and keystone keep their files there",
    "--scenario": "capacity searches two token paths, load probes any",
    "--spec": "cleanup's admin credentials; capacity's and load's target, run's cloud",
    "--target": "the defaults differ (PER_VERB_DEFAULTS)",
    "--task": "gate's and matrix's default tasks differ",
    "--task-args": "one task (gate, matrix) or several (run)",
    "--threshold": "compare's slowdown, gate's slowdown or CPU growth",
    "--trace": "run traces its Keystone, gate both sides and judges the counts",
    "--warmup": "the defaults differ (PER_VERB_DEFAULTS)",
    "--workers": "the mock's processes, a local Keystone's elsewhere",
}


def differing(field: str) -> set[str]:
    """The flags declared by several verbs with more than one FIELD (dest or help)."""
    found: dict[str, set[str]] = collections.defaultdict(set)
    for _verb, parser in verb_parsers(cli.build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, DeprecatedAlias)):
                continue
            for flag in action.option_strings:
                if flag.startswith("--"):
                    found[flag].add(repr(getattr(action, field)))
    return {flag for flag, seen in found.items() if len(seen) > 1}


@pytest.mark.parametrize("field, known", [("dest", PER_VERB_DESTS), ("help", PER_VERB_HELP)])
def test_a_flag_of_several_verbs_has_one_dest_and_one_help(field, known):
    """A flag declared twice with another dest or help is a second home: declare it once
    (an option group), or say here why it differs; one that became one comes off."""
    assert sorted(differing(field) - set(known)) == []
    assert sorted(set(known) - differing(field)) == []


def test_no_verb_reads_an_option_through_getattr_with_a_default_of_its_own():
    """A verb's defaults live in its declarations: the option groups (verbs/groups) read
    what they declared; applicability's check reads options by their dest, by design."""
    verbs_dir = Path(cli.__file__).parent / "verbs"
    found = [
        f"{path.relative_to(verbs_dir)}:{n}"
        for path in sorted(verbs_dir.rglob("*.py"))
        if path.parent.name != "groups" and path.name != "applicability.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "getattr(args" in line
    ]
    assert found == []


def _verb_entries() -> dict[str, set[str]]:
    """Per verb module: the functions cli.py calls with the parsed arguments (func)."""
    found: dict[str, set[str]] = collections.defaultdict(set)
    for _verb, sub in verb_parsers(cli.build_parser()):
        func = sub.get_default("func")
        if func is not None:
            found[func.__module__.rsplit(".", 1)[-1]].add(func.__name__)
    return found


def _takes_the_namespace(node: ast.FunctionDef) -> bool:
    params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
    return any("Namespace" in ast.unparse(a.annotation or ast.Constant("")) for a in params)


def _reads_past_the_door(entry: ast.FunctionDef) -> list[str]:
    """Where ENTRY, which calls at_the_door(args), reads ARGS outside that one call."""
    doors = [
        node
        for node in ast.walk(entry)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "at_the_door"
    ]
    allowed = {
        id(a) for door in doors for a in door.args if isinstance(a, ast.Name) and a.id == "args"
    }
    return [
        f"line {node.lineno}"
        for node in ast.walk(entry)
        if isinstance(node, ast.Name) and node.id == "args" and id(node) not in allowed
    ] + ([] if len(doors) == 1 and len(allowed) == 1 else [f"{len(doors)} door calls"])


def test_nothing_below_a_verbs_main_takes_the_namespace():
    """A verb reads its options once, at its door, into frozen settings: its entry (main,
    keystone's sub-verbs) or one ``at_the_door(args)`` the entry calls, after which the
    entry reads nothing from the Namespace; every other function gets the settings or
    plain values, never the parsed arguments."""
    verbs_dir = Path(cli.__file__).parent / "verbs"
    entries = _verb_entries()
    taking, past_the_door = [], []
    for name, _help in cli.VERBS:
        tree = ast.parse((verbs_dir / f"{name}.py").read_text())
        functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
        doors = [f for f in functions if f.name == "at_the_door"]
        assert len(doors) <= 1, f"{name}: one door"
        for node in functions:
            if node.name in entries[name]:
                if "at_the_door(" in ast.unparse(node):  # then it reads nothing else
                    past_the_door += [
                        f"{name}.{node.name}: {w}" for w in _reads_past_the_door(node)
                    ]
            elif node.name != "at_the_door" and _takes_the_namespace(node):
                taking.append(f"{name}.{node.name}")
    assert entries["keystone"] == {"keystone_up", "keystone_down", "keystone_status"}
    assert taking == []
    assert past_the_door == []
