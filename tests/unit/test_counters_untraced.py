"""A timed workload a side traced no request of: its SQL count is unknown, and says why.

From recorded traces (tests/fixtures/traces/keystone-30.0.0-memcached-paths.*,
see test_counters_workloads.py), laid out as the default gate lays out its
four deployments: each side's cache-on Keystone serves every workload but
one, which its cache-off twin (``<side>_nocache``) serves, as the cache-off
pass does. The baseline's twin holds a trace key of its own (its start was
retried on new ports and made one): it traced nothing. The candidate adds a
SQL statement to every request of that workload only.

Before, the gate skipped that workload's counters, named it in a note ("its
counts are not judged") and said ``no regression``, exit 0: the added
statement passed unseen.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest

from rally_keystone_bench.deploy import tracing
from rally_keystone_bench.driver import counters as driver_counters
from rally_keystone_bench.driver import gate_reports
from rally_keystone_bench.driver.evidence import SIDES, Evidence
from rally_keystone_bench.report import counters as report_counters
from rally_keystone_bench.verdicts import counters, pairing

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
STEM = "keystone-30.0.0-memcached-paths"
CACHE_OFF = "Validate (password)"  # the workload the twins serve here
ADDED = "SELECT assignment.type FROM assignment WHERE assignment.actor_id = ?"
KEYLESS = "baseline_nocache's Keystone does not hold the trace key our clients sign with"


def _workload(span: dict, openrc: dict[str, Path]) -> types.SimpleNamespace:
    n = len(span["started"])
    twin = "_nocache" if span["title"] == CACHE_OFF else ""
    return types.SimpleNamespace(
        subtask=span["title"],
        args={side: str(openrc[side + twin]) for side in SIDES},
        iterations=n,
        iteration_started=np.array(span["started"]),
        iteration_duration=np.array(span["duration"]),
        actions={f"{side}.{span['action']}": types.SimpleNamespace(count=n) for side in SIDES},
    )


def _with_a_statement(records: list[dict], base_ids: set[str]) -> list[dict]:
    """RECORDS with one more SQL statement in each request of BASE_IDS, before its stop."""
    out = []
    for r in records:
        if r["name"] == "wsgi-stop" and r["base_id"] in base_ids:
            t, tid = r["timestamp"] - 0.0002, f"added-{r['base_id']}"
            point = {"base_id": r["base_id"], "trace_id": tid, "parent_id": r["parent_id"]}
            out.append({**point, "name": "db-start", "timestamp": t, "statement": ADDED})
            out.append({**point, "name": "db-stop", "timestamp": t + 0.0001})
        out.append(r)
    return out


@pytest.fixture
def gate_layout(tmp_path) -> types.SimpleNamespace:
    """Four deployments' run directories, trace stores and keys, after one task run."""
    records = [json.loads(line) for line in (FIXTURES / f"{STEM}.jsonl").read_text().splitlines()]
    spans = json.loads((FIXTURES / f"{STEM}.workloads.json").read_text())
    names = [*SIDES, *(f"{side}_nocache" for side in SIDES)]
    dirs = {name: tmp_path / name / "keystone" for name in names}
    driver_counters.share_key(list(dirs.values()))
    tracing.key_path(dirs["baseline_nocache"]).unlink()
    tracing.prepare(dirs["baseline_nocache"])  # a key of its own, as a retried start made
    for d in dirs.values():
        tracing.prepare(d)
    workloads = [_workload(s, {n: d / "openrc" for n, d in dirs.items()}) for s in spans]
    (cache_off,) = [wl for wl in workloads if wl.subtask == CACHE_OFF]
    own = {c.base_id for _, c in driver_counters.side_costs(records, [cache_off], "baseline.")}
    rest = [r for r in records if r["base_id"] not in own]
    served = {
        "baseline": rest,
        "baseline_nocache": [],  # its Keystone accepted no signature of ours
        "candidate": rest,
        "candidate_nocache": _with_a_statement([r for r in records if r["base_id"] in own], own),
    }
    for name, kept in served.items():
        lines = "".join(json.dumps(r) + "\n" for r in kept)
        (tracing.store_path(dirs[name]) / "trace-1.jsonl").write_text(lines)
    evidence = Evidence()
    keystones = {n: types.SimpleNamespace(run_dir=d) for n, d in dirs.items()}
    said = evidence.check_keys(keystones, dirs["baseline"])
    run_dirs = {side: [dirs[side], dirs[f"{side}_nocache"]] for side in SIDES}
    evidence.add_run({}, run_dirs, workloads)
    expected = [(wl.subtask, next(iter(wl.actions)).split(".", 1)[1]) for wl in workloads]
    return types.SimpleNamespace(evidence=evidence, said=said, expected=expected, tmp=tmp_path)


def test_the_keyless_deployment_is_named_once_everything_is_up(gate_layout):
    assert gate_layout.said == [
        f"counters: {KEYLESS}: none of its requests will be traced, "
        "its workloads' counts will be unknown"
    ]


