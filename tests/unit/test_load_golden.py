"""What ``keystone-bench load`` writes and prints after the load, on both engines, golden.

Nothing is started: no Keystone, no Rally, no Locust. The settings are the
verb's door (``load.at_the_door``) on a parsed command line, load.json the
record ``load.main`` builds (``load_record``, a fixed start) and writes
before the load; then the verb's own functions run on recorded inputs:

- ``--engine rally``: the validate workload of the recorded Rally report
  (rally-keystone-tokens.json, 40 iterations) as the probe's report, through
  ``report_run`` (``summarize``): stdout, load.json, summary.json and
  summary.html;
- ``--engine locust``: ``run_locust`` with the target and the master
  replaced by what a master leaves (seeded samples.json and run.json, and a
  recorded machine sampler), so that the engine builds locust-report.json
  (``engine._result``) and the prober and ``report_run`` read it as they do
  after a real load: locust-report.json, stdout, load.json and summary.json.

The check and the recording are test_golden_outputs.py's (``check``):
``KEYSTONE_BENCH_RECORD_GOLDEN=1 pytest tests/unit/test_load_golden.py``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import re
import types
from pathlib import Path

import pytest
from test_golden_outputs import REAL, check

from rally_keystone_bench import cli, procstat
from rally_keystone_bench.engines.locust import engine
from rally_keystone_bench.engines.locust import samples as sm
from rally_keystone_bench.history import store as history_store
from rally_keystone_bench.report import locust_report
from rally_keystone_bench.verbs import load
from rally_keystone_bench.verdicts import machine
from rally_keystone_bench.verdicts.cpu import GENERATOR
from rally_keystone_bench.verdicts.probing import LoadRun

STARTED = "2026-11-29T12:00:00+00:00"  # load.main's start, fixed
T0 = 1_800_000_000.0  # the recorded Locust load's start (epoch seconds)
RATE, DURATION = 10.0, 5.0
GENERATED_RE = re.compile(r'"generated_at": "[^"]*"')  # the Locust report's own date


@pytest.fixture(autouse=True)
def _quiet_environment(monkeypatch):
    """No results store from the environment; the recording machine's core count."""
    monkeypatch.delenv(history_store.ENV_VAR, raising=False)
    monkeypatch.setattr(machine, "os", types.SimpleNamespace(cpu_count=lambda: 2))


def output(engine_name: str, tmp_path: Path) -> tuple[load.LoadSettings, load.LoadOutput]:
    """The verb's settings at its door and its LoadOutput, load.json written (as main does)."""
    argv = ["load", "--engine", engine_name, "--target", "mock", "--scenario", "validate"]
    argv += ["--rate", f"{RATE:g}", "--duration", f"{DURATION:g}"]
    argv += ["--reports-dir", str(tmp_path / "reports")]
    door = load.at_the_door(cli.build_parser().parse_args(argv))
    assert door is not None
    settings, cloud = door
    assert cloud is None and settings.history is None
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = load.LoadOutput(out_dir, load.load_record(settings, STARTED))
    out.write_record()
    return settings, out


def test_rally_engine(tmp_path, capsys):
    """The probe's report: the recorded validate workload; no machine sampled."""
    doc = json.loads(REAL.read_text())
    (task,) = doc["tasks"]
    task["subtasks"] = [
        dict(s, workloads=[w])
        for s in task["subtasks"]
        for w in s["workloads"]
        if "KeystoneTokens.validate" in w["scenario"]
    ]
    _, out = output("rally", tmp_path)
    report = out.dir / load.RUN_FILES["rally"][0]
    report.write_text(json.dumps(doc))
    capsys.readouterr()
    assert load.report_run(LoadRun(report, out.dir / "rally-task.log"), out) == 0
    check("load-rally.stdout", capsys.readouterr().out, tmp_path)
    for name in ("load.json", "summary.json", "summary.html"):
        check(f"load-rally.{name}", (out.dir / name).read_text(), tmp_path)


