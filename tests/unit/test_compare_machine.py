"""compare knows the machine: a disturbed run or another deployment gives exit 3, never 1."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from rally_keystone_bench import cli
from rally_keystone_bench.verdicts import compare, machine, results
from rally_keystone_bench.verdicts.cpu import TICKS, Interval
from rally_keystone_bench.verdicts.machine import MachineState

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = FIXTURES / "rally-keystone-tokens.json"
sys.path.insert(0, str(FIXTURES))
import synthetic  # noqa: E402

QUIET = MachineState(60.0, 2, 0.02, 0.15, 0.0, 0.4, 1.1, 2.0)
HOGGED = MachineState(60.0, 2, 0.95, 1.0, 0.0, 0.4, 1.1, 3.9)


def run_dir(root: Path, state: MachineState | None, deployment: str | None, slow: float = 1.0):
    """A directory as ``run`` leaves it: the Rally JSON, its summary, deployment.json."""
    root.mkdir()
    report = root / "token-suite.json"
    if slow == 1.0:
        shutil.copy(REAL, report)
    else:
        doc = synthetic.slow_down(json.loads(REAL.read_text()), "keystone.issue_token", slow)
        report.write_text(json.dumps(doc))
    if state is not None:
        summary = root / "token-suite-summary" / "summary.json"
        summary.parent.mkdir()
        summary.write_text(json.dumps({"workloads": [], "machine": state.as_dict()}))
    if deployment is not None:
        (root / "deployment.json").write_text(json.dumps({"deployment": deployment}))
    return str(report)


def test_a_run_under_a_hog_makes_an_a_a_compare_inconclusive(tmp_path, capsys):
    base = run_dir(tmp_path / "a", QUIET, "keystone uwsgi 2x1 sqlite traced")
    cand = run_dir(tmp_path / "b", HOGGED, "keystone uwsgi 2x1 sqlite traced", slow=1.5)
    assert cli.main(["compare", base, cand]) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("INCONCLUSIVE (threshold 10%")
    assert "the candidate run was disturbed: other processes used 0.95 core on average" in out[0]
    assert out[1].startswith("advice: for a verdict on a change, run keystone-bench gate")
    assert any(x.startswith("candidate machine: DISTURBED") for x in out)
    assert any(x.startswith("base machine: other processes 0.02 core (peak 0.15)") for x in out)


def test_two_quiet_runs_of_one_deployment_get_a_verdict(tmp_path, capsys):
    base = run_dir(tmp_path / "a", QUIET, "keystone uwsgi 2x1 sqlite traced")
    cand = run_dir(tmp_path / "b", QUIET, "keystone uwsgi 2x1 sqlite traced", slow=1.5)
    assert cli.main(["compare", base, cand]) == 1
    assert capsys.readouterr().out.startswith("REGRESSION")


def test_traced_against_untraced_is_inconclusive(tmp_path, capsys):
    base = run_dir(tmp_path / "a", QUIET, "keystone uwsgi 2x1 sqlite traced")
    cand = run_dir(tmp_path / "b", QUIET, "keystone uwsgi 2x1 sqlite", slow=1.5)
    assert cli.main(["compare", base, cand]) == 3
    assert "differ in deployment" in capsys.readouterr().out.splitlines()[0]


def test_a_plain_rally_report_says_its_machine_is_unknown(tmp_path, capsys):
    assert cli.main(["compare", str(REAL), str(REAL)]) == 0
    out = capsys.readouterr().out
    assert "base machine: unknown (no record: a report of plain rally)" in out


def test_the_record_is_taken_over_the_load_windows_only():
    # Two cores; a one-core hog before the load, none during it.
    def iv(t: float, other_cores: float) -> Interval:
        groups = {"generator": int(0.5 * TICKS), "deployment": int(0.5 * TICKS)}
        return Interval(t, t + 1.0, int((other_cores + 1.0) * TICKS), 0, groups, {})

    intervals = [iv(t, 1.0) for t in range(10)] + [iv(t, 0.0) for t in range(10, 30)]
    state = machine.from_intervals(intervals, [(10.0, 30.0)], [1.5, 2.5], cores=2)
    assert state.seconds == 20 and state.other_mean == 0.0 and state.disturbed() is None
    assert state.generator_mean == 0.5 and state.deployment_mean == 0.5
    hogged = machine.from_intervals(intervals, [(0.0, 30.0)], cores=2)
    assert hogged.disturbed() == "other processes used 0.33 core on average"


def test_holm_over_the_compare_family_and_throughput_interval():
    wls = results.load(REAL)
    res = compare.compare_workloads(wls, wls)
    assert res.tests == sum(1 for w in res.workloads for c in w.actions if c.p_value == c.p_value)
    assert res.tests > 1 and f"Holm over {res.tests} tests" in res.headline()
    for w in res.workloads:
        t = w.throughput
        if t is not None and t.has_interval:
            assert t.ci_low <= t.ratio <= t.ci_high  # an estimate inside its own interval
        elif t is not None:
            assert t.as_dict()["ci_low"] is None


def test_an_estimate_outside_its_interval_is_not_printed():
    c = compare.compare_one("throughput", [0, 0, 0, 4, 5], [0, 0, 3, 4, 4], kind="throughput")
    c.ratio, c.ci_low, c.ci_high = 0.765, 0.0, 0.76  # as seen on a page
    assert not c.has_interval
    from rally_keystone_bench.report.compare import _numbers

    assert "[0.00, 0.76]" not in _numbers(c) and "no interval" in _numbers(c)
