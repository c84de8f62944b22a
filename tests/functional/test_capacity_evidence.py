"""Capacity probes carry Keystone's side and the machine's, through the real rally CLI.

On a real Keystone a probe reads Keystone's access log for its window (the
scenario's requests, their server times, how busy the workers were); on
every target the /proc sampler says what else used the machine; and the
ramp's progress line states how long its steps are and why.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rally_keystone_bench.driver.probe_evidence import ProbeEvidence
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec
from rally_keystone_bench.verbs.capacity import RallyProber
from rally_keystone_bench.verdicts import capacity

BENCH = str(Path(sys.executable).parent / "keystone-bench")
RATE, WARMUP, WINDOW = 10.0, 2.0, 5.0


@pytest.mark.functional
def test_a_probe_on_a_real_keystone_reads_its_window_from_the_access_log(small_keystone, tmp_path):
    keystone = small_keystone
    home = RallyHome(tmp_path / "rally")
    home.create_env("probe", keystone_spec(keystone.admin_credentials))
    settings = capacity.Settings(
        scenario="validate", low=RATE, high=RATE, warmup=WARMUP, window=WINDOW,
        max_slope=1e6, precision=1, abort_on_sla_failure=False,
    )  # fmt: skip
    said: list[str] = []
    evidence = ProbeEvidence(keystone.run_dir, said.append)
    prober = RallyProber(home, "probe", settings, tmp_path, say=said.append, evidence=evidence)
    probe = prober(RATE, "search")
    assert probe.iterations == int(RATE * (WARMUP + WINDOW)), said
    # Keystone logs a request when a worker takes it up: the window's validations,
    # and on a slow Keystone some of the warm-up's that waited into the window;
    # never more than the probe sent (the log and Rally's report share one clock)
    assert 0.8 * RATE * WINDOW <= probe.server_requests <= probe.iterations, probe.reason
    assert probe.server_p95 is not None and probe.server_busy is not None
    assert probe.setup_requests == 0  # the validator's tokens came before the load
    assert "Keystone p95" in probe.reason and "worker(s)" in probe.reason
    assert probe.other_cpu is not None and probe.steal is not None  # the machine was sampled
    assert any("Keystone p95" in line for line in said)


@pytest.mark.functional
@pytest.mark.serial  # the search holds rates and judges latency
def test_the_mock_search_states_its_ramp_steps_and_the_machine_of_each_probe(tmp_path):
    """The 50-rps mock searched in [40, 60] on a 10-rps grid: one ramp of three steps,
    then the confirmations; a couple of minutes. No figure is asserted but N's range."""
    cmd = [BENCH, "capacity", "--scenario", "validate", "--target", "mock",
           "--mock-workers", "1", "--mock-service-time", "20", "--warmup", "3",
           "--window", "8", "--low", "40", "--high", "60", "--precision", "10",
           "--reports-dir", str(tmp_path / "reports")]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # 40 rps for 5 s holds 200 requests: no step is lengthened for the slope
    assert "40, 50, 60 rps, 5 s a step and 30 requests at least for the slope, " in proc.stderr
    (found,) = (tmp_path / "reports").glob("*/capacity.json")
    summary = json.loads(found.read_text())
    assert summary["result"]["n_rps"] in (40, 50), proc.stdout
    probes = summary["probes"]
    assert all(p["other_cpu"] is not None and p["steal"] is not None for p in probes)
    assert all(p["server_p95"] is None for p in probes)  # the mock keeps no access log
    assert "n_spread_rps" in summary["result"]
