"""The gate's verdict, said once: on stdout (counter changes first), and as JSON, HTML, JUnit.

Keystone's counters are judged beside the latency: an exact count that rose
beyond the tolerance fails the gate whatever the latency said, and with
tracing on an unknown SQL count makes a passing gate inconclusive.
"""

from __future__ import annotations

from pathlib import Path

from rally_keystone_bench.driver import evidence as keystone_evidence
from rally_keystone_bench.report import counters as report_counters
from rally_keystone_bench.report import gate as gate_report
from rally_keystone_bench.verdicts.counters import SQL
from rally_keystone_bench.verdicts.pairing import GateResult


def write_reports(
    result: GateResult,
    out_dir: Path,
    evidence: keystone_evidence.Evidence,
    tolerance: int,
    traced: bool = False,
) -> int:
    """The verdicts on stdout (counter changes first); JSON, HTML, JUnit in OUT_DIR.

    Returns the exit code: 1 when a counter rose beyond TOLERANCE, whatever the
    latency said (exact counts have no noise to wait out), else the gate's.
    TRACED (--trace on): every paired action of every workload needs its SQL
    count on both sides; one that is unknown makes a passing gate inconclusive.
    """
    expected = [(a.workload, a.action) for a in result.actions] if traced else []
    changes = evidence.counter_changes(tolerance, expected)
    result.counters_unknown = [c.key for c in changes if c.unknown and c.counter == SQL]
    result.counters_failed = [c.rise for c in changes if c.failed]
    text = gate_report.format_text(result)
    went = evidence.where_time_went()
    moved = latency_moved(result)
    print(report_counters.with_evidence(text, changes, moved, went, "baseline"))
    paths = {
        "JSON": out_dir / "gate.json",
        "HTML": out_dir / "gate.html",
        "JUnit": out_dir / "gate-junit.xml",
    }
    shown = report_counters.evidence_html(changes, moved, went, "baseline")
    gate_report.write_outputs(result, paths, shown, changes)
    for label, path in paths.items():
        print(f"gate {label}: {path}")
    if any(c.failed for c in changes):
        return 1
    return result.exit_code


def latency_moved(result: GateResult) -> dict[str, bool]:
    """``workload: action`` -> whether its latency verdict saw a significant change."""
    return {
        f"{a.workload}: {a.action}": bool(
            a.regression or (a.latency is not None and a.latency.p_judged < result.alpha)
        )
        for a in result.actions
    }
