"""Counters are judged per token path: one path's added statements are never outvoted."""

from rally_keystone_bench.driver.evidence import Evidence
from rally_keystone_bench.report import counters as report_counters
from rally_keystone_bench.verdicts.counters import RequestCost

VALIDATE = "keystone.validate_token"
PASSWORD = "Validate password tokens (GET), paired"
APP_CRED = "Validate application-credential tokens (GET), paired"
ROLES = "SELECT assignment.type FROM assignment WHERE assignment.actor_id = ?"


def costs(n: int, statements: tuple[str, ...], start: float = 0.0) -> list[RequestCost]:
    return [
        RequestCost(f"r{start + i}", VALIDATE, statements, 0.001, True, start + i) for i in range(n)
    ]


def evidence(app_cred_extra: int) -> Evidence:
    """Four password-validation paths alike on both sides; the app-cred one gets extra SQL."""
    common = ("SELECT token FROM revocation_event", "SELECT project FROM project") * 4
    ev = Evidence()
    for side, extra in (("baseline", 0), ("candidate", app_cred_extra)):
        for path in (PASSWORD, "Validate rescoped tokens", "Validate trust tokens", "Check"):
            ev.records[side].extend((path, c) for c in costs(20, common))
        ev.records[side].extend((APP_CRED, c) for c in costs(20, common + (ROLES,) * extra))
    return ev


def test_sql_added_on_one_path_only_fails_naming_that_path():
    changes = evidence(app_cred_extra=14).counter_changes(tolerance=0)
    failed = [c for c in changes if c.failed]
    assert [c.workload for c in failed] == [APP_CRED]
    (change,) = failed
    assert change.sentence() == (
        f"{APP_CRED}: {VALIDATE} 8 -> 22 SQL statements per request "
        "(+14: SELECT ... FROM assignment x14)"
    )
    unchanged = [c for c in changes if not c.changed]
    assert len(unchanged) == 4  # the other paths say so, each on its own line
    lines = report_counters.format_changes(changes)
    assert lines[0] == f"COUNTER REGRESSION: {change.sentence()}"


def test_pooled_over_five_paths_the_same_change_would_have_been_outvoted():
    # The old rule: the lower median over every validation of every path.
    import statistics

    ev = evidence(app_cred_extra=14)
    pooled = [c.sql_count for _, c in ev.records["candidate"]]
    assert statistics.median_low(pooled) == 8


def test_each_workload_counts_its_traced_requests():
    traced = evidence(app_cred_extra=0).traced()
    assert traced["baseline"][APP_CRED] == 20 and len(traced["candidate"]) == 5


def test_a_workload_without_traced_requests_on_a_side_is_said():
    ev = evidence(app_cred_extra=0)
    ev.records["candidate"] = [(w, c) for w, c in ev.records["candidate"] if w != APP_CRED]
    notes = ev.untraced([PASSWORD, APP_CRED])
    assert notes == [
        f"counters: no traced request of {APP_CRED} on the candidate: its counts are unknown "
        "(none of the requests the candidate's Keystones traced started inside the "
        "workload's iterations)"
    ]
    (unknown,) = [c for c in ev.counter_changes(0, [(APP_CRED, VALIDATE)]) if c.unknown]
    assert unknown.workload == APP_CRED and not unknown.failed and not unknown.changed


def test_each_paths_counter_is_a_junit_case_of_the_one_suite():
    """The gate's and compare's JUnit is built once (report/junit.py), the counters' test
    cases with the verdicts': a path's added statements fail their own case."""
    from xml.etree import ElementTree

    from rally_keystone_bench.report import junit

    changes = evidence(app_cred_extra=14).counter_changes(tolerance=0)
    suite = ElementTree.fromstring(junit.render("gate", report_counters.junit_cases(changes)))
    assert suite.get("tests") == str(len(changes)) and suite.get("failures") == "1"
    (failed,) = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed.get("classname") == f"keystone counters: {APP_CRED}"
    assert failed.get("name") == f"{VALIDATE}: SQL statements per request"
    failure = failed.find("failure")
    assert failure.get("type") == "counter regression"
    said = failed.find("system-out").text
    assert said == failure.text == failure.get("message") and "x14" in said
