"""SQL counts per workload (token path) from recorded traces of the gate's paired paths.

The fixture (tests/fixtures/traces/keystone-30.0.0-memcached-paths.*) is the
trace store of one Keystone 30.0.0 (SQLite, memcached, 2 uWSGI workers, 4
bcrypt rounds, the gate's [auth] methods) that the paired scenario's own
client code (as benchmarks/traced_paths.py sends it) sent timed requests to
on 2026-11-29, each path after one untimed warm-up: 4 password issues, 16
rescopes (18 s per path held 158 rescopes to 11 password issues in
traced_paths.py's run, as in doc/source/counters.rst), 4 each by application credential, trust and
password + TOTP, 8 password-token and 4 trust-token validations; cache
points left out to keep it small. Its ``.workloads.json`` is each
workload's iteration starts and durations.
"""

from __future__ import annotations

import json
import statistics
import types
from pathlib import Path

import numpy as np
import pytest

from rally_keystone_bench.deploy import tracing
from rally_keystone_bench.driver import counters as driver_counters
from rally_keystone_bench.driver.evidence import SIDES, Evidence
from rally_keystone_bench.verdicts import counters

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
STEM = "keystone-30.0.0-memcached-paths"


def _workload(span: dict) -> types.SimpleNamespace:
    """A paired workload as results.Workload shows it: both sides' action, its iterations."""
    n = len(span["started"])
    action = types.SimpleNamespace(count=n)
    return types.SimpleNamespace(
        subtask=span["title"],
        iterations=n,
        iteration_started=np.array(span["started"]),
        iteration_duration=np.array(span["duration"]),
        actions={f"{side}.{span['action']}": action for side in SIDES},
    )


@pytest.fixture
def recorded() -> tuple[str, list]:
    text = (FIXTURES / f"{STEM}.jsonl").read_text()
    spans = json.loads((FIXTURES / f"{STEM}.workloads.json").read_text())
    return text, [_workload(s) for s in spans]


def _stores(tmp_path: Path, text: str) -> dict[str, Path]:
    """Both sides' trace stores, each holding the recorded run."""
    run_dirs = {}
    for side in SIDES:
        run_dirs[side] = tmp_path / side
        tracing.store_path(run_dirs[side]).mkdir(parents=True)
        (tracing.store_path(run_dirs[side]) / "trace-1.jsonl").write_text(text)
    return run_dirs


def _medians(costs: list) -> int:
    return statistics.median_low(c.sql_count for c in costs)


def _by_workload(evidence: Evidence, side: str) -> dict[str, list]:
    grouped: dict[str, list] = {}
    for title, cost in evidence.records[side]:
        grouped.setdefault(title, []).append(cost)
    return grouped


def test_each_workload_keeps_its_own_traced_requests(tmp_path, recorded):
    text, workloads = recorded
    evidence = Evidence()
    evidence.add_run({}, _stores(tmp_path, text), workloads)
    for side in SIDES:
        got = {title: _medians(costs) for title, costs in _by_workload(evidence, side).items()}
        assert got == {
            "Issue (password)": 6,  # the password check: SQL even with memcached
            "Issue (token)": 0,  # a rescope is answered from memcached
            "Issue (application_credential)": 4,
            "Issue (trust)": 41,
            "Issue (totp)": 6,
            "Validate (password)": 0,
            "Validate (trust)": 24,
        }
        # every timed request traced, and nothing else (the warm-ups went unsigned)
        assert evidence.traced()[side] == {wl.subtask: wl.iterations for wl in workloads}
    assert evidence.untraced([wl.subtask for wl in workloads]) == []
    sentences = [c.sentence() for c in evidence.counter_changes(tolerance=0)]
    assert any(
        s.startswith("Issue (password): keystone.issue_token 6 -> 6 SQL statements")
        for s in sentences
    ), sentences


def test_pooled_by_action_the_fast_path_outvotes_the_rest(tmp_path, recorded):
    """Why the gate said ``keystone.issue_token: 0 -> 0``: not a tracing gap, the pool."""
    text, workloads = recorded
    evidence = Evidence()
    evidence.add_run({}, _stores(tmp_path, text), workloads)
    pooled = counters.by_action([cost for _, cost in evidence.records["baseline"]])
    assert pooled["keystone.issue_token"].sql_median == 0  # 16 rescopes of 32 issues
    assert pooled["keystone.validate_token"].sql_median == 0  # trust's 24 outvoted


def test_a_workload_without_traced_requests_is_named(tmp_path, recorded):
    text, workloads = recorded
    lines = text.splitlines(keepends=True)
    issue_password = driver_counters.side_costs(
        [json.loads(line) for line in lines], workloads[:1], "candidate."
    )
    gone = {c.base_id for _, c in issue_password}
    candidate_text = "".join(line for line in lines if json.loads(line)["base_id"] not in gone)
    run_dirs = _stores(tmp_path, text)
    store = tracing.store_path(run_dirs["candidate"])
    (store / "trace-1.jsonl").write_text(candidate_text)
    evidence = Evidence()
    evidence.add_run({}, run_dirs, workloads)
    assert evidence.untraced([wl.subtask for wl in workloads]) == [
        "counters: no traced request of Issue (password) on the candidate: its counts are "
        "unknown (none of the requests its Keystone traced started inside the workload's "
        "iterations)"
    ]