def locust_samples() -> list[list]:
    """The validate samples of 10 rps for 5 s on one worker, seeded: the sends late by
    a little, now and then by a lot; one request failed."""
    rng = random.Random(43)
    out = []
    for k in range(int(RATE * DURATION)):
        due = T0 + k / RATE
        sent = due + rng.uniform(0.0, 0.002) + (0.15 if k % 17 == 16 else 0.0)
        answered = sent + rng.lognormvariate(-4.6, 0.3)
        status, error = 200, ""
        if k == 23:
            status, error = 500, "TokenRequestError: validate token: HTTP 500: injected error"
        out.append([k, sm.VALIDATE, due, sent, answered, status, error])
    return out


def master_files(where: Path, s: engine.LoadSettings) -> None:
    """WHERE's samples.json and run.json, as the master writes them (master_files.write)."""
    samples = locust_samples()
    n = len(samples)
    run = {
        "scenario": s.scenario,
        "runner": {
            "rps": s.rate,
            "times": n,
            "workers": 1,
            "users": s.connections,
            "arrival": s.arrival,
            "warmup": s.warmup,
            "duration": s.duration,
            "http": s.http,
        },
        "t0": T0,
        "workers": {
            "worker-0": {
                "index": 0,
                "reported": n,
                "received": n,
                "users": s.connections,
                "late_sends": 3,
                "stopped_in_step": None,
            }
        },
        "lost": [],
        "samples_total": n,
        "samples_reported": n,
        "samples_in_report": n,
        "failed_samples": sum(1 for x in samples if x[6]),
        "left_behind": [],
        "admin_retries": None,
        "error": None,
        "interrupted": False,
        "keystone_users": s.connections,
        "warmup_cut": None,
        "load_start": T0,
        "setup": [T0 - 3.0, T0 - 1.0],
    }
    where.mkdir(parents=True, exist_ok=True)
    (where / "samples.json").write_text(json.dumps(samples))
    (where / "run.json").write_text(json.dumps(run, indent=1))


def recorded_sampler() -> types.SimpleNamespace:
    """The machine over the load, every half second: what procstat.Sampler leaves."""
    intervals = []
    for i in range(12):
        start = T0 - 0.5 + 0.5 * i
        groups = {GENERATOR: 12 + i % 3, machine.DEPLOYMENT: 20 + i % 5}
        busy = sum(groups.values()) + (9 if i == 7 else 1)
        intervals.append(procstat.Interval(start, start + 0.5, busy, 0, groups, {}))
    return types.SimpleNamespace(intervals=intervals, load_averages=[0.31, 0.52, 0.47])


def test_locust_engine(tmp_path, capsys, monkeypatch):
    """The master's files, seeded, through the engine, the prober and the verb's report."""
    settings, out = output("locust", tmp_path)

    @contextlib.contextmanager
    def no_target(settings, run_dir, say=None, cloud=None):
        yield {"auth_url": "http://mock.invalid/identity/v3"}, "mock (recorded)"

    def recorded_master(s, credential, out_dir, say, run_id=None, sampling=None):
        master_files(out_dir, s)
        return engine._result(out_dir, 12.0, [out_dir / "master.log"], recorded_sampler())

    uuids = (f"00000000-0000-4000-8000-{n:012d}" for n in itertools.count())
    monkeypatch.setattr(load, "admin_target", no_target)
    monkeypatch.setattr(engine, "run_load", recorded_master)
    monkeypatch.setattr(locust_report, "uuid_mod", types.SimpleNamespace(uuid4=lambda: next(uuids)))
    capsys.readouterr()
    assert load.run_locust(settings, out, tmp_path / "run") == 1  # the one failed request
    report = (out.dir / load.RUN_FILES["locust"][0]).read_text()
    check(
        "load-locust.locust-report.json",
        GENERATED_RE.sub('"generated_at": "<now>"', report),
        tmp_path,
    )
    check("load-locust.stdout", capsys.readouterr().out, tmp_path)
    for name in ("load.json", "summary.json"):
        check(f"load-locust.{name}", (out.dir / name).read_text(), tmp_path)
