"""Capacity probes carry Keystone's side and the machine's, through the real rally CLI.

On a real Keystone a probe reads Keystone's access log for its window (the
scenario's requests, their server times, how busy the workers were). The
mock search's ramp line and its per-probe machine samples are asserted in
test_capacity_live.py, whose search already runs (one search, not two).
"""

from __future__ import annotations

import pytest

from rally_keystone_bench.driver.probe_evidence import ProbeEvidence
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec
from rally_keystone_bench.verbs.capacity import RallyProber
from rally_keystone_bench.verdicts import capacity

RATE, WARMUP, WINDOW = 10.0, 2.0, 5.0


@pytest.mark.functional
def test_a_probe_on_a_real_keystone_reads_its_window_from_the_access_log(small_keystone, tmp_path):
    """A 10 rps probe (2 s warm-up, 5 s window) reads Keystone's side from its access log.

    Bound: at least 80 % of the window's 50 validations logged inside it, and never more
    than were sent: 10 requests of slack for those a worker took up outside the
    window (the log's time). No count of those was measured."""
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
