"""pooled_rps's counts line: what the runner logs, and what a capacity probe reads from it."""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path

from rally_keystone_bench.driver import probers
from rally_keystone_bench.driver import rally as rallyenv
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.plugins.runners import pooled_rps
from rally_keystone_bench.plugins.runners.progress import PROGRESS, Totals, parse_progress

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_pooled_rps as worker  # noqa: E402

UUID = "12345678-1234-1234-1234-123456789abc"


def test_a_counts_line_round_trips_and_totals_sum_the_latest_per_process():
    line = "2026-11-21 INFO rally_keystone_bench.plugins.runners.pooled_rps [-] " + PROGRESS.format(
        pid=7, started=5, done=3, failed=0
    )
    assert parse_progress(line) == (7, 5, 3, 0)
    assert parse_progress("Task x | ITER: 3 END: OK") is None
    totals = Totals()
    assert totals.add((7, 5, 3, 0)) == (5, 3, 0)
    assert totals.add((8, 4, 4, 0)) == (9, 7, 0)
    assert totals.add((7, 9, 8, 1)) == (13, 12, 1)  # pid 7's newer line replaces its older


class Failing(worker.Sleepy):
    def run(self, **kwargs) -> None:
        if self.context["iteration"] == 3:
            raise RuntimeError("third iteration fails")


def test_the_runner_logs_its_counts_and_a_first_failure_at_once(monkeypatch):
    lines: list[str] = []

    class Log:
        def info(self, text: str) -> None:
            lines.append(text)

        debug = info

    monkeypatch.setattr(pooled_rps, "LOG", Log())
    monkeypatch.setattr(worker, "Sleepy", Failing)
    results = worker.run_worker(times=6, rate=10_000, concurrency=2, args={})
    assert len(results) == 6
    counts = [parse_progress(line) for line in lines if parse_progress(line)]
    assert counts[-1][1:] == (6, 6, 1)  # the final line: started, done, failed
    assert any(c[3] == 1 for c in counts[:-1])  # the failure was told before the end


def test_a_probe_reads_the_counts_and_stops_at_the_first_failure(tmp_path, monkeypatch):
    fake = tmp_path / "rally"
    fake.write_text(
        "#!" + sys.executable + "\n"
        "import sys, time\n"
        "print(open(sys.argv[2]).read().splitlines()[0], flush=True)\n"
        f"print('Task {UUID}: started', flush=True)\n"
        "for line in ['pid 1 started 5 done 3 failed 0', 'pid 2 started 4 done 4 failed 0',\n"
        "             'pid 1 started 9 done 8 failed 1']:\n"
        "    print('INFO pooled_rps progress: ' + line, flush=True)\n"
        "    time.sleep(0.05)\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(rally_task, "rally_executable", lambda: str(fake))
    aborted = threading.Event()

    class Home:
        path = tmp_path
        config_path = tmp_path / "rally.conf"

        def quiet_config(self) -> Path:
            path = tmp_path / "rally-quiet.conf"
            path.write_text("quiet\n")
            return path

        def environ(self) -> dict:
            return dict(os.environ)

        def rally(self, *args, check=True):
            assert args == ("task", "abort", UUID)
            aborted.set()

    ticks = []
    task_args = {"rps": 10, "max_concurrency": 50, "warmup": 10, "window": 30}
    task_args["runner"] = "pooled_rps"
    watcher = probers.ProbeWatcher(task_args, True, print, 1, 400)

    def watch(run, line):
        ticks.append((run.counts.started, run.counts.done, run.counts.failed))
        watcher(run, line)

    home = Home()
    run = rally_task.start_task(
        home, "env", tmp_path / "probe.yaml", task_args, tmp_path / "probe.log",
        config=home.quiet_config(), watch=watch,
    )  # fmt: skip
    assert (run.rc, run.uuid, run.stopped_for) == (0, UUID, "an iteration failed")
    assert aborted.wait(5)
    assert (5, 3, 0) in ticks and (9, 7, 0) in ticks and ticks[-1] == (13, 12, 1)
    assert (tmp_path / "probe.log").read_text().startswith("quiet\n")  # the quiet config


def test_the_quiet_config_silences_only_the_iteration_lines(tmp_path):
    conf = tmp_path / "rally.conf"
    conf.write_text(
        "[DEFAULT]\nlog_file = /x/rally.log\n\n[database]\nconnection = sqlite:////x/db\n"
    )
    quiet = rallyenv.RallyHome(tmp_path).quiet_config().read_text()
    assert quiet.startswith("[DEFAULT]\ndefault_log_levels = ")
    levels = quiet.splitlines()[1].split(" = ")[1].split(",")
    assert "rally.task.runner=WARN" in levels
    assert "sqlalchemy=WARN" in levels  # oslo.log's own defaults are kept
    assert "log_file = /x/rally.log" in quiet and "connection = sqlite:////x/db" in quiet
