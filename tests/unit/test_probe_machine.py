"""Capacity probes and ``load`` keep the machine's record of their load window, as ``run`` does.

The sampler is stood in for (its intervals are made here, in epoch seconds
around the synthetic report's iterations); what is asserted is what a user
sees: the ``machine during the load:`` line, the record in summary.json,
load.json and each probe of capacity.json, and ``compare`` of two load
results reading it (a disturbed one: exit 3, never a conviction).
"""

from __future__ import annotations

import contextlib
import json
import sys
import types
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.driver import machine as machine_record
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.probers import RallyProber
from rally_keystone_bench.engines.locust import engine
from rally_keystone_bench.engines.locust.prober import LocustProber
from rally_keystone_bench.verbs import load
from rally_keystone_bench.verdicts import capacity, machine
from rally_keystone_bench.verdicts.cpu import GENERATOR, TICKS, Interval
from rally_keystone_bench.verdicts.machine import DEPLOYMENT

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))
import synthetic  # noqa: E402

T0 = synthetic.T0
# 400 validations at concurrency 2 of about 50 ms each: about 10 s from T0.
REPORT = json.dumps(
    synthetic.report(
        [synthetic.workload(synthetic.iterations(400, ("keystone.validate_token",)),
                            "KeystoneTokens.validate")]
    )
)  # fmt: skip
SETTINGS = capacity.Settings("validate", 10, 10, warmup=2, window=8, max_slope=1e6, precision=1)


def interval(start: float, other: float) -> Interval:
    """One second of a 2-core machine: the generator and Keystone half a core each, and
    OTHER cores of other processes."""
    groups = {GENERATOR: int(0.5 * TICKS), DEPLOYMENT: int(0.5 * TICKS)}
    return Interval(start, start + 1.0, int((1.0 + other) * TICKS), 0, groups, {})


def fake_sampling(other: float, before: float | None = None):
    """A sampling factory whose sampler saw OTHER cores of other processes from T0 on
    (BEFORE, when given, in the 5 s before T0: the setup, outside any load window)."""
    seen = [interval(T0 + t, other) for t in range(-5, 30)]
    if before is not None:
        seen[:5] = [interval(T0 + t, before) for t in range(-5, 0)]

    @contextlib.contextmanager
    def one_load():
        yield types.SimpleNamespace(intervals=list(seen), load_averages=[1.5, 2.25])

    return one_load


class FakeHome:
    """A Rally home whose ``rally task report`` writes REPORT."""

    path = Path("no-rally-home")

    def quiet_config(self) -> Path:
        return Path("quiet.conf")

    def rally(self, *args: str, check: bool = True, **_kw):
        Path(args[args.index("--out") + 1]).write_text(REPORT)
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")


@pytest.fixture
def rally_runs(monkeypatch):
    def start_task(home, env, task_file, task_args, log_path, **kw):
        log_path.write_text("")
        run = rally_task.TaskRun(home, task_file, log_path)
        run.uuid, run.rc = "u-1", 0
        return run

    monkeypatch.setattr(rally_task, "start_task", start_task)


def test_a_rally_probe_keeps_the_machine_of_its_window_not_of_its_setup(tmp_path, rally_runs):
    said: list[str] = []
    # a core of other work during the setup, 0.1 core during the load
    sampling = fake_sampling(0.1, before=1.0)
    prober = RallyProber(FakeHome(), "e", SETTINGS, tmp_path, say=said.append, sampling=sampling)
    probe = prober(10, "search")
    assert probe.machine.other_mean == pytest.approx(0.1, abs=0.02)
    assert probe.machine.load_average == 2.25 and probe.machine.cores > 0
    assert probe.other_cpu == pytest.approx(0.1, abs=0.02)  # the search's quiet check agrees
    (line,) = [x for x in said if "machine during the load" in x]
    assert line.startswith("  machine during the load: other processes 0.10 core (peak 0.10)")
    record = probe.to_json()["machine"]
    assert record["disturbed"] is None and record["generator_mean"] == pytest.approx(0.5, abs=0.02)


def test_a_rally_probe_on_a_busy_machine_says_disturbed(tmp_path, rally_runs):
    said: list[str] = []
    prober = RallyProber(
        FakeHome(), "e", SETTINGS, tmp_path, say=said.append, sampling=fake_sampling(0.9)
    )
    probe = prober(10, "search")
    assert probe.to_json()["machine"]["disturbed"] == "other processes used 0.90 core on average"
    assert any(
        x.startswith("  machine during the load: DISTURBED (other processes used 0.90 core")
        for x in said
    )


def test_a_probe_without_a_sampler_keeps_no_record(tmp_path, rally_runs):
    probe = RallyProber(FakeHome(), "e", SETTINGS, tmp_path, say=lambda _m: None)(10, "search")
    assert probe.machine is None and probe.to_json()["machine"] is None


def fake_run_load(monkeypatch, seen: list | None = None):
    """engine.run_load writing what a Locust master writes, under the sampling it is given."""

    def run_load(s, credential, out_dir, say=None, run_id=None, sampling=None):
        with sampling() as sampler:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "locust-report.json").write_text(REPORT)
            (out_dir / "samples.json").write_text("[]")
        meta = {"workers": ["w0"], "samples_total": 400, "samples_reported": 400}
        meta.update(samples_in_report=400, t0=T0)
        if seen is not None:
            seen.append(sampling)
        return engine.LoadResult(
            out_dir / "locust-report.json", out_dir / "samples.json", meta, out_dir,
            sampler=sampler,
        )  # fmt: skip

    monkeypatch.setattr(engine, "run_load", run_load)


