"""The driver's write_reports: where Rally's reports land, seen from our directory."""

import json
import subprocess
import sys
from pathlib import Path

from rally_keystone_bench.driver import outcome as task_outcome
from rally_keystone_bench.driver import task_reports

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402


class RallyInItsOwnHome:
    """Writes reports as the real CLI does: relative paths from its home directory."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def rally(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        out = Path(args[args.index("--out") + 1])
        out = out if out.is_absolute() else self.home / out
        if not out.parent.is_dir():
            return subprocess.CompletedProcess(args, 1, "", f"No such directory: {out.parent}")
        if "--json" in args:
            data = synthetic.iterations(10, seed=1)
            out.write_text(json.dumps(synthetic.report([synthetic.workload(data)])))
        else:
            out.write_text("<html></html>")
        return subprocess.CompletedProcess(args, 0, "", "")


def test_a_relative_reports_directory_gets_the_reports(tmp_path, monkeypatch):
    # keystone-bench matrix/gate/capacity default to --reports-dir reports:
    # the task's results once went to Rally's home, and the run had none.
    home = tmp_path / "rally-home"
    home.mkdir()
    monkeypatch.chdir(tmp_path)
    out_dir = Path("reports") / "20261121T000000Z" / "one"
    out_dir.mkdir(parents=True)
    outcome = task_outcome.TaskOutcome(Path("tasks/x.yaml"), "uuid", 0)
    task_reports.write_reports(RallyInItsOwnHome(home), outcome, out_dir)
    assert len(outcome.workloads) == 1
    assert outcome.json_report == (tmp_path / out_dir / "x.json")
    assert outcome.json_report.is_file() and outcome.html_report.is_file()
    assert not (home / "reports").exists()
