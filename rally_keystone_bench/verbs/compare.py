"""``keystone-bench compare BASE CAND``: A/B verdicts of two Rally results."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from rally_keystone_bench import boundary
from rally_keystone_bench.deploy import profiling
from rally_keystone_bench.driver import counters as keystone_counters
from rally_keystone_bench.driver import machine as machine_record
from rally_keystone_bench.driver import reports
from rally_keystone_bench.report import compare as compare_report
from rally_keystone_bench.report import counters as report_counters
from rally_keystone_bench.verbs import groups, options
from rally_keystone_bench.verdicts import compare, counters, profiles, verdict_head

VERDICT_RULES = groups.VerdictRules()


@dataclasses.dataclass(frozen=True)
class CompareSettings:
    """compare's own options (the verdict's rules: groups.VerdictRules)."""

    base: str  # a Rally JSON report, a summary.json or a task UUID
    candidate: str
    threshold: float  # percent
    json: str | None  # where to write the comparison too, or None
    html: str | None
    junit: str | None


def main(args: argparse.Namespace) -> int:
    """0 no regression, 1 regression, 2 bad input."""
    settings, rules = options.read(CompareSettings, args), VERDICT_RULES.settings(args)
    verdict_head.check_rules(settings.threshold, rules.alpha, rules.max_failure_increase)
    for flag, path in (
        ("--json", settings.json),
        ("--html", settings.html),
        ("--junit", settings.junit),
    ):
        if path:
            compare_report.check_writable(path, flag)
    base = reports.load_any(settings.base)
    cand = reports.load_any(settings.candidate)
    result = compare.compare_workloads(
        base,
        cand,
        settings.threshold,
        rules.alpha,
        base_name=settings.base,
        cand_name=settings.candidate,
        max_failure_increase=rules.max_failure_increase,
        machines={"base": machine_record.load_saved(settings.base),
                  "candidate": machine_record.load_saved(settings.candidate)},
        deployments={"base": deployment_of(settings.base),
                     "candidate": deployment_of(settings.candidate)},
    )  # fmt: skip
    changes = counter_changes(settings.base, settings.candidate, base, cand)
    result.counters_unknown = [c.key for c in changes if c.unknown and c.counter == counters.SQL]
    result.counters_failed = [c.rise for c in changes if c.failed]
    went = where_time_went(settings.base, settings.candidate)
    text = compare_report.format_text(result)
    moved = latency_moved(result)
    print(report_counters.with_evidence(text, changes, moved, went, "base"))
    if settings.json:
        compare_report.write_json(result, settings.json)
    if settings.html:
        shown = report_counters.evidence_html(changes, moved, went, "base")
        compare_report.write_html(result, settings.html, shown, (base, cand))
    if settings.junit:
        compare_report.write_junit(result, settings.junit, changes)
    if result.inconclusive:
        return result.exit_code  # a busy machine or another deployment: never a conviction
    if any(c.failed for c in changes):
        return 1
    return result.exit_code


def deployment_of(result: str) -> str | None:
    """The deployment line ``run`` kept beside RESULT (deployment.json), or None."""
    if not Path(result).is_file():
        return None  # a task in Rally's database: no run directory beside it
    try:
        doc = json.loads((Path(result).parent / "deployment.json").read_text())
    except (OSError, ValueError):
        return None
    found = doc.get("deployment") if isinstance(doc, dict) else None
    return str(found) if found else None


def counter_changes(base: str, candidate: str, base_wl: list, cand_wl: list) -> list:
    """Counts per request of each action of each workload both runs traced, per workload.

    Workloads are paired as the latency verdicts pair them (same scenario,
    arguments and runner). Neither run traced: an empty list. Both did: an
    action a side has no count of gets an unknown SQL count that says which
    side, never silence (read as unchanged).
    """
    before, after = keystone_counters.load_saved(base), keystone_counters.load_saved(candidate)
    if not before or not after:
        return []
    index = {id(w): i for i, w in enumerate(base_wl)} | {id(w): i for i, w in enumerate(cand_wl)}
    changes = []
    for b, c in compare.pair_workloads(base_wl, cand_wl)[0]:
        mine, theirs = before.get(index[id(b)]) or {}, after.get(index[id(c)]) or {}
        found = counters.compare(mine, theirs, workload=b.label())
        changes.extend(found)
        judged = {ch.action for ch in found if ch.counter == counters.SQL}
        timed = [a for a in b.actions if a in counters.ACTION_BY_METHOD.values()]
        for action in dict.fromkeys([*mine, *theirs, *timed]):
            if action not in judged:
                kept = (("base", mine), ("candidate", theirs))
                sides = [side for side, counts in kept if action not in counts]
                why = f"no traced request on the {' or the '.join(sides)}"
                changes.append(counters.unknown(action, b.label(), why))
    return changes


def latency_moved(result: compare.CompareResult) -> dict[str, bool]:
    """``workload: action`` -> whether its latency changed significantly (as counters key it)."""
    return {
        f"{w.label}: {c.name}": bool(c.significant or c.regression)
        for w in result.workloads
        for c in w.actions
    }


def where_time_went(base: str, candidate: str) -> list:
    """The functions whose self time per request Keystone served rose most, when both runs
    kept a profile and the requests served while it was taken."""
    before = keystone_counters.load_profile(base)
    after = keystone_counters.load_profile(candidate)
    if before is None or after is None:
        return []
    return profiles.diff(before[0], after[0], (before[1], after[1]), profiling.RATE)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench compare``."""
    parser.add_argument(
        "base", metavar="BASE.json", help="the baseline: a Rally JSON report or a summary.json"
    )
    parser.add_argument(
        "candidate", metavar="CAND.json", help="the candidate, of the same kind as the baseline"
    )
    parser.add_argument(
        "--threshold", type=boundary.non_negative, default=10.0, help="percent (default 10)"
    )
    VERDICT_RULES.add(parser)
    parser.add_argument(
        "--json", default=None, metavar="OUT", help="also write the comparison as JSON to OUT"
    )
    parser.add_argument(
        "--html", default=None, metavar="OUT", help="also write the comparison as HTML to OUT"
    )
    parser.add_argument(
        "--junit",
        default=None,
        metavar="OUT",
        help="also write the verdicts as JUnit XML to OUT (one test case per action)",
    )