def test_the_untraced_workload_is_unknown_with_its_reason_never_unchanged(gate_layout):
    changes = gate_layout.evidence.counter_changes(0, gate_layout.expected)
    (unknown,) = [c for c in changes if c.unknown]
    assert unknown.key == f"{CACHE_OFF}: keystone.validate_token"
    assert not unknown.failed and not unknown.changed
    assert unknown.sentence() == (
        f"{CACHE_OFF}: keystone.validate_token SQL statements per request unknown "
        f"(no traced request on the baseline: {KEYLESS})"
    )
    assert report_counters.format_changes(changes)[0] == f"counter: {unknown.sentence()}"
    # Every other workload was traced on both sides and judged: unchanged.
    judged = {c.workload for c in changes if c.counter == "SQL statements" and c.judged}
    assert judged == {w for w, _ in gate_layout.expected} - {CACHE_OFF}
    assert gate_layout.evidence.untraced([w for w, _ in gate_layout.expected]) == [
        f"counters: no traced request of {CACHE_OFF} on the baseline: its counts are "
        f"unknown ({KEYLESS})"
    ]


def test_the_gate_that_cannot_see_an_added_statement_is_inconclusive_not_passed(
    gate_layout, capsys
):
    same = pairing.Judgement("latency", 12, 1.0, 0.98, 1.02, 0.9, 0.05, 0.05, "same", False)
    actions = [pairing.ActionVerdict(w, a, [], same, None, None) for w, a in gate_layout.expected]
    result = pairing.GateResult("A", "B", 10.0, 0.01, 2.0, pairing.Bounds(), actions)
    assert result.exit_code == 0  # latency alone: nothing to say
    rc = gate_reports.write_reports(result, gate_layout.tmp, gate_layout.evidence, 0, traced=True)
    out = capsys.readouterr().out
    assert rc == pairing.EXIT_INCONCLUSIVE, out
    assert result.counters_unknown == [f"{CACHE_OFF}: keystone.validate_token"]
    assert "INCONCLUSIVE" in out and "no regression" not in out
    assert f"SQL count is unknown for {CACHE_OFF}: keystone.validate_token" in out
    doc = json.loads((gate_layout.tmp / "gate.json").read_text())
    assert doc["exit_code"] == 3 and doc["counters_unknown"] == result.counters_unknown
    junit = (gate_layout.tmp / "gate-junit.xml").read_text()
    assert 'skipped="1"' in junit and "unknown (no traced request on the baseline" in junit


def test_traced_on_both_sides_the_added_statement_fails_that_workload_only(gate_layout):
    """The same candidate against a baseline twin that traced its requests (the fixed
    start keeps the shared key): 0 -> 1 on that workload, every other one unchanged."""
    evidence = gate_layout.evidence
    records = [json.loads(line) for line in (FIXTURES / f"{STEM}.jsonl").read_text().splitlines()]
    own = {c.base_id for w, c in evidence.records["candidate"] if w == CACHE_OFF}
    traced = counters.request_costs([r for r in records if r["base_id"] in own])
    evidence.records["baseline"] += [(CACHE_OFF, c) for c in traced]
    changes = evidence.counter_changes(0, gate_layout.expected)
    (failed,) = [c for c in changes if c.failed]
    assert failed.workload == CACHE_OFF and (failed.before, failed.after) == (0, 1)
    assert failed.sentence().endswith("(+1: SELECT ... FROM assignment)")
    assert not [c for c in changes if c.unknown]


def test_a_count_that_rose_is_a_regression_in_every_output_not_only_the_exit_code(
    gate_layout, capsys
):
    """Latency unchanged, one SQL statement more on one path: the process exits 1, and
    the headline, gate.json and the advice say so too (they once said "no regression",
    exit_code 0, or "not a failure of the change" beside exit 1)."""
    evidence = gate_layout.evidence
    records = [json.loads(line) for line in (FIXTURES / f"{STEM}.jsonl").read_text().splitlines()]
    own = {c.base_id for w, c in evidence.records["candidate"] if w == CACHE_OFF}
    evidence.records["baseline"] += [
        (CACHE_OFF, c) for c in counters.request_costs([r for r in records if r["base_id"] in own])
    ]
    same = pairing.Judgement("latency", 12, 1.0, 0.98, 1.02, 0.9, 0.05, 0.05, "same", False)
    actions = [pairing.ActionVerdict(w, a, [], same, None, None) for w, a in gate_layout.expected]
    result = pairing.GateResult("A", "B", 10.0, 0.01, 2.0, pairing.Bounds(), actions)
    rc = gate_reports.write_reports(result, gate_layout.tmp, evidence, 0, traced=True)
    out = capsys.readouterr().out.splitlines()
    rise = f"{CACHE_OFF}: keystone.validate_token 0 -> 1 SQL statements"
    assert rc == 1 and result.exit_code == 1 and result.counters_failed == [rise]
    assert out[0].startswith(f"COUNTER REGRESSION: {CACHE_OFF}: keystone.validate_token 0 -> 1")
    verdict = next(line for line in out if line.startswith(("REGRESSION", "no regression")))
    assert verdict.startswith("REGRESSION (") and rise in verdict, verdict
    assert result.advice() is None
    doc = json.loads((gate_layout.tmp / "gate.json").read_text())
    assert doc["exit_code"] == 1 and doc["regression"] is True
    assert doc["counters_failed"] == [rise] and doc["verdict"] == verdict
