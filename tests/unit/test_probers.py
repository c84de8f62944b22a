"""One prober interface for both verbs and both engines (verdicts/probing.py).

``load`` and ``capacity`` run every load through ``Prober.run``; the engines
themselves are stood in for here (the real ones run in tests/functional:
test_locust_engine, test_locust_interrupted, test_capacity_live): Locust's
``engine.run_load`` writes what its master writes, Rally's ``start_task``
and ``rally task report`` what Rally's would.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.driver import probe_args, targets
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.probers import RallyProber
from rally_keystone_bench.engines.locust import engine
from rally_keystone_bench.engines.locust.prober import LocustProber
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verbs import load
from rally_keystone_bench.verdicts import capacity

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))
import synthetic  # noqa: E402

SETTINGS = capacity.Settings("validate", 10, 10, warmup=2, window=10, max_slope=0.01, precision=1)


def report_json(failed_every: int = 0) -> str:
    data = synthetic.iterations(40, ("keystone.validate_token",), error_every=failed_every)
    return json.dumps(synthetic.report([synthetic.workload(data, "KeystoneTokens.validate")]))


def fake_locust(monkeypatch, seen: list, failed_every: int = 0, interrupt: bool = False, **meta):
    """engine.run_load leaving what it leaves (run.json's figures, the samples, the report)."""

    def run_load(s, credential, out_dir, say=None, run_id=None, sampling=None):
        seen.append((s, out_dir))
        out_dir.mkdir(parents=True, exist_ok=True)
        figures = {"workers": ["w0"], "samples_total": 40, "samples_reported": 40}
        figures.update(samples_in_report=40, t0=synthetic.T0, **meta)
        (out_dir / "locust-report.json").write_text(report_json(failed_every))
        (out_dir / "samples.json").write_text("[]")
        result = engine.LoadResult(
            out_dir / "locust-report.json", out_dir / "samples.json", figures, out_dir
        )
        if interrupt:
            exc = KeyboardInterrupt()
            exc.result = result
            raise exc
        return result

    monkeypatch.setattr(engine, "run_load", run_load)


def load_argv(tmp_path: Path, *more: str) -> list[str]:
    argv = ["load", "--scenario", "validate", "--rate", "4", "--duration", "10"]
    return argv + ["--target", "mock", "--reports-dir", str(tmp_path / "r"), *more]


@pytest.fixture
def no_target(monkeypatch):
    @contextlib.contextmanager
    def admin_target(settings, run_dir, say=None, cloud=None):
        yield {"auth_url": "http://127.0.0.1:9"}, "a stand-in target"

    monkeypatch.setattr(load, "admin_target", admin_target)


def test_load_on_locust_keeps_its_report_and_says_1_for_failed_requests(
    tmp_path, capsys, monkeypatch, no_target
):
    seen: list = []
    fake_locust(monkeypatch, seen, failed_every=10)
    assert cli.main(load_argv(tmp_path)) == 1
    (run_dir,) = (tmp_path / "r").iterdir()
    out = capsys.readouterr().out
    assert f"report: {run_dir / 'locust-report.json'}" in out
    assert "; 4 failed" in out and f"samples: {run_dir / 'locust' / 'samples.json'}" in out
    assert "workers: 1; samples: 40 received of 40 the workers sent, 40 in the report" in out
    engines_own = run_dir / "locust" / "locust-report.json"
    assert (run_dir / "locust-report.json").read_text() == engines_own.read_text()
    ((settings, out_dir),) = seen
    assert out_dir == run_dir / "locust" and settings.rate == 4 and settings.timeout == 60


@pytest.mark.parametrize(
    "meta, said",
    [
        ({"error": "worker w1 was lost"}, "worker w1 was lost (report kept: "),
        ({"left_behind": ["user-1", "project-2"]}, "left in Keystone: user-1, project-2"),
    ],
)
def test_load_on_locust_that_fell_short_is_2_after_its_summary(
    tmp_path, capsys, monkeypatch, no_target, meta, said
):
    fake_locust(monkeypatch, [], **meta)
    assert cli.main(load_argv(tmp_path)) == 2
    out, err = capsys.readouterr()
    assert "workers: 1;" in out and said in err
    assert list((tmp_path / "r").glob("*/summary.json"))


def test_an_interrupted_load_reports_what_it_kept(tmp_path, capsys, monkeypatch, no_target):
    fake_locust(monkeypatch, [], interrupt=True)
    assert cli.main(load_argv(tmp_path)) == 130
    out = capsys.readouterr().out
    assert "interrupted: 40 samples kept" in out
    assert list((tmp_path / "r").glob("*/locust-report.json"))


class FakeHome:
    """A Rally home whose ``rally task report`` writes REPORT (or fails)."""

    def __init__(self, report: str | None) -> None:
        self.report = report
        self.path = Path("no-rally-home")  # no rally.sqlite: no workload uuids to name

    def quiet_config(self) -> Path:
        return Path("quiet.conf")

    def rally(self, *args: str, check: bool = True, **_kw) -> subprocess.CompletedProcess:
        if self.report is None:
            return subprocess.CompletedProcess(args, 1, "", "Task u-1 not found\n")
        Path(args[args.index("--out") + 1]).write_text(self.report)
        return subprocess.CompletedProcess(args, 0, "", "")


def fake_rally(monkeypatch, seen: list, uuid: str | None = "u-1", stopped_for=None):
    def start_task(home, env, task_file, task_args, log_path, **kw):
        seen.append((task_args, log_path, kw))
        log_path.write_text("rally said this\n")
        run = rally_task.TaskRun(home, task_file, log_path)
        run.uuid, run.rc, run.stopped_for = uuid, 0 if uuid else 1, stopped_for
        return run

    monkeypatch.setattr(rally_task, "start_task", start_task)


@pytest.mark.parametrize(
    "uuid, report, said",
    [
        (None, report_json(), "rally task start exited 1 without a result; see "),
        ("u-1", None, "rally task report failed: Task u-1 not found"),
    ],
)
def test_load_on_rally_without_a_result_is_one_line_and_2(
    tmp_path, capsys, monkeypatch, uuid, report, said
):
    @contextlib.contextmanager
    def prepared_env(run_dir, **kw):
        yield types.SimpleNamespace(home=FakeHome(report), name="e", auth_url="http://x")

    monkeypatch.setattr(targets, "prepared_env", prepared_env)
    seen: list = []
    fake_rally(monkeypatch, seen, uuid=uuid)
    assert cli.main(load_argv(tmp_path, "--engine", "rally")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert said in err[-1]
    ((task_args, log_path, kw),) = seen
    assert log_path.name == "rally-task.log" and kw["extra"] == [] and kw["watch"] is None
    assert task_args["rps"] == 4 and task_args["times"] == 40


def test_a_rally_probe_and_a_load_are_the_same_run(tmp_path, monkeypatch):
    seen: list = []
    fake_rally(monkeypatch, seen, stopped_for="an iteration failed")
    prober = RallyProber(FakeHome(report_json()), "e", SETTINGS, tmp_path)
    run = prober.run(10, tmp_path / "r.json", tmp_path / "r.log")
    assert run.report == tmp_path / "r.json" and run.uuid == "u-1" and run.error is None
    probe = prober(10, "search")
    assert probe.report == str(tmp_path / "probe-01-10rps.json")
    assert probe.stopped_for == "an iteration failed" and probe.task_uuid == "u-1"
    (load_args, _, _), (probe_task_args, log_path, kw) = seen
    assert load_args == probe_task_args == probe_args.task_args(SETTINGS, 10)
    assert log_path.name == "probe-01-10rps.rally.log"
    assert kw["extra"] == ["--abort-on-sla-failure"]


def test_a_rally_probe_without_a_result_names_the_probe(tmp_path, monkeypatch):
    fake_rally(monkeypatch, [], uuid=None)
    prober = RallyProber(FakeHome(None), "e", SETTINGS, tmp_path)
    with pytest.raises(BenchError, match=r"^probe 1 \(probe-01-10rps\): rally task start exited"):
        prober(10, "search")


def test_a_locust_probe_is_a_load_kept_in_its_own_directory(tmp_path, monkeypatch):
    seen: list = []
    fake_locust(monkeypatch, seen)
    prober = LocustProber({}, SETTINGS, tmp_path, lambda _line: None)
    probe = prober(10, "search")
    assert probe.report == str(tmp_path / "probe-01-10rps" / "locust-report.json")
    ((settings, out_dir),) = seen
    assert out_dir == tmp_path / "probe-01-10rps" and settings.timeout == 10.0
    fake_locust(monkeypatch, [], error="worker w1 was lost")
    with pytest.raises(BenchError, match=r"^probe-02-10rps: worker w1 was lost$"):
        prober(10, "search")


def test_a_ramp_whose_context_failed_says_which_in_one_line(tmp_path, monkeypatch):
    """Seen on a machine at load 24: token_pool's token issues timed out, the ramp ran no
    iteration, and the search died on an empty array ("unexpected error")."""
    failure = (
        "2026-11-29 02:53:34.489 29769 ERROR rally.task.engine [-] Unexpected exception "
        "during the workload execution: rally.exceptions.ContextSetupFailure: Unable to "
        "setup context 'token_pool': 'issue a project-scoped token: timed out'\n"
    )

    def start_task(home, env, task_file, task_args, log_path, **kw):
        log_path.write_text(failure)
        run = rally_task.TaskRun(home, task_file, log_path)
        run.uuid, run.rc = "u-1", 1
        return run

    monkeypatch.setattr(rally_task, "start_task", start_task)
    empty = json.dumps(synthetic.report([synthetic.workload([], "KeystoneTokens.validate")]))
    prober = RallyProber(FakeHome(empty), "e", SETTINGS, tmp_path)
    with pytest.raises(BenchError) as err:
        prober.ramp([1, 15, 29])
    assert str(err.value).startswith(
        "probe 1 (probe-01-ramp) ran no iteration: Unable to setup context 'token_pool': "
        "'issue a project-scoped token: timed out'; see "
    )
