"""Repeats of the capacity search's disagreeing probes, until N settles with its spread.

When the confirmations keep contradicting the search (a rate that passed
once fails once), N and N + precision are probed again, a few times at
most, each after the prober has waited for a quiet machine; each rate is
then judged by the majority of its quiet probes, and N is reported with its
spread across the repeats instead of "not confirmed". Probes are capacity
Probes (``rps``, ``role``, ``passed`` and the machine's figures).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rally_keystone_bench.verdicts import keystone_side

MAX_REPEATS = 2  # more probes of a rate whose probes disagree, once the rounds are spent


def fmt(rate: float) -> str:
    return f"{rate:g}"


def full_probes(probes: list[Any], rate: float) -> list[Any]:
    """The probes of whole windows (no ramp step) at RATE."""
    return [p for p in probes if abs(p.rps - rate) < 1e-6 and not p.role.startswith("ramp")]


def _quiet(found: list[Any]) -> list[Any]:
    return [p for p in found if keystone_side.quiet(p)] or found


def settles(found: list[Any]) -> bool:
    """Whether a rate passes, from its probes: the majority of those on a quiet machine.

    Without a quiet probe, the majority of all; a tie is broken by the latest.
    """
    quiet = _quiet(found)
    if not quiet:
        return False  # never probed whole (decided() has it probed first)
    passed = sum(p.passed for p in quiet)
    if 2 * passed == len(quiet):
        return bool(quiet[-1].passed)
    return 2 * passed > len(quiet)


def decided(found: list[Any]) -> bool:
    """The probes of a rate agree, or three or more quiet ones hold a strict majority.

    No whole probe is no decision: a rate that passed only as a ramp's step
    (a few seconds) is probed whole before N rests on it.
    """
    if not found:
        return False
    quiet = _quiet(found)
    passed = sum(p.passed for p in quiet)
    return len({p.passed for p in found}) < 2 or (len(quiet) >= 3 and 2 * passed != len(quiet))


def settle(
    n: float,
    settings: Any,
    run: Callable[[float, str], Any],
    probes: list[Any],
    say: Callable[[str], None],
) -> tuple[float, Any | None, tuple[float, float]]:
    """N and N + precision repeated (MAX_REPEATS more each at most) until their probes agree.

    The prober waits for a quiet machine before a repeat. Returns N, the
    probe that bounds it (None: N + precision passed too) and N's spread:
    from below the lowest of the two rates that ever failed to the highest
    that ever passed.
    """
    above = round(min(n + settings.precision, settings.high), 6)
    rates = [n, above] if above > n else [n]
    for rate, role in zip(rates, ("repeat N", "repeat N+1"), strict=False):
        for _ in range(MAX_REPEATS):
            found = full_probes(probes, rate)
            if decided(found):
                break
            if found:
                why = f"{len(found)} probes disagree; repeating it on a quiet machine"
            else:
                why = "passed only as a ramp's step: probing it whole"
            say(f"{fmt(rate)} rps{':' if found else ''} {why}")
            run(rate, role)
    verdicts = {rate: settles(full_probes(probes, rate)) for rate in rates}
    failed_once = [r for r in rates if any(not p.passed for p in full_probes(probes, r))]
    passed_once = [r for r in rates if any(p.passed for p in full_probes(probes, r))]
    if verdicts[rates[0]]:
        best = rates[-1] if verdicts[rates[-1]] else rates[0]
    else:
        below = [p.rps for p in probes if p.passed and p.rps < rates[0] - 1e-6]
        best = max(below, default=settings.low)
    low = min([round(r - settings.precision, 6) for r in failed_once] + [best])
    high = max(passed_once + [best])
    bound = [p for p in full_probes(probes, rates[-1]) if not p.passed]
    hi_probe = bound[-1] if bound and best < rates[-1] else None
    if hi_probe is None and best < rates[-1]:
        hi_probe = next((p for p in reversed(probes) if not p.passed and p.rps > best), None)
    return best, hi_probe, (max(settings.low, low), high)
