"""Options given where they have no effect are refused in one line (issue 27, item 7)."""

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.verbs import applicability

CAP = ["capacity", "--scenario", "validate"]
LOAD = ["load", "--scenario", "authenticate"]


@pytest.mark.parametrize(
    "argv, said",
    [
        (CAP + ["--engine", "rally", "--locust-workers", "2"], "--locust-workers applies only"),
        (
            CAP + ["--engine", "locust", "--runner", "rps"],
            "--runner applies only to --engine rally",
        ),
        (CAP + ["--target", "mock", "--nodes", "3", "--db", "postgresql"], "not --target mock"),
        (LOAD + ["--target", "mock", "--identity", "ldap"], "--identity applies only"),
        (LOAD + ["--engine", "rally", "--users", "4"], "--users applies only to --engine locust"),
        (LOAD + ["--target", "local", "--mock-workers", "3"], "--mock-workers applies only"),
        (
            ["run", "--existing-cloud", "--nodes", "2", "--db", "postgresql", "--server", "nginx"],
            "applies only to a local Keystone",
        ),  # fmt: skip
        (["mock", "--stall-every", "5"], "--stall-every applies only to --stall above 0"),
    ],
)
def test_an_option_that_does_not_apply_exits_2_in_one_line(capsys, argv, said):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert said in err


def test_every_rule_names_real_options_of_its_verb():
    parser = cli.build_parser()
    for verb, _ in cli.VERBS:
        known = applicability.defaults_of(parser, verb)
        for dest, (decider, _) in cli.rules_of(verb).items():
            assert dest in known, (verb, dest)
            assert decider in known, (verb, decider)
