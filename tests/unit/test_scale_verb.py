"""keystone-bench scale: bad input is one line and exit 2 before any Keystone starts;
the sweep's bookkeeping (points, saturation, setup time) without Rally."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.verbs import scale
from rally_keystone_bench.verdicts import growth


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--dimension", "revocations", "--values", "0,10"], "unknown --dimension 'revocations'"),
        (["--dimension", "revocation-events", "--values", "10"], "at least two different sizes"),
        (["--dimension", "revocation-events", "--values", "0,x"], "'x' is not a whole number"),
        (["--dimension", "project-depth", "--values", "0,2"], "starts at 1, not 0"),
        (["--dimension", "revocation-events", "--values", "0,1", "--times", "0"], "--times"),
        (
            ["--dimension", "revocation-events", "--values", "0,1", "--keystone", "/nowhere/ks"],
            "Keystone checkout /nowhere/ks does not exist",
        ),
        (["--dimension", "fernet-keys", "--values", "1,10"], "fernet-keys starts at 2, not 1"),
        (
            ["--dimension", "fernet-keys", "--values", "3,10"]
            + ["--set", "fernet_tokens.max_active_keys=5"],
            "--set fernet_tokens.max_active_keys: --dimension fernet-keys sets it at each point",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_load(capsys, tmp_path, argv, reason):
    rc = cli.main(["scale", *argv, "--reports-dir", str(tmp_path / "reports")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert reason in err
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


def test_a_fernet_keys_point_starts_its_keystone_with_that_many_keys():
    """The swept size is a keystone.conf setting of the point's deployment, next to
    the user's own --set, and no data-size context is added to the task."""
    dim = growth.DIMENSIONS["fernet-keys"]
    base = Deployment(conf={"token.expiration": "7200"})
    dep = scale.point_deployment(base, dim, 50)
    assert dep.conf == {"token.expiration": "7200", "fernet_tokens.max_active_keys": "50"}
    assert base.conf == {"token.expiration": "7200"}  # each point starts from the same base
    assert dim.contexts(50) == {}
    roles = growth.DIMENSIONS["roles-per-user"]
    assert scale.point_deployment(base, roles, 5) is base


def outcome(latencies, failed=0, json_report=None):
    samples = SimpleNamespace(
        ok_durations=lambda: np.array(latencies),
        success_percent=100.0 * len(latencies) / (len(latencies) + failed),
    )
    wl = SimpleNamespace(
        iterations=len(latencies) + failed, actions={"keystone.validate_token": samples}
    )
    return SimpleNamespace(workloads=[wl], rally_exit=0, json_report=json_report)


def test_a_sweep_stops_at_a_saturated_point_and_fits_what_ran(tmp_path, capsys):
    sweep = scale.Sweep(growth.DIMENSIONS["revocation-events"], "keystone.validate_token", "d")
    limits = growth.Limits(max_p95=0.1)
    assert sweep.add(0, outcome([0.010] * 20), limits, tmp_path)
    assert sweep.add(1000, outcome([0.020] * 20), limits, tmp_path)
    assert not sweep.add(10000, outcome([0.300] * 20), limits, tmp_path)
    assert sweep.finish(tmp_path) == 0
    out = capsys.readouterr().out
    assert (
        "stopped early: saturated at 10,000 revocation events: p95 300 ms is above the 100 ms"
        in out
    )
    assert "growth: +" in out and "per 1,000 revocation events" in out
    doc = json.loads((tmp_path / "scale.json").read_text())
    assert [p["size"] for p in doc["points"]] == [0, 1000, 10000]
    assert "<svg" in (tmp_path / "scale.html").read_text()


def test_the_first_point_again_turns_a_rise_the_machine_made_flat(tmp_path, capsys):
    sweep = scale.Sweep(growth.DIMENSIONS["revocation-events"], "keystone.validate_token", "d")
    limits = growth.Limits()
    for size, ms in ((0, 0.0715), (1000, 0.0759), (10000, 0.0857)):
        assert sweep.add(size, outcome([ms] * 50), limits, tmp_path)
    assert sweep.whole(3)
    sweep.add_again(outcome([0.0880] * 50))
    assert sweep.finish(tmp_path) == 0
    out = capsys.readouterr().out
    assert "(first point again)" in out
    assert "machine: the first point moved 23.1% between the start and the end" in out
    assert "): flat" in out and "the machine's, not the size's" in out
    doc = json.loads((tmp_path / "scale.json").read_text())
    assert doc["first_point_again"]["p50_ms"] == pytest.approx(88.0)
    assert doc["machine_drift"] == pytest.approx(0.0165 / 0.0715)
    assert doc["growth"]["shape"] == "flat"
    assert "the machine moved it 23.1%" in (tmp_path / "scale.html").read_text()


def test_a_stopped_sweep_gets_no_drift_check(tmp_path):
    sweep = scale.Sweep(growth.DIMENSIONS["revocation-events"], "keystone.validate_token", "d")
    limits = growth.Limits(max_p95=0.1)
    assert sweep.add(0, outcome([0.010] * 20), limits, tmp_path)
    assert not sweep.add(1000, outcome([0.300] * 20), limits, tmp_path)
    assert not sweep.whole(2)


def test_one_point_is_inconclusive(tmp_path, capsys):
    sweep = scale.Sweep(growth.DIMENSIONS["roles-per-user"], "keystone.validate_token", "d")
    sweep.add(0, outcome([0.01] * 5), growth.Limits(), tmp_path)
    assert sweep.finish(tmp_path) == scale.EXIT_INCONCLUSIVE
    assert "not fitted" in capsys.readouterr().out


def test_setup_time_comes_from_rallys_contexts_results(tmp_path):
    report = tmp_path / "r.json"
    ctx = [
        {
            "plugin_name": "keystone_users@openstack",
            "setup": {"started_at": 1.0, "finished_at": 2.0},
        },
        {
            "plugin_name": "revocation_events@openstack",
            "setup": {"started_at": 10.0, "finished_at": 14.5},
        },
    ]
    report.write_text(
        json.dumps({"tasks": [{"subtasks": [{"workloads": [{"contexts_results": ctx}]}]}]})
    )
    assert scale.context_setup_seconds(report, "revocation_events") == 4.5
    assert scale.context_setup_seconds(report, "keystone_catalog") is None
    assert scale.context_setup_seconds(tmp_path / "missing.json", "revocation_events") is None
