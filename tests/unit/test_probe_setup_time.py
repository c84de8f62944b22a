"""The probe table shows each probe's setup apart from its load (issue 28, item 1)."""

from pathlib import Path

import pytest

from rally_keystone_bench.engines.locust import samples
from rally_keystone_bench.report import capacity as capacity_report
from rally_keystone_bench.report import locust_report
from rally_keystone_bench.verdicts import results
from rally_keystone_bench.verdicts.probe_verdict import OK, Probe

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "rally-keystone-tokens.json"


def test_a_rally_report_gives_its_contexts_setup_time():
    wl = results.load(REAL)[0]  # users@openstack: setup 1795220577.15 -> 1795220596.68
    assert wl.setup_duration == pytest.approx(19.5296, abs=1e-3)


def test_contexts_set_up_in_turn_count_from_the_first_start_to_the_last_end():
    spans = [
        {"setup": {"started_at": 100.0, "finished_at": 103.0}},
        {"setup": {"started_at": 103.0, "finished_at": 110.5}},
        {"setup": {"started_at": None, "finished_at": None}},
    ]
    assert results.setup_seconds(spans) == 10.5
    assert results.setup_seconds([]) is None and results.setup_seconds(None) is None


def test_a_locust_report_carries_the_setup_of_its_users_and_tokens():
    validate = samples.SCENARIOS["validate"]
    report = locust_report.rally_report(
        [], scenario="validate", rally_scenario=validate, runner={"rps": 5}, setup=(1000.0, 1004.25)
    )
    (wl,) = results.from_report(report, "locust")
    assert wl.setup_duration == 4.25
    without = locust_report.rally_report(
        [], scenario="validate", rally_scenario=validate, runner={"rps": 5}
    )
    assert results.from_report(without, "locust")[0].setup_duration is None


def test_the_probe_table_has_a_setup_column():
    p = Probe(1, "search", 20, verdict=OK, elapsed=52.0)
    p.setup = 12.4
    q = Probe(2, "search", 30, verdict=OK, elapsed=40.0)
    header, first, second = capacity_report.format_table([p, q]).splitlines()
    assert header.split()[-3:] == ["setup", "time", "verdict"]
    assert first.split()[-3:] == ["12s", "52s", "ok"]
    assert second.split()[-3:] == ["-", "40s", "ok"]
