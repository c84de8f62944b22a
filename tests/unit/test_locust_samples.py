"""Samples of the Locust engine -> a Rally JSON report (report/) that Rally and results.py read."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rally_keystone_bench.engines.locust import samples as sm
from rally_keystone_bench.report import locust_report
from rally_keystone_bench.verdicts import results

T0 = 1_800_000_000.0


def open_model_samples(n: int = 50, stall_every: int = 10) -> list[tuple]:
    """Validations due every 20 ms; every 10th is sent 300 ms late (every user was busy)."""
    out = []
    for k in range(n):
        due = T0 + k * 0.02
        late = 0.3 if k % stall_every == stall_every - 1 else 0.0
        sent = due + late + 0.0001 * k  # unrounded on purpose
        out.append((k, sm.VALIDATE, due, sent, sent + 0.005, 200, ""))
    out.append(
        (
            n,
            sm.VALIDATE,
            T0 + n * 0.02,
            T0 + n * 0.02,
            T0 + n * 0.02 + 0.01,
            500,
            "TokenRequestError: validate token: HTTP 500: injected error",
        )
    )
    return out


def lifecycle_samples() -> list[tuple]:
    due = T0
    steps = [(sm.ISSUE, 0.01), (sm.VALIDATE, 0.002), (sm.CHECK, 0.002), (sm.REVOKE, 0.003)]
    out, t = [], due + 0.05  # sent 50 ms late
    for name, d in steps:
        out.append((0, name, due, t, t + d, 200, ""))
        t += d
    return out


def report_of(samples, **kw):
    scenario = kw.pop("scenario", "validate")
    return locust_report.rally_report(
        samples,
        scenario=scenario,
        rally_scenario=sm.SCENARIOS[scenario],
        runner={"rps": 50, "times": 51, "workers": 2},
        sla_results=[locust_report.failure_rate_sla(1, 51), locust_report.complete_sla([], 51, 51)],
        **kw,
    )


def test_results_reads_service_and_response_time_unrounded(tmp_path):
    raw = open_model_samples()
    path = tmp_path / "locust.json"
    path.write_text(json.dumps(report_of(raw)))
    (wl,) = results.load(path)
    assert wl.scenario == "KeystoneTokens.validate" and wl.runner_type == "locust"
    assert wl.iterations == 51 and wl.failed_iterations == 1 and not wl.pass_sla
    a = wl.actions[sm.VALIDATE]
    ok = [s for s in raw if not s[6]]
    # service time: send -> answer, exactly as sent (no bucket, no rounding)
    assert sorted(a.ok_durations()) == sorted(s[4] - s[3] for s in ok)
    # response time: intended start -> answer; the late sends show in it only
    assert sorted(a.response_times()) == pytest.approx(sorted(s[4] - s[2] for s in ok), abs=1e-6)
    assert np.percentile(a.response_times(), 99) > 0.3 > np.percentile(a.ok_durations(), 99)
    assert a.send_lags().max() == pytest.approx(0.3 + 0.0001 * 49, abs=1e-6)
    assert wl.errors[0].status == 500


def test_lifecycle_late_start_counts_against_its_first_action_only(tmp_path):
    path = tmp_path / "life.json"
    path.write_text(json.dumps(report_of(lifecycle_samples(), scenario="lifecycle")))
    (wl,) = results.load(path)
    assert list(wl.actions)[:4] == [sm.ISSUE, sm.VALIDATE, sm.CHECK, sm.REVOKE]
    assert wl.actions[sm.ISSUE].response_times() == pytest.approx([0.06], abs=1e-6)
    assert wl.actions[sm.VALIDATE].response_times() == pytest.approx([0.002], abs=1e-6)
    assert wl.actions[results.TOTAL].response_times() == pytest.approx([0.067], abs=1e-6)


def test_a_rally_report_without_intended_starts_has_no_response_time(tmp_path):
    path = tmp_path / "plain.json"
    report = report_of(open_model_samples())
    for it in report["tasks"][0]["subtasks"][0]["workloads"][0]["data"]:
        del it["intended_start"]
    path.write_text(json.dumps(report))
    (wl,) = results.load(path)
    assert not wl.actions[sm.VALIDATE].has_response_time
    assert wl.iteration_intended is None


def test_summary_shows_service_and_response_time_side_by_side(tmp_path):
    from rally_keystone_bench.report import render

    path = tmp_path / "locust.json"
    path.write_text(json.dumps(report_of(open_model_samples())))
    wls = results.load(path)
    files = render.render_files(wls, str(path))
    summary = json.loads(files["summary.json"])["workloads"][0]
    action = summary["actions"][sm.VALIDATE]
    assert action["response"]["p99"] > 0.3 > action["p99"]
    assert summary["rps_target"] == 50
    assert "response time" in files["summary.html"] and "service time" in files["summary.html"]
    assert "against a target of 50" in files["summary.html"]
