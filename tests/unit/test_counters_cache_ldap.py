"""Cache and LDAP counters from recorded traces of real Keystone 30.0.0 runs.

keystone-30.0.0-memcached.jsonl: an issue and a validation (SQLite,
memcached, 1 worker), with the deltas of memcached's own ``stats`` around
each request (…-memcached-stats.json). keystone-30.0.0-ldap.jsonl: an LDAP
user's issue (pools off), with the operations slapd logged during it
(…-ldap-slapd.json, one per ``conn=N op=M``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from rally_keystone_bench.deploy import tracing
from rally_keystone_bench.report.render import build_summary
from rally_keystone_bench.verbs.run import format_table
from rally_keystone_bench.verdicts import counters

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def _records(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


def test_cache_keys_match_memcacheds_own_stats():
    stats = json.loads((FIXTURES / "keystone-30.0.0-memcached-stats.json").read_text())
    costs = counters.request_costs(_records("keystone-30.0.0-memcached.jsonl"))
    assert [c.action for c in costs] == ["keystone.issue_token", "keystone.validate_token"]
    for cost in costs:
        direct = stats[cost.base_id]
        got = (cost.cache_gets, cost.cache_misses, cost.cache_sets)
        assert got == (direct["cmd_get"], direct["get_misses"], direct["cmd_set"])


def test_cache_hit_ratio_and_median_per_action():
    acts = counters.by_action(counters.request_costs(_records("keystone-30.0.0-memcached.jsonl")))
    validate = acts["keystone.validate_token"]
    assert validate.cache_gets_median == 17
    assert validate.cache_hit_ratio == pytest.approx(15 / 17)
    assert acts["keystone.issue_token"].cache_hit_ratio == 1.0
    assert validate.ldap_median is None  # no LDAP: no LDAP column
    assert "ldap_calls_median" not in validate.as_dict()


def test_ldap_calls_match_the_operations_slapd_logged():
    slapd = json.loads((FIXTURES / "keystone-30.0.0-ldap-slapd.json").read_text())
    (cost,) = counters.request_costs(_records("keystone-30.0.0-ldap.jsonl"))
    assert len(cost.ldap_calls) == sum(slapd[cost.base_id].values())
    assert cost.ldap_calls.count("search_s") == slapd[cost.base_id]["SRCH"]
    assert cost.ldap_calls.count("simple_bind_s") == slapd[cost.base_id]["BIND"]
    acts = counters.by_action([cost])
    assert acts["keystone.issue_token"].as_dict()["ldap_calls_median"] == 15
    assert "cache_gets_median" not in acts["keystone.issue_token"].as_dict()  # cache off


@pytest.mark.parametrize("fixture", ["memcached", "ldap"])
def test_summary_round_trip_keeps_cache_and_ldap(fixture):
    costs = counters.request_costs(_records(f"keystone-30.0.0-{fixture}.jsonl"))
    for action, acts in counters.by_action(costs).items():
        again = counters.ActionCounters.from_dict(acts.as_dict())
        assert again.cache_gets_median == acts.cache_gets_median, action
        assert again.ldap_median == acts.ldap_median, action
        if acts.cache_hit_ratio is not None:
            assert again.cache_hit_ratio == pytest.approx(acts.cache_hit_ratio, abs=0.05)


def test_checked_out_counts_live_processes_only(tmp_path):
    store = tracing.store_path(tmp_path)
    store.mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid names no process
    (store / f"pool-{os.getpid()}.txt").write_text("2           \n")
    (store / f"pool-{gone.pid}.txt").write_text("5\n")
    (store / "pool-x.txt").write_text("1\n")
    assert tracing.checked_out(tmp_path) == {os.getpid(): 2}


class _Action:
    def __init__(self) -> None:
        self.count = 4
        self.success_percent = 100.0

    def ok_durations(self) -> list[float]:
        return [0.1, 0.2, 0.3, 0.4]


class _Workload:
    pass_sla = True
    sla: list = []
    load_duration = 2.0
    throughput = 2.0
    actions = {"keystone.issue_token": _Action(), "total": _Action()}

    def label(self) -> str:
        return "KeystoneTokens.authenticate"


def test_run_table_shows_cache_and_ldap_columns_only_when_traced():
    costs = counters.request_costs(_records("keystone-30.0.0-memcached.jsonl"))
    found = {k: v.as_dict() for k, v in counters.by_action(costs).items()}
    table = format_table([_Workload()], [found])
    header, row = table.splitlines()[1:3]
    assert "cache/hit" in header and "LDAP" not in header
    assert row.split()[-1] == "18/100%"
    plain = format_table([_Workload()], [{"keystone.issue_token": _without_cache(found)}])
    assert "cache/hit" not in plain


def _without_cache(found: dict) -> dict:
    doc = dict(found["keystone.issue_token"])
    doc.pop("cache_gets_median")
    doc.pop("cache_hit_ratio")
    return doc


def test_summary_json_says_connections_checked_out():
    doc = build_summary([], "x", None, {"db_connections_checked_out": 1})
    assert doc["keystone"] == {"db_connections_checked_out": 1}
    assert "keystone" not in build_summary([], "x")
