"""Option groups (verbs/groups): each declares its options once, says where they apply
and builds its settings from them, defaults resolved there."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from rally_keystone_bench import boundary
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verbs import groups

GROUPS = [
    groups.Target(default="local"),
    groups.Target(default="mock"),
    groups.Mock(5.0, "ms", True),
    groups.Mock(20.0, "ms", False),
    groups.Deployment(),
    groups.Deployment(workers=False),
    groups.Engine(["rally", "locust"], "e", "locust_workers", "k", runner=True, ruled=True),
    groups.VerdictRules(),
    groups.Identity(),
    groups.ConfSet(),
    groups.Tracing(),
    groups.Counters(),
    groups.Mock(0.0, "ms", True, serve=True),
]


def parsed(group: groups.OptionGroup, *argv: str) -> argparse.Namespace:
    parser = boundary.OneLineParser(prog="t")
    group.add(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: type(g).__name__)
def test_a_group_rules_only_the_options_it_declares(group):
    args = parsed(group)
    assert set(group.applies) <= set(vars(args))
    for decider, _allowed in group.applies.values():
        assert decider in ("target", "engine", "trace", "existing_cloud", *vars(args))


@pytest.mark.parametrize(
    "group",
    [g for g in GROUPS if not isinstance(g, (groups.Deployment, groups.ConfSet))],
    ids=lambda g: type(g).__name__,
)
def test_settings_are_frozen_and_take_the_declared_defaults(group):
    args = parsed(group)
    if isinstance(group, groups.Mock):
        args.target = "mock"  # the mock's settings read which target is measured
    settings = group.settings(args)
    assert dataclasses.is_dataclass(settings)
    field = dataclasses.fields(settings)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(settings, field, None)


def test_identity_settings_give_both_gate_sides_only_the_options_given():
    identity = groups.Identity()
    settings = identity.settings(parsed(identity, "--identity", "ldap", "--ldap-users", "3"))
    assert settings.given() == {"identity": "ldap", "ldap_users": 3}


def test_the_mock_verb_and_target_mock_read_the_same_settings_from_their_own_flags():
    served, targeted = groups.Mock(0.0, "ms", True, serve=True), groups.Mock(5.0, "ms", True)
    assert served.settings(parsed(served)).workers == 1  # --workers' default: the mock's
    argv = ["--workers", "3", "--service-time", "2", "--stall", "1", "--stall-every", "4"]
    mine = served.settings(parsed(served, *argv))
    args = parsed(targeted, *[a.replace("--", "--mock-") for a in argv])
    args.target = "mock"
    assert mine == targeted.settings(args) == groups.target.MockSettings(3, 2.0, 1.0, 4.0)
    assert served.applies == {"stall_every": ("stall", groups.base.NONZERO)}
    with pytest.raises(SystemExit):  # the mock verb's stall: not negative, by its type
        parsed(served, "--stall", "-1")


def test_run_observe_off_turns_tracing_and_profiling_off():
    run = groups.Tracing()
    settings = run.settings(parsed(run, "--observe", "off"))
    assert (settings.trace, settings.profile, settings.trace_rate) == (False, False, 1.0)
    with pytest.raises(BenchError, match="--trace-rate must be 0-1, not 2"):
        run.settings(parsed(run, "--trace-rate", "2")).checked_rate()


def test_gate_refuses_a_negative_sql_increase():
    gate = groups.Counters()
    with pytest.raises(BenchError, match="--max-sql-increase must be 0 or more, not -1"):
        gate.settings(parsed(gate, "--max-sql-increase", "-1"))


def test_the_deployment_group_builds_a_deployment_of_the_options_given():
    group = groups.Deployment()
    found = group.unchecked(parsed(group, "--db", "postgresql", "--set", "token.provider=jws"))
    assert found.db == "postgresql" and found.conf == {"token.provider": "jws"}


def test_rules_keep_the_order_of_the_groups_given():
    target, engine = groups.Target(default="local"), GROUPS[6]
    assert list(groups.rules(target, engine, {"x": groups.LOCAL})) == [
        "spec",
        "locust_workers",
        "runner",
        "x",
    ]


def test_a_deployment_group_without_workers_leaves_the_verbs_workers_alone():
    """load's --workers are Locust's (its server's are --server-workers): never the server's."""
    group = groups.Deployment(workers=False)
    args = parsed(group, "--threads", "2")
    args.workers = 3  # the verb's own --workers
    assert (group.unchecked(args).workers, group.unchecked(args).threads) == (2, 2)
    assert groups.Deployment().unchecked(argparse.Namespace(workers=3)).workers == 3
