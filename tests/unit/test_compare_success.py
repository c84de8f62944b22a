"""compare: success is part of the verdict (the paired gate: tests/unit/test_gate.py).

Synthetic reports with 0 %, 1 %, 50 %, 100 % failed iterations and with no
iterations, against a base that never failed.
"""

import json
import math
import sys
import xml.etree.ElementTree as ET
from itertools import product
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.verdicts import compare, results, stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402

RUNNER = {"times": 400, "concurrency": 2}  # the same task on both sides


def report(n: int, error_every: int = 0, seed: int = 0) -> dict:
    data = synthetic.iterations(n, error_every=error_every, seed=seed)
    return synthetic.report([synthetic.workload(data, runner=dict(RUNNER))])


def files(tmp_path, base: dict, cand: dict) -> list[str]:
    return [
        synthetic.write(str(tmp_path / "base.json"), base),
        synthetic.write(str(tmp_path / "cand.json"), cand),
    ]


@pytest.fixture
def base():
    return report(400, seed=1)


def test_no_failure_passes(tmp_path, base, capsys):
    assert cli.main(["compare", *files(tmp_path, base, report(400, seed=2))]) == 0
    assert capsys.readouterr().out.startswith("no regression")


def test_one_percent_failed_of_400_is_not_significant(tmp_path, base, capsys):
    # 4 failures against none: Fisher's p is about 0.06, more than alpha 0.01.
    assert cli.main(["compare", *files(tmp_path, base, report(400, 100, seed=2))]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no regression") and "failures" not in out


def test_one_percent_failed_of_2000_is_a_regression(tmp_path, capsys):
    b, c = report(2000, seed=1), report(2000, 100, seed=2)
    for r in (b, c):  # same runner on both sides
        r["tasks"][0]["subtasks"][0]["workloads"][0]["runner"] = {"constant": dict(RUNNER)}
    assert cli.main(["compare", *files(tmp_path, b, c)]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("REGRESSION") and "failures 0.0% -> 1.0% (+1.0 points" in first


def test_max_failure_increase_allows_a_small_significant_increase(tmp_path, capsys):
    b, c = report(2000, seed=1), report(2000, 100, seed=2)
    for r in (b, c):
        r["tasks"][0]["subtasks"][0]["workloads"][0]["runner"] = {"constant": dict(RUNNER)}
    args = ["compare", *files(tmp_path, b, c), "--max-failure-increase", "2"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("no regression") and "below the 2-point limit" in out


def test_half_failed_is_a_regression_with_the_reason_first(tmp_path, base, capsys):
    assert cli.main(["compare", *files(tmp_path, base, report(400, 2, seed=2))]) == 1
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("REGRESSION") and "failures 0.0% -> 50.0% (+50.0 points" in first
    line = next(ln for ln in out.splitlines() if ln.lstrip("! ").startswith("keystone.issue"))
    assert line.startswith(" !") and line.split()[1] == "failures"


def test_every_iteration_failed_is_a_regression(tmp_path, base, capsys):
    assert cli.main(["compare", *files(tmp_path, base, report(400, 1, seed=2))]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("REGRESSION") and "every one failed (0 of 400 succeeded" in first


def test_no_iteration_is_a_regression(tmp_path, base, capsys):
    assert cli.main(["compare", *files(tmp_path, base, report(0))]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("REGRESSION") and "iterations: none ran" in first


def test_candidate_without_any_workload_is_a_regression(tmp_path, base, capsys):
    empty = synthetic.report([])
    assert cli.main(["compare", *files(tmp_path, base, empty)]) == 1
    assert "iterations: none ran" in capsys.readouterr().out.splitlines()[0]


def test_action_that_never_ran_in_the_candidate_is_a_regression():
    actions = ("keystone.issue_token", "keystone.validate_token")
    b = synthetic.iterations(100, actions=actions, seed=1)
    c = synthetic.iterations(100, actions=actions, seed=2)
    for it in c:  # issue fails every time, so validate never runs
        it["atomic_actions"] = [dict(it["atomic_actions"][0], failed=True)]
        it["error"] = ["Unauthorized", "(HTTP 401)", ""]
    res = compare.compare_workloads(
        results.from_report(synthetic.report([synthetic.workload(b)])),
        results.from_report(synthetic.report([synthetic.workload(c)])),
    )
    rows = {c.name: c for c in res.workloads[0].actions}
    assert rows["keystone.validate_token"].failure_verdict == "never ran"
    assert rows["keystone.issue_token"].failure_verdict.startswith("every one failed")
    assert res.exit_code == 1


def test_same_failure_rate_on_both_sides_passes(tmp_path):
    assert cli.main(["compare", *files(tmp_path, report(400, 2, 1), report(400, 2, 2))]) == 0


def test_reason_is_first_in_json_html_and_junit(tmp_path, base):
    out = tmp_path / "out"
    out.mkdir()
    rc = cli.main(
        ["compare", *files(tmp_path, base, report(400, 2, seed=2)),
         "--json", str(out / "c.json"), "--html", str(out / "c.html"),
         "--junit", str(out / "c.xml")]
    )  # fmt: skip
    assert rc == 1
    data = json.loads((out / "c.json").read_text())
    assert data["exit_code"] == 1 and "failures 0.0% -> 50.0%" in data["verdict"]
    issue = data["workloads"][0]["actions"][0]
    assert issue["failure_regression"] and issue["cand_failed"] == 200
    assert issue["verdict"].startswith("failures 0.0% -> 50.0%")
    html = (out / "c.html").read_text()
    assert html.index("failures 0.0% -&gt; 50.0%") < html.index("<table")
    suite = ET.parse(out / "c.xml").getroot()
    failures = [c.find("failure") for c in suite.iter("testcase")]
    failure = next(f for f in failures if f is not None)
    assert failure.get("message").startswith("failures 0.0% -> 50.0%")


def test_throughput_stays_informative(tmp_path, base):
    res = compare.compare_workloads(
        results.from_report(base), results.from_report(report(400, 2, seed=2))
    )
    assert not res.workloads[0].throughput.regression


@pytest.mark.parametrize("flag,value", [("--threshold", "nan"), ("--max-failure-increase", "-1"),
                                        ("--max-failure-increase", "nan")])  # fmt: skip
def test_rules_must_be_numbers_in_range(tmp_path, base, capsys, flag, value):
    assert cli.main(["compare", *files(tmp_path, base, base), flag, value]) == 2
    assert flag in capsys.readouterr().err


def _fisher_by_enumeration(fa: int, na: int, fb: int, nb: int) -> float:
    """P(B has >= fb failures) over every table with the same margins."""
    k, n = fa + fb, na + nb
    total = math.comb(n, k)
    return sum(math.comb(nb, x) * math.comb(na, k - x) for x in range(fb, min(k, nb) + 1)) / total


def test_fisher_exact_matches_the_lady_tasting_tea():
    assert stats.fisher_exact_greater(1, 4, 3, 4) == pytest.approx(0.242857, abs=1e-6)


@pytest.mark.parametrize("fa,na,fb,nb", list(product([0, 3], [10, 40], [0, 5, 10], [10, 30])))
def test_fisher_exact_matches_enumeration(fa, na, fb, nb):
    want = _fisher_by_enumeration(fa, na, fb, nb)
    assert stats.fisher_exact_greater(fa, na, fb, nb) == pytest.approx(want, rel=1e-9, abs=1e-15)
