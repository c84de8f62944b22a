"""The committed fixtures: small, from a real run, and free of tokens and passwords.

Nothing in them was edited by hand (make_fixtures.py writes Rally's report
as is), so these checks are what stands between a secret and the repository.
"""

import json
import re
from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.report import render
from rally_keystone_bench.verdicts import results

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = FIXTURES / "rally-keystone-tokens.json"
# A Fernet token is "gAAAAA" and ~180 base64url characters; any long base64url
# run that is not a uuid or hex id could be a token, a password or a key.
FERNET_RE = re.compile(r"gAAAAA[A-Za-z0-9_\-]{20,}")
LONG_SECRET_RE = re.compile(r"[A-Za-z0-9_\-]{40,}={0,2}")
SECRET_KEYS = re.compile(r"pass(word)?|secret|token$|credential", re.I)


def _strings_under_secret_keys(value, path=""):
    if isinstance(value, dict):
        for k, v in value.items():
            if SECRET_KEYS.search(str(k)) and isinstance(v, str) and v not in ("***", ""):
                yield f"{path}.{k}"
            yield from _strings_under_secret_keys(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings_under_secret_keys(v, f"{path}[{i}]")


def test_fixtures_are_small():
    total = sum(p.stat().st_size for p in FIXTURES.iterdir() if p.is_file())
    assert total < 1024 * 1024


def test_fixture_is_a_real_rally_report():
    info = json.loads(REAL.read_text())["info"]
    assert info["format_version"] == "1.2" and info["rally_version"]
    wls = results.load(REAL)
    assert [w.scenario for w in wls] == [
        "KeystoneTokens.authenticate",
        "KeystoneTokens.authenticate",
        "KeystoneTokens.authenticate",
        "KeystoneTokens.concurrent_create",
        "KeystoneTokens.validate",
    ]
    assert [w.runner.get("concurrency") for w in wls[:3]] == [1, 2, 4]
    burst = wls[3]
    per_iteration = burst.args["count"]
    assert burst.actions["keystone.issue_token"].count == per_iteration * burst.iterations
    assert wls[4].runner_type == "rps"
    assert all(w.throughput > 0 for w in wls)


def test_the_profiled_run_is_small():
    kept = sum(p.stat().st_size for p in (FIXTURES / "profiled-run").iterdir())
    assert kept < 100 * 1024


@pytest.mark.parametrize(
    "name", ["fixture", "profiled", "summary.html", "summary.json", "compare.json"]
)
def test_no_token_or_password_anywhere(tmp_path, name):
    if name == "fixture":
        text = REAL.read_text()
    elif name == "profiled":  # tests/fixtures/profiled-run: a run's report and its stacks
        import lzma

        run = FIXTURES / "profiled-run"
        text = lzma.decompress((run / "token-suite.json.xz").read_bytes()).decode()
        stacks = lzma.decompress((run / "workload-stacks.txt.xz").read_bytes()).decode()
        assert not FERNET_RE.search(stacks) and "password=" not in stacks
    elif name == "compare.json":
        assert cli.main(["compare", str(REAL), str(REAL), "--json", str(tmp_path / name)]) == 0
        text = (tmp_path / name).read_text()
    else:
        render.write_summary(results.load(REAL), tmp_path, str(REAL))
        text = (tmp_path / name).read_text()
    assert not FERNET_RE.search(text)
    assert not LONG_SECRET_RE.search(text), LONG_SECRET_RE.search(text).group(0)[:12]
    if name.endswith(".json") or name in ("fixture", "profiled"):
        assert list(_strings_under_secret_keys(json.loads(text))) == []


def test_the_secret_checks_catch_a_token_and_a_password():
    fake = {"ctx": {"password": "hunter2hunter2"}, "msg": "gAAAAAB" + "x" * 170}
    assert list(_strings_under_secret_keys(fake)) == [".ctx.password"]
    assert FERNET_RE.search(json.dumps(fake))


def test_report_of_the_real_run_has_the_concurrency_table(tmp_path):
    render.write_summary(results.load(REAL), tmp_path, str(REAL))
    summary = json.loads((tmp_path / "summary.json").read_text())
    (table,) = [t for t in summary["setting_tables"] if t["setting"] == "runner.concurrency"]
    assert [r["label"] for r in table["rows"] if r["action"] == "total"] == ["1", "2", "4"]
