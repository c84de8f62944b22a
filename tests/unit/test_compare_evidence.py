"""``compare`` names what changed inside Keystone when both runs kept run's evidence.

Each side is a directory as ``run`` leaves it: the Rally JSON report
(``run.json``, a real report), ``run-summary/summary.json`` with Keystone's
counters per workload, and ``run-profile.txt``, py-spy's collapsed stacks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import synthetic

from rally_keystone_bench import cli
from rally_keystone_bench.driver import reports
from rally_keystone_bench.verdicts.counters import ACTION_BY_METHOD

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
POST = "application (keystone_bench_wsgi.py:69);AuthTokenResource.post (keystone/api/auth.py:450)"
ISSUE = "Manager.issue_token (keystone/token/provider.py:283)"
HASH = "check_password (keystone/common/password_hashing.py:90)"
# The recorded report's first workload, as compare names it.
FIRST = "KeystoneTokens.authenticate(method=token, scope=project) constant(concurrency=1, times=60)"


# What Keystone's access log said it served while py-spy sampled: the report's 356 timed
# issues and the untimed ones (the users' setup, the validation workloads' own tokens).
SERVED = {"keystone.issue_token": 400, "keystone.validate_token": 236, "any request": 700}


def _counts(action: str, sql: int) -> dict:
    return {
        "action": action,
        "traced_requests": 60,
        "sql_statements_median": sql,
        "sql_statements_max": sql,
        "db_ms_median": 2.0,
        "statements": {"SELECT 1 FROM revocation_event": float(sql)},
    }


def _side(
    root: Path,
    sql: int,
    issue_samples: int,
    profile: bool = True,
    served: bool = True,
    untraced: int | None = None,
) -> str:
    """A run's directory; every workload's token actions traced (but the UNTRACED-th's),
    the first workload's issue with SQL statements, the others' with 5."""
    root.mkdir()
    report = root / "run.json"
    shutil.copy(FIXTURES / "rally-keystone-tokens.json", report)
    kept = []
    for i, wl in enumerate(reports.load_any(str(report))):
        timed = [a for a in wl.actions if a in ACTION_BY_METHOD.values()]
        counts = {a: _counts(a, sql if i == 0 else 5) for a in timed}
        kept.append({"counters": {} if i == untraced else counts})
    summary = root / "run-summary" / "summary.json"
    summary.parent.mkdir()
    doc = {"workloads": kept}
    if served:
        doc["profile"] = {"requests_served": SERVED}
    summary.write_text(json.dumps(doc))
    if profile:
        stacks = [f"{POST};{ISSUE} {issue_samples}", f"{POST};{HASH} 300"]
        (root / "run-profile.txt").write_text("\n".join(stacks) + "\n")
    return str(report)


def test_a_counter_rise_comes_first_and_the_profile_names_the_added_time(tmp_path, capsys):
    base = _side(tmp_path / "a", sql=9, issue_samples=10)
    cand = _side(tmp_path / "b", sql=10, issue_samples=1010)
    assert cli.main(["compare", base, cand]) == 1
    out = capsys.readouterr().out.splitlines()
    # per workload: the token path is named before the action
    assert out[0].startswith(f"COUNTER REGRESSION: {FIRST}: keystone.issue_token 9 -> 10 SQL")
    # same report both sides: no latency change, so the rise is a finding
    assert out[1].strip().startswith(f"finding: {FIRST}: keystone.issue_token does 1 more")
    # and the verdict says what the exit code says (it once said "no regression")
    verdict = next(line for line in out if line.startswith(("REGRESSION", "no regression")))
    assert verdict.startswith("REGRESSION (")
    assert f"{FIRST}: keystone.issue_token 9 -> 10 SQL statements" in verdict
    at = out.index(
        "where the time went (py-spy, self time per request Keystone served, candidate - base):"
    )
    top = out[at + 1].strip()
    # 1000 more samples at 100/s over the 400 issues Keystone served: +25.0 ms each (over
    # the report's 356 timed issues, 60+200+60+36, it was +28.1 ms: more than was added)
    assert top.startswith("keystone.issue_token: keystone/token/provider.py:Manager.issue_token")
    assert (
        "+25.0 ms per request" in top and "under keystone/api/auth.py:AuthTokenResource.post" in top
    )


def test_a_profile_without_the_requests_keystone_served_gives_no_per_request_figure(
    tmp_path, capsys
):
    base = _side(tmp_path / "a", sql=9, issue_samples=10, served=False)
    cand = _side(tmp_path / "b", sql=9, issue_samples=1010)
    assert cli.main(["compare", base, cand]) == 0
    assert "where the time went" not in capsys.readouterr().out


def test_no_profile_on_one_side_no_profile_lines(tmp_path, capsys):
    base = _side(tmp_path / "a", sql=9, issue_samples=10, profile=False)
    cand = _side(tmp_path / "b", sql=9, issue_samples=1010)
    assert cli.main(["compare", base, cand]) == 0
    out = capsys.readouterr().out
    assert "where the time went" not in out
    assert (
        f"counter: {FIRST}: keystone.issue_token 9 -> 9 SQL statements per request (unchanged)"
        in out
    )


def test_a_workload_traced_on_one_side_only_is_inconclusive_and_named(tmp_path, capsys):
    """Both runs traced, but the candidate has no count of the first workload's issue:
    a statement added there would pass unseen, so no "no regression" (exit 3)."""
    base = _side(tmp_path / "a", sql=9, issue_samples=10)
    cand = _side(tmp_path / "b", sql=9, issue_samples=10, untraced=0)
    assert cli.main(["compare", base, cand]) == 3
    out = capsys.readouterr().out.splitlines()
    # the verdict first (an unknown count is no change), its advice, then the count's line
    assert out[0].startswith("INCONCLUSIVE (")
    assert out[0].endswith(f"SQL count is unknown for {FIRST}: keystone.issue_token")
    assert out[1].startswith("advice: a run traced too few of a workload's requests")
    assert (
        f"counter: {FIRST}: keystone.issue_token SQL statements per request unknown "
        "(no traced request on the candidate)"
    ) in [line.strip() for line in out]


def test_a_latency_regression_stays_a_regression_with_an_unknown_count(tmp_path, capsys):
    base = _side(tmp_path / "a", sql=9, issue_samples=10)
    cand = Path(_side(tmp_path / "b", sql=9, issue_samples=10, untraced=0))
    slow = synthetic.slow_down(json.loads(cand.read_text()), "keystone.issue_token", 1.5)
    synthetic.write(str(cand), slow)
    assert cli.main(["compare", base, str(cand)]) == 1
    out = capsys.readouterr().out.splitlines()
    verdict = next(line for line in out if not line.startswith(("counter", " ")))
    assert verdict.startswith("REGRESSION (") and "keystone.issue_token 1.5" in verdict
    assert not any(line.startswith("advice:") for line in out)
