"""``keystone-bench compare BASE CAND``: A/B verdicts of two Rally results."""

from __future__ import annotations

import argparse
from pathlib import Path

from rally_keystone_bench import compare, results
from rally_keystone_bench.driver import counters as keystone_counters
from rally_keystone_bench.report import counters as report_counters
from rally_keystone_bench.verdicts import counters


def main(args: argparse.Namespace) -> int:
    """0 no regression, 1 regression, 2 bad input."""
    compare.check_rules(args.threshold, args.alpha, args.max_failure_increase)
    for flag, path in (("--json", args.json), ("--html", args.html), ("--junit", args.junit)):
        if path:
            compare.check_writable(path, flag)
    base = results.load_any(args.base)
    cand = results.load_any(args.candidate)
    result = compare.compare_workloads(
        base,
        cand,
        args.threshold,
        args.alpha,
        base_name=args.base,
        cand_name=args.candidate,
        max_failure_increase=args.max_failure_increase,
    )
    changes = counter_changes(args.base, args.candidate)
    moved = any(c.changed for c in changes)
    lines = report_counters.format_changes(changes)
    if moved:  # exact counts that changed come first
        print("\n".join(lines))
    print(compare.format_text(result))
    if lines and not moved:
        print("\n".join(lines))
    if args.json:
        compare.write_json(result, args.json)
    if args.html:
        compare.write_html(result, args.html)
    if args.junit:
        compare.write_junit(result, args.junit)
        if changes:
            junit = Path(args.junit)
            junit.write_text(report_counters.add_to_junit(junit.read_text(), changes))
    if any(c.failed for c in changes):
        return 1
    return result.exit_code


def counter_changes(base: str, candidate: str) -> list:
    """SQL statements per request of each action both runs traced (none: an empty list)."""
    before, after = keystone_counters.load_saved(base), keystone_counters.load_saved(candidate)
    if not before or not after:
        return []
    return counters.compare(before, after)
