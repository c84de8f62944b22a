"""compare: verdicts, exit codes and output files, on synthetic Rally reports."""

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.verdicts import compare, results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402


@pytest.fixture(scope="module")
def run():
    """One run: 600 token requests at concurrency 2, some failed, plus a burst workload."""
    auth = synthetic.iterations(600, error_every=100, seed=11)
    burst = synthetic.iterations(
        40,
        actions=["keystone.concurrent_burst"],
        nested={"keystone.concurrent_burst": ("keystone.issue_token", 10)},
        seed=12,
    )
    return synthetic.report(
        [
            synthetic.workload(auth),
            synthetic.workload(
                burst, scenario="KeystoneTokens.concurrent_create", args={"count": 10}
            ),
        ]
    )


def _files(tmp_path, a, b):
    return (
        synthetic.write(str(tmp_path / "base.json"), a),
        synthetic.write(str(tmp_path / "cand.json"), b),
    )


def test_aa_split_reports_no_significant_change(tmp_path, run, capsys):
    a, b = synthetic.split(run, seed=1)
    base, cand = _files(tmp_path, a, b)
    assert cli.main(["compare", base, cand]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("no regression")
    for line in out.splitlines():
        if "keystone." in line and "ms" in line:
            assert "no significant change" in line


def test_thirty_percent_slower_action_is_flagged_with_exit_1(tmp_path, run, capsys):
    a, b = synthetic.split(run, seed=2)
    b = synthetic.slow_down(b, "keystone.issue_token", 1.3)
    base, cand = _files(tmp_path, a, b)
    assert cli.main(["compare", base, cand]) == 1
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("REGRESSION") and "keystone.issue_token" in first
    line = next(ln for ln in out.splitlines() if ln.lstrip("! ").startswith("keystone.issue_token"))
    assert line.startswith(" !")
    ratio = float(line.split("x slower")[0].split()[-1])
    assert 1.2 < ratio < 1.4


def test_faster_candidate_passes_and_says_faster(tmp_path, run, capsys):
    a, b = synthetic.split(run, seed=3)
    b = synthetic.slow_down(b, "keystone.issue_token", 1 / 1.3)
    assert cli.main(["compare", *_files(tmp_path, a, b)]) == 0
    assert "x faster" in capsys.readouterr().out


def test_significant_change_below_threshold_passes(tmp_path, run, capsys):
    a, b = synthetic.split(run, seed=4)
    b = synthetic.slow_down(b, "keystone.issue_token", 1.3)
    assert cli.main(["compare", *_files(tmp_path, a, b), "--threshold", "50"]) == 0
    assert "below the 50% threshold" in capsys.readouterr().out


def test_json_html_junit_outputs(tmp_path, run):
    a, b = synthetic.split(run, seed=5)
    b = synthetic.slow_down(b, "keystone.issue_token", 1.3)
    base, cand = _files(tmp_path, a, b)
    out = tmp_path / "out"
    out.mkdir()
    rc = cli.main(
        ["compare", base, cand, "--json", str(out / "c.json"), "--html", str(out / "c.html"),
         "--junit", str(out / "c.xml")]
    )  # fmt: skip
    assert rc == 1
    data = json.loads((out / "c.json").read_text())
    assert data["exit_code"] == 1 and data["regression"] is True
    issue = next(c for c in data["workloads"][0]["actions"] if c["name"] == "keystone.issue_token")
    assert issue["regression"] and issue["ci_low"] <= issue["ratio"] <= issue["ci_high"]
    assert data["workloads"][0]["throughput"]["name"] == "throughput"
    suite = ET.parse(out / "c.xml").getroot()
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert "keystone.issue_token" in failed and int(suite.get("failures")) == len(failed)
    html = (out / "c.html").read_text()
    assert "REGRESSION" in html and "<script" not in html


@pytest.mark.parametrize(
    "content,reason",
    [
        ('{"info": {"format_version": "1.2"}, "tasks": [{"subtasks": [', "truncated"),
        ("[1, 2, 3]", "not a Rally JSON report"),
        ("<html></html>", "not a Rally JSON report"),
    ],
)
def test_malformed_input_exits_2_naming_file(tmp_path, run, capsys, content, reason):
    good = synthetic.write(str(tmp_path / "good.json"), run)
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert cli.main(["compare", good, str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and reason in err and len(err.strip().splitlines()) == 1


def test_missing_file_exits_2(tmp_path, run, capsys):
    good = synthetic.write(str(tmp_path / "good.json"), run)
    assert cli.main(["compare", str(tmp_path / "absent.json"), good]) == 2
    assert "absent.json" in capsys.readouterr().err


def test_no_shared_workload_exits_2(tmp_path, run, capsys):
    other = synthetic.report(
        [synthetic.workload(synthetic.iterations(50), runner={"times": 50, "concurrency": 8})]
    )
    assert cli.main(["compare", *_files(tmp_path, run, other)]) == 2
    assert "shares no workload" in capsys.readouterr().err


def test_pairing_needs_same_scenario_args_and_runner(run):
    wls = results.from_report(run)
    other_args = results.from_report(
        synthetic.report([synthetic.workload(synthetic.iterations(20), args={"scope": "domain"})])
    )
    pairs, only_b, only_c = compare.pair_workloads(wls, other_args)
    assert pairs == [] and len(only_b) == 2 and len(only_c) == 1


def test_compare_samples_on_pooled_arrays():
    rng = np.random.default_rng(0)
    base = {"keystone.issue_token": rng.lognormal(-3, 0.2, 500), "only.base": [1.0] * 10}
    cand = {"keystone.issue_token": rng.lognormal(-3, 0.2, 500) * 1.25}
    (c,) = compare.compare_samples(base, cand)
    assert c.regression and c.verdict.endswith("x slower")
    assert c.ratio == pytest.approx(1.25, rel=0.05)


def test_too_few_samples_is_never_a_regression():
    (c,) = compare.compare_samples({"a": [1.0, 1.1]}, {"a": [5.0, 5.1]})
    assert not c.regression and c.verdict.startswith("too few samples")


def test_lower_throughput_is_reported_but_does_not_gate():
    c = compare.compare_throughput(
        [100.0 + i % 3 for i in range(30)], [50.0 + i % 3 for i in range(30)]
    )
    assert c.verdict.endswith("x lower") and not c.regression


def test_bad_alpha_exits_2(tmp_path, run, capsys):
    assert cli.main(["compare", *_files(tmp_path, run, run), "--alpha", "5"]) == 2
