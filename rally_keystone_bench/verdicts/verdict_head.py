"""What compare's and gate's verdicts share: the head of their JSON, the headlines of
a verdict decided by Keystone's exact counts, and the check of their rules.

Both result types (verdicts/compare.CompareResult, verdicts/pairing.GateResult)
have ``base``, ``candidate``, ``threshold``, ``alpha``, ``max_failure_increase``,
``regressions``, ``counters_failed``, ``headline()`` and ``exit_code``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rally_keystone_bench.errors import BenchError


def _first_and_more(keys: Sequence[str]) -> str:
    return f"{keys[0]} (and {len(keys) - 1} more)" if len(keys) > 1 else keys[0]


def counters_headline(rules: str, failed: Sequence[str]) -> str:
    """The headline of a verdict whose latency found nothing but whose counts rose."""
    return (
        f"REGRESSION ({rules}): Keystone does more per request, exactly counted: "
        f"{_first_and_more(failed)}; latency: no regression measured"
    )


def unknown_headline(rules: str, unknown: Sequence[str]) -> str:
    """The headline of a verdict whose latency found nothing but a SQL count is unknown."""
    return (
        f"INCONCLUSIVE ({rules}): no latency regression, but Keystone's SQL count "
        f"is unknown for {_first_and_more(unknown)}"
    )


def verdict_fields(v: Any) -> dict[str, Any]:
    """The head of a verdict's JSON, the same for compare and gate: inputs, rules, outcome."""
    return {
        "base": v.base,
        "candidate": v.candidate,
        "threshold_percent": v.threshold,
        "alpha": v.alpha,
        "max_failure_increase_points": v.max_failure_increase,
        "verdict": v.headline(),
        "regression": bool(v.regressions or v.counters_failed),
        "exit_code": v.exit_code,
    }


def check_rules(threshold: float, alpha: float, max_failure_increase: float) -> None:
    """BenchError unless the verdict's rules are numbers in range (NaN is not)."""
    if not 0.0 < alpha < 1.0:
        raise BenchError(f"--alpha must be between 0 and 1, not {alpha}")
    if not 0.0 <= threshold < math.inf:
        raise BenchError(f"--threshold must be a percent of 0 or more, not {threshold}")
    if not 0.0 <= max_failure_increase <= 100.0:
        raise BenchError(
            f"--max-failure-increase must be 0 to 100 percentage points, not {max_failure_increase}"
        )
