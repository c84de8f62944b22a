"""The Locust master writes raw samples only; the load host builds the report (issue 43)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.engines.locust import engine, master_files
from rally_keystone_bench.engines.locust import samples as sm
from rally_keystone_bench.verdicts import results

T0 = 1_800_000_000.0


def finished_master(out: Path, lost: tuple[str, ...] = ()) -> SimpleNamespace:
    """A master after 4 s at 10 rps (2 s of warm-up): 40 validations, every 10th failed."""
    received: dict[str, list] = {"w1": [], "w2": []}
    for k in range(40):
        due = T0 + k * 0.1
        error = "TokenRequestError: HTTP 500: injected" if k % 10 == 9 else ""
        sample = [k, sm.VALIDATE, due, due + 0.001, due + 0.021, 500 if error else 200, error]
        received["w1" if k % 2 else "w2"].append(sample)
    opts = SimpleNamespace(
        ks_scenario="validate", ks_warmup=2.0, ks_rate=10.0, ks_steps=None, ks_duration=2.0,
        ks_arrival="constant", num_users=4, ks_http="gevent", ks_keystone_users=4,
    )  # fmt: skip
    done = {node: {"count": len(received[node]) + (5 if node in lost else 0)} for node in received}
    return SimpleNamespace(
        opts=opts, out=out, workers=["w1", "w2"], received=received, done=done,
        ready={"w1": 2, "w2": 2}, lost=list(lost), left_behind=[], admin=None, error="",
        interrupted=False, t0=T0, setup_started=T0 - 7.5,
    )  # fmt: skip


def test_the_master_writes_the_samples_and_run_json_only(tmp_path):
    master_files.write(finished_master(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json", "samples.json"]
    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["samples_total"] == 40 and meta["samples_in_report"] == 20
    assert meta["load_start"] == T0 + 2.0 and meta["setup"] == [T0 - 7.5, T0 - 1.0]


def test_the_load_host_builds_the_report_of_the_samples_after_the_warm_up(tmp_path):
    master_files.write(finished_master(tmp_path, lost=("w2",)))
    report = engine.write_report(tmp_path)
    assert report == tmp_path / "locust-report.json"
    (wl,) = results.load(report)
    assert wl.scenario == "KeystoneTokens.validate" and wl.runner_type == "locust"
    assert wl.iterations == 20 and wl.failed_iterations == 2
    assert wl.setup_duration == pytest.approx(6.5)
    criteria = {c["criterion"]: c["success"] for c in wl.sla}
    assert criteria == {"failure_rate": False, "samples_complete": False}


def test_report_builds_a_hand_started_masters_report_beside_its_samples(tmp_path, capsys):
    master_files.write(finished_master(tmp_path))
    assert cli.main(["report", str(tmp_path / "locust-report.json"), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "locust-report.json").exists() and (tmp_path / "summary.json").exists()
    assert "keystone.validate_token" in capsys.readouterr().out
