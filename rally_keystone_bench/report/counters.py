"""Counter verdicts as text lines and as JUnit test cases (the gate's and compare's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from rally_keystone_bench.report import junit, svg
from rally_keystone_bench.verdicts.counters import CACHE, CounterChange, finding


def format_changes(
    changes: Sequence[CounterChange], latency_changed: Mapping[str, bool] | None = None
) -> list[str]:
    """Changed counters first, then unknown ones, each a sentence; a finding where latency
    did not move."""
    latency_changed = latency_changed or {}
    lines = []
    ordered = sorted(changes, key=lambda c: (not c.failed, not c.changed, not c.unknown))
    for change in ordered:
        if change.counter == CACHE and not change.changed:
            continue  # shown when they moved: an unchanged line per workload says nothing
        verdict = "COUNTER REGRESSION" if change.failed else "counter"
        lines.append(f"{verdict}: {change.sentence()}")
        said = finding(change, latency_changed.get(change.key, False))
        if said:
            lines.append(f"    {said}")
    return lines


def junit_cases(changes: Sequence[CounterChange]) -> list[junit.Case]:
    """A JUnit test case per counter of CHANGES (an action's SQL statements per request...),
    for the suite compare's or the gate's report builds (report/junit.py)."""
    return [
        junit.Case(
            f"keystone counters{': ' + change.workload if change.workload else ''}",
            f"{change.action}: {change.counter} per request",
            change.sentence(),
            change.sentence(),
            junit.FAILED if change.failed else junit.SKIPPED if change.unknown else junit.PASSED,
            kind="counter regression",
            said=change.sentence(),
        )
        for change in changes
    ]


def with_evidence(
    verdict: str,
    changes: Sequence[CounterChange],
    latency_changed: Mapping[str, bool],
    went: Sequence,
    other: str,
) -> str:
    """VERDICT (compare's or gate's text) with Keystone's evidence: the counts before it
    when one changed (they are exact), else after it (unchanged, unknown, or a rise
    that followed cache misses the other side hit: shown, not failed), then
    py-spy's functions whose self time rose most (candidate minus OTHER, the base or
    the baseline)."""
    counts = format_changes(changes, latency_changed)
    # An unknown count is no evidence of a change: it follows the verdict, whose
    # headline says what it means (INCONCLUSIVE, or a regression found anyway).
    moved = any(c.changed for c in changes)
    lines = [*(counts if moved else []), verdict, *(counts if not moved else [])]
    if went:
        lines.append(
            "where the time went (py-spy, self time per request Keystone served, "
            f"candidate - {other}):"
        )
        lines.extend(f"    {c.sentence()}" for c in went)
    return "\n".join(lines)


def evidence_html(
    changes: Sequence[CounterChange],
    latency_changed: Mapping[str, bool],
    went: Sequence,
    other: str,
) -> dict[str, Any] | None:
    """What gate.html and compare.html show of Keystone's evidence, or None without any.

    ``counts``: the lines of the counters that changed or are unknown, as printed
    (one whose rise followed cache misses too: shown, not failed); ``unchanged``:
    the others' lines (folded away on the page); ``went``: py-spy's
    sentences; ``chart``: the same functions as bars, OTHER's self time beside the
    candidate's.
    """
    moved = [c for c in changes if c.seen_changed or c.failed or c.unknown]
    still = [c for c in changes if not (c.seen_changed or c.failed or c.unknown)]
    counts = format_changes(moved, latency_changed) if moved else []
    unchanged = format_changes(still, latency_changed) if still else []
    if not counts and not unchanged and not went:
        return None
    chart = None
    if went:
        rows = [(f"{c.action}: {c.function}", c.before_ms, c.after_ms) for c in went]
        title = f"Where the time went: self time per request (py-spy), {other} and candidate"
        chart = Markup(svg.self_time_shift(title, rows, other))
    return {
        "counts": counts,
        "unchanged": unchanged,
        "went": [c.sentence() for c in went],
        "chart": chart,
    }
