"""A verdict's promise for the whole verb: Holm's correction over every test it makes.

A gate judges many workloads, a compare many actions. Each test at alpha
0.01 alone would give a family of 22 tests about a one-in-five chance of a
false alarm on unchanged code. Holm's step-down procedure keeps the chance
that *any* test of the family convicts unchanged code at or below alpha,
whatever the tests' dependence, and is uniformly more powerful than plain
Bonferroni: the smallest p-value is held to alpha / m, the next to
alpha / (m - 1), and so on, stopping at the first that fails.

The paired gate tests each workload's block ratios with the Wilcoxon
signed-rank test, whose smallest possible p-value with n blocks (all of
them one way, no ties) is 2 / 2**n. A family of m tests can only convict
when that floor is below alpha / m: :func:`blocks_needed` says how many
clean blocks that takes, and with fewer the gate is inconclusive, never
"no significant change" by construction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given (NaN stays NaN and is not counted).

    Reject the hypotheses whose adjusted p-value is below alpha: the
    family-wise error rate is then at most alpha.
    """
    finite = [(p, i) for i, p in enumerate(p_values) if math.isfinite(p)]
    m = len(finite)
    out = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(finite)):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def signed_rank_floor(n: int) -> float:
    """The smallest two-sided p-value of the exact signed-rank test with N differences."""
    return 2.0 / 2.0**n if n > 0 else 1.0


def blocks_needed(alpha: float, tests: int) -> int:
    """Clean blocks a signed-rank test needs to reach ALPHA / TESTS (Holm's strictest level)."""
    level = alpha / max(1, tests)
    n = 1
    while signed_rank_floor(n) >= level:
        n += 1
    return n


def describe(alpha: float, tests: int) -> str:
    """One line for reports: what the correction is and what it costs."""
    if tests <= 1:
        return f"one test at alpha {alpha:g}"
    return (
        f"Holm's correction over {tests} tests: the false-alarm rate of the whole verdict "
        f"is at most {alpha:g}; the most significant test must reach {alpha / tests:.2g}"
    )
