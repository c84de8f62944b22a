"""Cost counters from recorded OSprofiler traces of a real Keystone 30.0.0 run.

The fixture (tests/fixtures/traces/) is the trace store of one run: an
authorize and an issue (POST), two validations (GET), on SQLite; the audit
file is SQLAlchemy's own statement count per request from the same run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rally_keystone_bench.verdicts import counters

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


@pytest.fixture(scope="module")
def records() -> list[dict]:
    path = FIXTURES / "keystone-30.0.0-sqlite.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_counts_match_sqlalchemys_own_count(records):
    audit = json.loads((FIXTURES / "keystone-30.0.0-sqlite-audit.json").read_text())
    costs = counters.request_costs(records)
    assert len(costs) == 4
    assert {c.base_id: c.sql_count for c in costs} == audit


def test_actions_from_methods_and_medians(records):
    acts = counters.by_action(counters.request_costs(records))
    assert sorted(acts) == ["keystone.issue_token", "keystone.validate_token"]
    validate = acts["keystone.validate_token"]
    # A worker's first validation (118) and a warm one (61): the lower median.
    assert validate.sql_counts == (118, 61)
    assert (validate.sql_median, validate.sql_max) == (61, 118)
    assert 0 < validate.db_ms_median < 1000


def test_db_time_is_the_sum_of_statement_spans():
    def point(name: str, trace_id: str, ms: int, **extra: str) -> dict:
        stamp = f"2026-01-01T00:00:00.{ms * 1000:06d}"
        return {"name": name, "base_id": "b", "trace_id": trace_id, "timestamp": stamp, **extra}

    points = [
        point("wsgi-start", "w", 0, method="HEAD"),
        point("db-start", "1", 1, statement="SELECT 1"),
        point("db-stop", "1", 4),
        point("db-start", "2", 5, statement="SELECT 2"),
        point("db-stop", "2", 7),
        point("wsgi-stop", "w", 9),
    ]
    (cost,) = counters.request_costs(points)
    assert cost.action == "keystone.check_token"
    assert cost.sql_count == 2
    assert cost.db_seconds == pytest.approx(0.005, abs=1e-6)  # epoch floats: 0.24 us apart


def test_db_time_from_the_float_clock_the_run_writes_equals_that_of_iso_strings():
    """The run's store writes time.time(); osprofiler's own string reads the same."""
    iso = "2026-01-01T00:00:00.{:06d}"
    epoch = 1767225600.0  # 2026-01-01T00:00:00Z
    spans = [("wsgi-start", "w", 0), ("db-start", "1", 1000), ("db-stop", "1", 4000),
             ("db-start", "2", 5000), ("db-stop", "2", 7000), ("wsgi-stop", "w", 9000)]  # fmt: skip

    def points(stamp) -> list[dict]:
        return [
            {"name": n, "base_id": "b", "trace_id": t, "timestamp": stamp(us),
             "method": "HEAD", "statement": "SELECT 1"}
            for n, t, us in spans
        ]  # fmt: skip

    (as_float,) = counters.request_costs(points(lambda us: epoch + us / 1e6))
    (as_iso,) = counters.request_costs(points(lambda us: iso.format(us)))
    assert as_float.db_seconds == pytest.approx(0.005, abs=1e-6)
    assert as_iso.db_seconds == pytest.approx(0.005, abs=1e-6)
    assert as_float.started == pytest.approx(epoch) == as_iso.started
    assert as_float.sql_count == as_iso.sql_count == 2


def test_a_request_without_its_stop_is_not_counted(records):
    cut = [r for r in records if r["name"] != "wsgi-stop" or r is not records[-1]]
    costs = counters.request_costs(cut)
    assert sum(c.complete for c in costs) == 3


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("SELECT a FROM t WHERE id = 'abc' AND n = 42", "SELECT a FROM t WHERE id = ? AND n = ?"),
        ("SELECT a FROM t WHERE id IN (?, ?, ?)", "SELECT a FROM t WHERE id IN (?)"),
        ("SELECT a FROM t WHERE id = %(i)s\n LIMIT %(p)s", "SELECT a FROM t WHERE id = ? LIMIT ?"),
        ("SELECT a FROM t WHERE id = $1", "SELECT a FROM t WHERE id = ?"),
        ("SELECT t1.a FROM t1", "SELECT t1.a FROM t1"),
    ],
)  # fmt: skip
def test_shape_drops_literals_and_parameters(statement, expected):
    assert counters.shape(statement) == expected


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("SELECT x FROM revocation_event WHERE a = ?", "SELECT ... FROM revocation_event"),
        ('SELECT "group".id FROM "group" JOIN user_group_membership', "SELECT ... FROM group"),
        ("INSERT INTO token (id) VALUES (?)", "INSERT INTO token"),
        ("UPDATE user SET x = ?", "UPDATE user"),
        ("BEGIN", "BEGIN"),
    ],
)
def test_label_names_the_table(statement, expected):
    assert counters.label(statement) == expected


def test_grouping_in_the_fixture_names_assignment_three_times(records):
    validate = counters.by_action(counters.request_costs(records))["keystone.validate_token"]
    by_label: dict[str, float] = {}
    for s, n in validate.shape_counts.items():
        by_label[validate.labels[s]] = by_label.get(validate.labels[s], 0) + n
    assert by_label["SELECT ... FROM assignment"] == 3
    assert sum(validate.shape_counts.values()) <= validate.sql_max


def _action(counts: list[int], extra: int = 0) -> counters.ActionCounters:
    shapes = {"SELECT a FROM revocation_event WHERE b = ?": 9.0}
    if extra:
        shapes["SELECT c FROM assignment WHERE d = ?"] = float(extra)
    return counters.ActionCounters(
        action="keystone.validate_token",
        sql_counts=tuple(counts),
        db_seconds=tuple(0.001 for _ in counts),
        shape_counts=shapes,
        labels={s: counters.label(s) for s in shapes},
    )


def test_verdict_equal():
    (change,) = counters.compare(
        {"keystone.validate_token": _action([9] * 5)}, {"keystone.validate_token": _action([9] * 5)}
    )
    assert not change.changed and not change.failed
    assert change.sentence().endswith("(unchanged)")


def test_verdict_one_more_fails_and_names_the_statement():
    (change,) = counters.compare(
        {"keystone.validate_token": _action([9] * 5)},
        {"keystone.validate_token": _action([10] * 5, extra=1)},
    )
    assert change.failed
    assert change.sentence() == (
        "keystone.validate_token: 9 -> 10 SQL statements per request "
        "(+1: SELECT ... FROM assignment)"
    )


def test_verdict_one_fewer_is_a_change_not_a_failure():
    (change,) = counters.compare(
        {"keystone.validate_token": _action([10] * 5, extra=1)},
        {"keystone.validate_token": _action([9] * 5)},
    )
    assert change.changed and not change.failed
    assert "(-1: SELECT ... FROM assignment)" in change.sentence()


def test_noisy_sampling_keeps_the_median():
    # Cold first requests of each worker (more statements) in different numbers.
    before = _action([18, 9, 9, 9, 9, 9, 9])
    after = _action([18, 18, 9, 9, 9, 9, 9, 9, 9])
    (change,) = counters.compare(
        {"keystone.validate_token": before}, {"keystone.validate_token": after}
    )
    assert not change.changed


def test_too_few_traced_requests_are_not_judged():
    (change,) = counters.compare(
        {"keystone.validate_token": _action([9])},
        {"keystone.validate_token": _action([12, 12], extra=3)},
    )
    assert not change.failed
    assert "too few traced requests" in change.sentence()


def test_a_finding_when_latency_did_not_move():
    (change,) = counters.compare(
        {"keystone.validate_token": _action([9] * 5)},
        {"keystone.validate_token": _action([10] * 5, extra=1)},
    )
    assert "finding" in (counters.finding(change, latency_changed=False) or "")
    assert counters.finding(change, latency_changed=True) is None


def test_summary_dict_round_trip():
    acts = _action([9, 9, 9, 12], extra=0)
    again = counters.ActionCounters.from_dict(acts.as_dict())
    assert (again.sql_median, again.sql_max, again.requests) == (9, 12, 4)
    (change,) = counters.compare(
        {"keystone.validate_token": again}, {"keystone.validate_token": acts}
    )
    assert not change.changed