def test_a_locust_probe_keeps_the_machine_of_its_window(tmp_path, monkeypatch):
    fake_run_load(monkeypatch)
    said: list[str] = []
    prober = LocustProber({}, SETTINGS, tmp_path, said.append, sampling=fake_sampling(0.3))
    probe = prober(10, "search")
    assert probe.machine.other_mean == pytest.approx(0.3, abs=0.02)
    assert probe.to_json()["machine"]["disturbed"] == "other processes used 0.30 core on average"
    assert said[-1].startswith("  machine during the load: DISTURBED (other processes used 0.30")


def load_on_locust(tmp_path: Path, monkeypatch, name: str, other: float) -> Path:
    """``keystone-bench load`` (Locust, a stand-in target) under OTHER cores of other
    processes; its directory."""
    monkeypatch.chdir(tmp_path)  # the run directories go under the working directory
    sampled: list = []
    fake_run_load(monkeypatch, sampled)
    monkeypatch.setattr(machine_record, "target_sampling", lambda run_dir: fake_sampling(other))

    @contextlib.contextmanager
    def admin_target(settings, run_dir, say=None, cloud=None):
        yield {"auth_url": "http://127.0.0.1:9"}, "a stand-in target"

    monkeypatch.setattr(load, "admin_target", admin_target)
    where = tmp_path / name
    argv = ["load", "--scenario", "validate", "--rate", "4", "--duration", "10"]
    assert cli.main([*argv, "--target", "mock", "--reports-dir", str(where)]) == 0
    assert len(sampled) == 1  # the load ran under the verb's sampling
    (out,) = where.iterdir()
    return out


def test_load_prints_and_keeps_the_machines_record(tmp_path, monkeypatch, capsys):
    out = load_on_locust(tmp_path, monkeypatch, "quiet", 0.05)
    printed = capsys.readouterr().out.splitlines()
    line = next(x for x in printed if x.startswith("machine during the load: "))
    assert line.startswith("machine during the load: other processes 0.05 core (peak 0.05), ")
    assert "load generator 0.50, Keystone's deployment 0.50 of " in line
    summary = json.loads((out / "summary.json").read_text())
    assert summary["machine"]["other_mean"] == pytest.approx(0.05, abs=0.01)
    assert summary["machine"]["disturbed"] is None
    kept = json.loads((out / "load.json").read_text())
    assert kept["machine"] == summary["machine"] and kept["engine"] == "locust"
    assert machine_record.load_saved(str(out / "locust-report.json")).other_mean == pytest.approx(
        0.05, abs=0.01
    )


def test_compare_of_two_loads_reads_their_machines(tmp_path, monkeypatch, capsys):
    quiet = load_on_locust(tmp_path, monkeypatch, "quiet", 0.05)
    busy = load_on_locust(tmp_path, monkeypatch, "busy", 0.9)
    capsys.readouterr()
    base, cand = str(quiet / "locust-report.json"), str(busy / "locust-report.json")
    assert cli.main(["compare", base, cand]) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("INCONCLUSIVE")
    assert "the candidate run was disturbed: other processes used 0.90 core on average" in out[0]
    assert any(x.startswith("base machine: other processes 0.05 core") for x in out)
    again = load_on_locust(tmp_path, monkeypatch, "again", 0.05)
    capsys.readouterr()
    assert cli.main(["compare", base, str(again / "locust-report.json")]) == 0


def test_a_summary_beside_another_report_is_not_its_record(tmp_path):
    (tmp_path / "summary.json").write_text(
        json.dumps({"source": "other.json", "machine": {"seconds": 1.0}})
    )
    assert machine_record.load_saved(str(tmp_path / "rally-report.json")) is None


def test_the_target_named_as_the_deployment_is_a_local_keystone_or_the_mock(tmp_path):
    (tmp_path / "keystone").mkdir()
    (tmp_path / "keystone" / "state.json").write_text(json.dumps({"pids": {"uwsgi": 4242}}))
    (tmp_path / "mock").mkdir()
    (tmp_path / "mock" / "mock.json").write_text(json.dumps({"port": 5000, "pid": 77}))
    assert machine_record.target_trees(tmp_path / "keystone", tmp_path / "mock") == {
        DEPLOYMENT: [4242, 77]
    }
    assert machine_record.target_trees(tmp_path / "cloud") == {}


def test_of_sampler_reads_only_the_windows():
    sampler = types.SimpleNamespace(
        intervals=[interval(T0 + t, 1.0 if t < 3 else 0.0) for t in range(10)],
        load_averages=[0.5],
    )
    state = machine.of_sampler(sampler, [(T0 + 3, T0 + 8)])
    assert state.seconds == 5.0 and state.other_mean == 0.0 and state.disturbed() is None
    assert machine.of_sampler(None, [(T0, T0 + 1)]) is None
    busy = machine.of_sampler(sampler, [(T0, T0 + 2)])
    assert busy.headline().startswith("DISTURBED (other processes used 1.00 core on average): ")
