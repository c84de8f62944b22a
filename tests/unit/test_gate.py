"""gate: pooling rounds per side, the verdict from compare's engine, side options."""

import sys
from pathlib import Path

import pytest

from rally_keystone_bench import cli, gate, results
from rally_keystone_bench.errors import BenchError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402


def rounds(n_rounds: int, seed: int, scale: float = 1.0) -> list[list[results.Workload]]:
    """N_ROUNDS runs of one password-token workload of 40 iterations."""
    out = []
    for r in range(n_rounds):
        data = synthetic.iterations(40, scale={"keystone.issue_token": scale}, seed=seed * 100 + r)
        out.append(results.from_report(synthetic.report([synthetic.workload(data)])))
    return out


def test_same_release_on_both_sides_passes():
    result = gate.compare_sides(rounds(3, 1), rounds(3, 2), 10.0, 0.01, "A", "B")
    assert result.exit_code == 0
    (wc,) = result.workloads
    issue = next(c for c in wc.actions if c.name == "keystone.issue_token")
    assert issue.n_base == issue.n_cand == 120  # three rounds of 40 pooled


def test_slower_candidate_fails_and_names_the_action():
    result = gate.compare_sides(rounds(3, 1), rounds(3, 2, scale=1.5), 10.0, 0.01, "A", "B")
    assert result.exit_code == 1
    assert "keystone.issue_token" in result.headline()


def test_side_options_reach_the_deployment():
    dep = gate.side_deployment("keystone==30.0.0", ["password_hash_rounds=12"], "--c")
    assert dep.keystone == "keystone==30.0.0"
    assert dep.password_hash_rounds == 12


def test_unknown_side_option_is_refused_by_name():
    with pytest.raises(BenchError, match="colour"):
        gate.side_deployment("keystone", ["colour=blue"], "--candidate-option")


def test_option_without_equals_is_refused():
    with pytest.raises(BenchError, match="KEY=VALUE"):
        gate.side_deployment("keystone", ["workers"], "--candidate-option")


def test_cli_parses_the_gate_command_line():
    args = cli.build_parser().parse_args(
        ["gate", "--baseline", "keystone==30.0.0", "--candidate", "../keystone",
         "--candidate-option", "password_hash_rounds=12"]
    )  # fmt: skip
    assert args.task == "tasks/gate.yaml"
    assert args.rounds == 3 and args.threshold == 10.0
    assert args.candidate_option == ["password_hash_rounds=12"]
    assert args.baseline_option == []


def test_bad_rounds_exit_2_before_anything_starts(capsys):
    rc = cli.main(["gate", "--baseline", "keystone", "--candidate", "keystone", "--rounds", "0"])
    assert rc == 2
    assert "--rounds" in capsys.readouterr().err


def _rounds_scaled(scales: list[float], seed: int) -> list[list[results.Workload]]:
    return [rounds(1, seed * 10 + i, scale=s)[0] for i, s in enumerate(scales)]


def test_a_slowdown_in_some_rounds_only_is_not_a_regression():
    # Two of three candidate rounds disturbed by other work on the machine:
    # pooled, the candidate is slower; round by round, it is not always.
    base = _rounds_scaled([1.0, 1.0, 1.0], 1)
    cand = _rounds_scaled([1.0, 1.3, 1.4], 2)
    result = gate.compare_sides(base, cand, 10.0, 0.01, "A", "B")
    issue = next(c for c in result.workloads[0].actions if c.name == "keystone.issue_token")
    assert issue.significant and issue.ratio > 1.1  # the pooled test alone would fail it
    assert result.exit_code == 0
    assert "not in every round" in issue.verdict
    assert len(issue.round_ratios) == 3 and issue.round_ratios[0] < 1.1


def test_a_slowdown_in_every_round_is_a_regression():
    base = _rounds_scaled([1.0, 1.0, 1.0], 1)
    cand = _rounds_scaled([1.3, 1.3, 1.4], 2)
    result = gate.compare_sides(base, cand, 10.0, 0.01, "A", "B")
    assert result.exit_code == 1
    issue = next(c for c in result.workloads[0].actions if c.name == "keystone.issue_token")
    assert all(r > 1.1 for r in issue.round_ratios)
