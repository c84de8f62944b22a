"""The gate's family verdict: every workload's latency test judged as one family.

Holm's correction over the family (``family.holm``): a test convicts only
when its adjusted p-value reaches alpha. Two rules follow from a family
that cannot prove everything it sees: a slowdown over the threshold that
the corrected test does not confirm is *inconclusive* (more blocks could
tell; the gate extends itself), and a conviction within BUSY_MARGIN on a
busy machine's blocks is inconclusive too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from rally_keystone_bench.verdicts import family, pairing, stats

# A busy machine: other processes above BUSY_OTHER cores (median over a workload's
# clean blocks). There, an A/A gate of keystone 30.0.0 against itself saw one
# workload's candidate 1.22x slower on 12 of 13 blocks (other processes 0.72-0.87
# core, load average 17; doc/source/gate.rst): steady load does not always fall on
# both sides alike. A slowdown within BUSY_MARGIN percent on such blocks is
# inconclusive, never a conviction.
BUSY_OTHER = 0.5
BUSY_MARGIN = 30.0


def corrected(
    j: pairing.Judgement, p_adjusted: float, tests: int, alpha: float, threshold: float
) -> pairing.Judgement:
    """J decided on its Holm-adjusted p-value within a family of TESTS."""
    words = ("slower", "faster")
    text = stats.verdict(j.ratio, p_adjusted, alpha, threshold, *words)
    return dataclasses.replace(
        j,
        p_adjusted=p_adjusted,
        tests=tests,
        verdict=text,
        regression=pairing.beyond(j.ratio, p_adjusted, alpha, threshold),
    )


def judge_family(verdicts: Sequence[pairing.ActionVerdict], alpha: float, threshold: float) -> int:
    """Holm-correct the latency tests of VERDICTS together; returns the family's size.

    An action slower than the threshold whose corrected p-value does not
    reach ALPHA becomes inconclusive: more blocks could tell, so the gate
    extends itself rather than pass it.
    """
    tests = len(verdicts)
    judged = [v for v in verdicts if v.latency is not None and not v.inconclusive]
    adjusted = family.holm([v.latency.p_value for v in judged])
    for v, p_adj in zip(judged, adjusted, strict=True):
        assert v.latency is not None
        v.latency = corrected(v.latency, p_adj, tests, alpha, threshold)
        if not v.latency.regression and pairing.over_threshold(v.latency.ratio, threshold):
            v.inconclusive = (
                f"{stats.format_ratio(v.latency.ratio)} on {v.latency.n_clean} clean blocks, "
                f"but p={v.latency.p_adjusted:.2g} after Holm's correction over {tests} "
                f"tests does not reach alpha {alpha:g}: more blocks needed"
            )
        elif v.latency.regression and not pairing.over_threshold(v.latency.ratio, BUSY_MARGIN):
            busy = busy_load(v)
            if busy is not None:
                v.latency = dataclasses.replace(v.latency, regression=False)
                v.inconclusive = (
                    f"{stats.format_ratio(v.latency.ratio)} on {v.latency.n_clean} clean blocks "
                    f"of a busy machine (other processes {busy:.2f} core median): within the "
                    f"{BUSY_MARGIN:g}% an unchanged Keystone was seen to move there"
                )
    return tests


def busy_load(v: pairing.ActionVerdict) -> float | None:
    """Other processes' median CPU over V's clean blocks when above BUSY_OTHER, else None."""
    seen = [b.interference.other for b in v.blocks if b.set_aside is None and b.interference]
    if not seen:
        return None
    level = pairing.median(seen)
    return level if level > BUSY_OTHER else None
