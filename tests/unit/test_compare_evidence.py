"""``compare`` names what changed inside Keystone when both runs kept run's evidence.

Each side is a directory as ``run`` leaves it: the Rally JSON report
(``run.json``, a real report), ``run-summary/summary.json`` with Keystone's
counters per workload, and ``run-profile.txt``, py-spy's collapsed stacks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from rally_keystone_bench import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
POST = "application (keystone_bench_wsgi.py:69);AuthTokenResource.post (keystone/api/auth.py:450)"
ISSUE = "Manager.issue_token (keystone/token/provider.py:283)"
HASH = "check_password (keystone/common/password_hashing.py:90)"
# The recorded report's first workload, as compare names it.
FIRST = "KeystoneTokens.authenticate(method=token, scope=project) constant(concurrency=1, times=60)"


# What Keystone's access log said it served while py-spy sampled: the report's 356 timed
# issues and the untimed ones (the users' setup, the validation workloads' own tokens).
SERVED = {"keystone.issue_token": 400, "keystone.validate_token": 236, "any request": 700}


def _side(
    root: Path, sql: int, issue_samples: int, profile: bool = True, served: bool = True
) -> str:
    root.mkdir()
    report = root / "run.json"
    shutil.copy(FIXTURES / "rally-keystone-tokens.json", report)
    counters = {
        "keystone.issue_token": {
            "action": "keystone.issue_token",
            "traced_requests": 60,
            "sql_statements_median": sql,
            "sql_statements_max": sql,
            "db_ms_median": 2.0,
            "statements": {"SELECT 1 FROM revocation_event": float(sql)},
        }
    }
    summary = root / "run-summary" / "summary.json"
    summary.parent.mkdir()
    doc = {"workloads": [{"counters": counters}]}
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
