"""The default gate's passes: the cache-off twins, their sides, the total-time line."""

from __future__ import annotations

import time
from types import SimpleNamespace

from rally_keystone_bench import cli
from rally_keystone_bench.driver import gate_passes
from rally_keystone_bench.verbs import gate, options


def deployments(args):
    """gate's side_deployments as its door calls them, from the parsed ARGS."""
    asked = options.read(gate.GateArgs, args)
    identity, conf = gate.IDENTITY.settings(args), gate.CONF.settings(args)
    return gate.side_deployments(asked, identity, conf, gate.TRACING.settings(args).trace)


def test_the_cache_off_pair_is_each_side_without_its_cache_and_nothing_else() -> None:
    args = cli.build_parser().parse_args(["gate", "--baseline", "keystone", "--candidate", "k2"])
    deps, _ = deployments(args)
    both = gate_passes.with_cache_off(deps)
    assert sorted(both) == ["baseline", "baseline_nocache", "candidate", "candidate_nocache"]
    assert deps["baseline"].cache == "memcached"
    for side in ("baseline", "candidate"):
        twin = both[gate_passes.cache_off_name(side)]
        assert twin.cache == "none"
        assert twin.keystone == deps[side].keystone and twin.conf == deps[side].conf


def test_a_sides_servers_and_run_dirs_span_both_pairs(tmp_path) -> None:
    def ks(name: str, pid: int):
        pids = {"server": pid, "memcached": pid + 1}
        return SimpleNamespace(pids=pids, run_dir=tmp_path / name, openrc_path=tmp_path / "rc")

    keystones = {
        "baseline": ks("b", 10),
        "candidate": ks("c", 20),
        "baseline_nocache": ks("b0", 30),
        "candidate_nocache": ks("c0", 40),
    }
    assert gate_passes.server_trees(keystones) == {"baseline": [10, 30], "candidate": [20, 40]}
    dirs = gate_passes.run_dirs(keystones)
    assert dirs["candidate"] == [tmp_path / "c", tmp_path / "c0"]


def test_the_total_line_gives_minutes_and_the_setup() -> None:
    line = gate_passes.total_line(time.monotonic() - 600, {"start": 41.2, "seeding": 19.6})
    assert line.startswith("gate: 600 s from start to verdict (10.0 min; start 41 s, seeding 20 s)")


def test_both_sides_are_traced_or_neither_whatever_a_sides_own_trace_says() -> None:
    """gate's --trace decides for both sides, as --identity and --ldap-* do."""
    argv = ["gate", "--baseline", "keystone", "--candidate", "k2", "--candidate-option", "trace=on"]
    off, _ = deployments(cli.build_parser().parse_args([*argv, "--trace", "off"]))
    on, _ = deployments(cli.build_parser().parse_args(argv))
    assert [d.trace for d in off.values()] == [False, False]
    assert [d.trace for d in on.values()] == [True, True]
