"""The gate's paired statistics on synthetic block series.

Each block holds a few pairs of requests; the machine's speed drifts during
the run (a ramp of +50 %) and moves both sides of a pair alike, as it does
when the requests of a pair are sent within a second of each other.
"""

import json

import numpy as np

from rally_keystone_bench.report import gate as gate_report
from rally_keystone_bench.verdicts import pairing
from rally_keystone_bench.verdicts.pairing import Bounds, Interference

QUIET = Interference(other=0.3, other_swing=0.1, steal=0.0, generator=0.1)
SWINGING = Interference(other=1.0, other_swing=0.9, steal=0.0, generator=0.1)


def series(
    n_blocks: int = 20,
    shift: float = 1.0,
    cpu_shift: float = 1.0,
    ramp: float = 0.5,
    seed: int = 7,
    disturbed: set[int] = frozenset(),
) -> list[pairing.Block]:
    """N_BLOCKS blocks of 4 pairs; the candidate slower by SHIFT, its CPU by CPU_SHIFT."""
    rng = np.random.default_rng(seed)
    blocks = []
    for i in range(n_blocks):
        drift = 1.0 + ramp * i / (n_blocks - 1)  # both sides, +50 % by the end
        base = 0.300 * drift * rng.lognormal(0, 0.08, 4)
        cand = 0.300 * drift * shift * rng.lognormal(0, 0.08, 4)
        base_cpu = 0.250 * rng.lognormal(0, 0.03)
        cand_cpu = 0.250 * cpu_shift * rng.lognormal(0, 0.03)
        blocks.append(
            pairing.make_block(
                i, 2.0 * i, 2.0 * i + 2, list(base), list(cand), base_cpu, cand_cpu,
                SWINGING if i in disturbed else QUIET,
            )
        )  # fmt: skip
    return blocks


def result(*verdicts: pairing.ActionVerdict) -> pairing.GateResult:
    return pairing.GateResult("A", "B", 10.0, 0.01, 2.0, Bounds(), list(verdicts))


def test_drift_on_both_sides_is_no_regression():
    # Pooled, the second half of either side is 25 % slower than the first;
    # paired block by block, nothing changed.
    for seed in range(10):
        v = pairing.judge_action("issue", "keystone.issue_token", series(seed=seed))
        assert not v.regression, v.latency
        assert result(v).exit_code == 0
        assert 0.9 < v.latency.ratio < 1.1


def test_twenty_percent_on_one_side_is_a_regression():
    v = pairing.judge_action("issue", "keystone.issue_token", series(shift=1.2))
    assert v.regression
    assert 1.15 < v.latency.ratio < 1.25
    assert v.latency.ci_low > 1.1
    res = result(v)
    assert res.exit_code == 1
    assert res.headline().startswith("REGRESSION")
    assert "keystone.issue_token 1.2" in res.headline()


def test_slower_without_more_cpu_waits():
    v = pairing.judge_action("issue", "keystone.issue_token", series(shift=1.5))
    assert v.kind == "waits"
    assert "waits" in gate_report.format_text(result(v))


def test_slower_with_as_much_more_cpu_burns_cpu():
    # 300 -> 540 ms a request; CPU 250 -> 500 ms: the added CPU is the added time.
    v = pairing.judge_action("issue", "keystone.issue_token", series(shift=1.8, cpu_shift=2.0))
    assert v.cpu.verdict.startswith("2.0") and v.cpu.verdict.endswith("x more CPU")
    assert not v.cpu.regression  # evidence: it names the kind, it convicts nothing
    assert v.kind == "burns CPU"


def test_the_kind_follows_the_share_of_added_time_that_is_cpu():
    assert pairing.kind_of(219.0, 98.0) == "burns CPU and waits"
    assert pairing.kind_of(219.0, 160.0) == "burns CPU"
    assert pairing.kind_of(219.0, 20.0) == "waits"
    assert pairing.kind_of(219.0, -5.0) == "waits"


def test_more_cpu_alone_convicts_nothing():
    # The false alarm seen on a busy machine: 1.11x more CPU on 8 blocks, latency unchanged.
    v = pairing.judge_action("issue", "keystone.issue_token", series(cpu_shift=1.5))
    assert v.cpu.p_value < 0.01 and v.cpu.ratio > 1.4
    assert not v.regression
    assert result(v).exit_code == 0


def test_disturbed_blocks_are_set_aside():
    blocks = series(n_blocks=20, disturbed={3, 4, 5})
    # The disturbed blocks look like a huge regression; set aside, they do not count.
    for i in (3, 4, 5):
        blocks[i].ratios = [r * 3 for r in blocks[i].ratios]
    v = pairing.judge_action("issue", "keystone.issue_token", blocks)
    assert v.n_clean == 17
    assert [b.index for b in v.blocks if b.set_aside] == [3, 4, 5]
    assert "swung" in blocks[3].set_aside
    assert v.latency.n_clean == 17
    assert not v.regression


def test_too_few_clean_blocks_is_inconclusive_never_a_regression():
    blocks = series(n_blocks=10, shift=2.0, disturbed=set(range(4)))
    v = pairing.judge_action("issue", "keystone.issue_token", blocks, min_clean=8)
    assert v.inconclusive and not v.regression
    res = result(v)
    assert res.exit_code == 3
    assert res.headline().startswith("INCONCLUSIVE")
    assert "6 clean blocks, 8 needed" in res.headline()
    assert "recheck" in gate_report.format_text(res)


def test_a_regression_elsewhere_wins_over_inconclusive():
    slow = pairing.judge_action("issue", "keystone.issue_token", series(shift=1.5))
    unsure = pairing.judge_action("validate", "keystone.validate_token", series(n_blocks=4))
    assert result(slow, unsure).exit_code == 1


def test_gate_json_holds_the_per_block_ratios():
    v = pairing.judge_action("issue", "keystone.issue_token", series(disturbed={2}))
    d = json.loads(json.dumps(result(v).as_dict()))
    (action,) = d["actions"]
    assert len(action["block_ratios"]) == 19
    assert len(action["blocks"]) == 20
    assert action["blocks"][2]["set_aside"]
    assert d["exit_code"] == 0


def test_junit_skips_inconclusive_and_fails_regressions():
    slow = pairing.judge_action("issue", "keystone.issue_token", series(shift=1.5))
    unsure = pairing.judge_action("validate", "keystone.validate_token", series(n_blocks=4))
    xml = gate_report.render_junit(result(slow, unsure))
    assert 'failures="1"' in xml and 'skipped="1"' in xml
