"""A start retried on new ports keeps the trace key it was given (the gate's shared key).

The gate writes one key into every deployment's run directory before any of
them starts; our clients sign with it. A start that finds a port taken
between its pick and its bind stops (removing the key with everything else
of a teardown) and starts again. Before, that second attempt made a key of
its own and wrote it into keystone.conf: that Keystone then accepted no
signature of ours and traced nothing, and the gate said ``counters: no
traced request of ... cache off, paired on the baseline``. Here the first
server start fails as uWSGI does when its port was taken; no process runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rally_keystone_bench.clients import tracing as client_tracing
from rally_keystone_bench.deploy import keystone as keystone_module
from rally_keystone_bench.deploy import tracing
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver import counters as driver_counters
from rally_keystone_bench.errors import BenchError


def _hmac_keys(config: Path) -> str:
    (line,) = [x for x in config.read_text().splitlines() if x.startswith("hmac_keys = ")]
    return line.removeprefix("hmac_keys = ")


class _PortTakenOnce:
    """The server's first start fails with uWSGI's bind error in its log, the next one serves."""

    def __init__(self, ks: LocalKeystone) -> None:
        self.ks = ks
        self.starts = 0

    def __call__(self) -> None:
        self.starts += 1
        if self.starts == 1:
            with open(self.ks.server_log_path, "a") as log:
                log.write("bind(): Address already in use [core/socket.c line 769]\n")
            raise BenchError("Keystone's server exited before it served")


@pytest.fixture
def started_after_a_port_race(tmp_path, monkeypatch) -> tuple[LocalKeystone, str, _PortTakenOnce]:
    """A traced deployment in the gate's layout, its key shared before the start."""
    run_dirs = [tmp_path / "baseline" / "keystone", tmp_path / "baseline_nocache" / "keystone"]
    driver_counters.share_key(run_dirs)  # as the gate does, before any start
    shared = tracing.key_path(run_dirs[0]).read_text().strip()
    monkeypatch.setattr(keystone_module.venv, "ensure_keystone_env", lambda *a, **k: tmp_path)
    ks = LocalKeystone(Deployment(trace=True), run_dirs[1])
    server = _PortTakenOnce(ks)

    def render() -> str:  # what keystone.conf's [profiler] section is made of
        return f"[profiler]\nhmac_keys = {tracing.config(ks.run_dir)['hmac_key']}\n"

    def initialise() -> None:
        ks.config_path.write_text(render())
        ks.initialised_path.touch()

    for name, fake in {
        "_start_backends": lambda: None,
        "_render_config": render,
        "_initialise": initialise,
        "_start_server": server,
        "_wait_ready": lambda: None,
        "_write_openrc": lambda: None,
    }.items():
        monkeypatch.setattr(ks, name, fake)
    ks.start()
    return ks, shared, server


def test_a_start_retried_on_new_ports_keeps_the_shared_trace_key(started_after_a_port_race):
    ks, shared, server = started_after_a_port_race
    assert server.starts == 2  # the first attempt's port was taken: retried
    assert tracing.key_path(ks.run_dir).read_text().strip() == shared
    assert _hmac_keys(ks.config_path) == shared  # what this Keystone accepts
    assert tracing.store_path(ks.run_dir).is_dir()
    ks.stop()
    assert not tracing.key_path(ks.run_dir).exists()  # a teardown still removes it


def test_a_fresh_start_still_makes_its_own_key(tmp_path):
    tracing.prepare(tmp_path)
    made = tracing.read_key(tmp_path)
    assert made and len(made.strip()) == 64
    (tmp_path / "other").mkdir()
    tracing.prepare(tmp_path / "other")
    assert not tracing.same_key(tmp_path, tmp_path / "other")
    (tmp_path / "again").mkdir()
    tracing.prepare(tmp_path / "again", made)  # a retried start: the key it had
    assert tracing.same_key(tmp_path, tmp_path / "again")


def test_the_gate_signs_every_timed_request_whatever_the_environment_says(tmp_path, monkeypatch):
    """The gate enters client_environment with rate 1: a rate left in the caller's shell
    (``KEYSTONE_BENCH_TRACE_RATE=0.01``) would sign one request in 100 of each kind, and a
    slow workload could end before its first."""
    tracing.prepare(tmp_path)
    monkeypatch.setenv(client_tracing.RATE_ENV, "0.01")
    with tracing.client_environment(tmp_path, rate=1.0):
        sampler = client_tracing.from_environment()
    assert sampler is not None and sampler.rate == 1.0
    assert all(sampler.headers("GET") for _ in range(5))
