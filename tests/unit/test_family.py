"""The gate's family of tests: Holm's correction and the blocks it needs."""

import math

import numpy as np
import pytest

from rally_keystone_bench.verdicts import family, family_verdict, pairing
from rally_keystone_bench.verdicts.pairing import Bounds, Interference

QUIET = Interference(other=0.3, other_swing=0.1, steal=0.0, generator=0.1)


def blocks(n: int, shift: float, seed: int, sigma: float = 0.02) -> list[pairing.Block]:
    """N blocks of 4 pairs, the candidate SHIFT times the baseline, CPU alike."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        base = 0.05 * rng.lognormal(0, sigma, 4)
        cand = 0.05 * shift * rng.lognormal(0, sigma, 4)
        out.append(
            pairing.make_block(i, 2.0 * i, 2.0 * i + 2, list(base), list(cand), 0.01, 0.01, QUIET)
        )
    return out


def gate(actions: list[list[pairing.Block]], alpha: float = 0.01) -> pairing.GateResult:
    """Judge each action's blocks as one family, as blocks.judge_runs does."""
    needed = max(8, family.blocks_needed(alpha, len(actions)))
    verdicts = [
        pairing.judge_action(f"workload {i}", "keystone.validate_token", b, 10.0, alpha,
                             Bounds(), needed)
        for i, b in enumerate(actions)
    ]  # fmt: skip
    tests = family_verdict.judge_family(verdicts, alpha, 10.0)
    return pairing.GateResult("A", "B", 10.0, alpha, 2.0, Bounds(), verdicts, tests=tests,
                              blocks_needed=needed)  # fmt: skip


def test_holm_matches_the_step_down_by_hand():
    # m = 4: 0.001*4, max(that, 0.01*3), max(.., 0.02*2), max(.., 0.04*1)
    assert family.holm([0.02, 0.001, 0.04, 0.01]) == pytest.approx([0.04, 0.004, 0.04, 0.03])
    assert family.holm([0.5, 0.9]) == [1.0, 1.0]
    adjusted = family.holm([0.01, math.nan])
    assert adjusted[0] == 0.01 and math.isnan(adjusted[1])


@pytest.mark.parametrize(
    ("tests", "needed"), [(1, 8), (2, 9), (11, 12), (20, 12), (22, 13), (40, 13), (41, 14)]
)
def test_blocks_needed_reach_the_strictest_corrected_level(tests, needed):
    n = family.blocks_needed(0.01, tests)
    assert n == needed
    assert family.signed_rank_floor(n) < 0.01 / tests <= family.signed_rank_floor(n - 1)


def test_22_null_metrics_leaning_one_way_at_the_p_floor_do_not_convict():
    # The false alarm seen: 8 blocks all 1.11x one way, p = 2/2**8 = 0.0078 < 0.01.
    leaning = [blocks(8, 1.11, seed) for seed in range(22)]
    res = gate(leaning)
    assert res.blocks_needed == 13
    assert res.exit_code == 3, res.headline()  # too few blocks: inconclusive, not a conviction
    assert "13 needed" in res.headline()


def test_22_null_metrics_with_the_blocks_they_need_pass():
    res = gate([blocks(13, 1.0, seed) for seed in range(22)])
    assert res.exit_code == 0, res.headline()
    assert "over 22 tests (Holm)" in res.headline()


def test_a_true_2x_change_on_one_of_22_metrics_still_convicts():
    actions = [blocks(13, 1.0, seed) for seed in range(21)] + [blocks(13, 2.0, 99)]
    res = gate(actions)
    assert res.exit_code == 1
    (slow,) = res.regressions
    assert slow.workload == "workload 21"
    assert slow.latency.p_adjusted < 0.01 < 22 * slow.latency.p_value * 2


def test_slower_than_the_threshold_but_not_significant_after_correction_is_inconclusive():
    # 1.2x on 13 blocks with one block the other way: p = 4/2**13 raw, x22 > 0.01.
    b = blocks(13, 1.2, 5)
    b[0].ratios = [0.999] * 4  # the smallest rank: W- = 1, p = 4 / 2**13
    res = gate([b] + [blocks(13, 1.0, seed) for seed in range(21)])
    (v,) = [a for a in res.actions if a.workload == "workload 0"]
    assert v.latency.p_value < 0.01 <= v.latency.p_adjusted
    assert v.inconclusive and "more blocks needed" in v.inconclusive
    assert res.exit_code == 3  # the gate extends itself; never a pass


def test_the_gate_sizes_each_workload_for_the_blocks_its_family_needs():
    from pathlib import Path

    from rally_keystone_bench.verbs import gate
    from rally_keystone_bench.verdicts.blocks import GateSettings

    tasks = Path(__file__).resolve().parents[2] / "rally_keystone_bench" / "data" / "tasks"
    settings = GateSettings(10.0, 0.01, 2.0, 8)
    # 11 paired workloads: 12 blocks of 2 s, and 2 spare.
    cloud = gate.duration_args(tasks / "gate-cloud.yaml", {}, settings)
    assert cloud == {"seconds": 28, "issue_seconds": 28}
    # 2 workloads: 9 blocks (2/2**9 < 0.01/2), and 2 spare.
    quick = gate.duration_args(tasks / "gate.yaml", {}, settings)
    assert quick == {"issue_seconds": 22, "validate_seconds": 22}
    assert gate.duration_args(tasks / "gate.yaml", {"issue_seconds": 5}, settings) == {}


def test_a_modest_slowdown_on_a_busy_machine_is_inconclusive_a_large_one_convicts():
    busy = Interference(other=0.85, other_swing=0.1, steal=0.0, generator=0.2)

    def on_busy(shift: float) -> list[pairing.Block]:
        out = blocks(13, shift, 3)
        for b in out:
            b.interference = busy
        return out

    # The A/A false alarm seen at load 17: 1.22x on every block, CPU alike.
    seen = gate([on_busy(1.22)])
    (v,) = seen.actions
    assert seen.exit_code == 3 and "busy machine" in v.inconclusive
    assert "other processes 0.85 core median" in v.inconclusive
    # 150 ms added to a 50 ms request stays a regression, busy or not.
    assert gate([on_busy(4.0)]).exit_code == 1
    # The same 1.22x on a quiet machine convicts.
    assert gate([blocks(13, 1.22, 3)]).exit_code == 1
