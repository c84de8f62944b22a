"""Does the candidate fail more often? One verdict on failures, for compare and gate alike."""

from __future__ import annotations

import dataclasses
import math

from rally_keystone_bench.verdicts import stats


@dataclasses.dataclass(frozen=True)
class Failures:
    """Occurrences and failures per side, the one-sided Fisher exact p-value, the verdict."""

    base_total: int
    base_failed: int
    cand_total: int
    cand_failed: int
    base_success: float | None  # percent
    cand_success: float | None
    p_value: float | None
    verdict: str  # "" when the failures say nothing
    regression: bool


def p_text(p: float) -> str:
    """A p-value as the verdict sentences write it."""
    if not math.isfinite(p):
        return ""
    return "p<1e-15" if p < 1e-15 else f"p={p:.2g}"


def _percent(failed: int, total: int) -> str:
    return f"{100.0 * failed / total:.1f}%" if total else "n/a"


def judge(
    name: str,
    base: tuple[int, int],
    cand: tuple[int, int],
    max_increase: float = 0.0,
    alpha: float = 0.01,
) -> Failures:
    """The success verdict of action NAME; BASE and CAND are (failed, total).

    A regression when the candidate has no successful sample and the base has
    one, or when its failure rate is higher with a one-sided Fisher exact p <
    ALPHA and by more than MAX_INCREASE percentage points.
    """
    (bf, bn), (cf, cn) = base, cand
    base_ok, cand_ok = bn - bf, cn - cf
    p, verdict, regression = None, "", False
    if cn == 0 and base_ok:
        verdict, regression = ("none ran" if name == "total" else "never ran"), True
    elif cand_ok == 0 and base_ok:
        verdict = f"every one failed (0 of {cn} succeeded; base {_percent(base_ok, bn)})"
        p, regression = stats.fisher_exact_greater(bf, bn, cf, cn), True
    elif bn and cn:
        p = stats.fisher_exact_greater(bf, bn, cf, cn)
        increase = 100.0 * (cf / cn - bf / bn)
        change = (
            f"failures {_percent(bf, bn)} -> {_percent(cf, cn)} "
            f"({increase:+.1f} points, {p_text(p)})"
        )
        if p < alpha and increase > max_increase:
            verdict, regression = change, True
        elif p < alpha and increase > 0:
            verdict = f"{change}, below the {max_increase:g}-point limit"
    return Failures(
        bn, bf, cn, cf,
        100.0 * (1 - bf / bn) if bn else None,
        100.0 * (1 - cf / cn) if cn else None,
        p, verdict, regression,
    )  # fmt: skip
