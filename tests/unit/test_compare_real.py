"""compare on the committed report of a real run (tests/fixtures/make_fixtures.py)."""

import json
import sys
from pathlib import Path

import pytest

from rally_keystone_bench import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
import synthetic  # noqa: E402

REAL = FIXTURES / "rally-keystone-tokens.json"


@pytest.fixture(scope="module")
def real():
    return json.loads(REAL.read_text())


def _write(tmp_path, a, b):
    return (
        synthetic.write(str(tmp_path / "a.json"), a),
        synthetic.write(str(tmp_path / "b.json"), b),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_aa_split_of_a_real_run_is_no_significant_change(tmp_path, real, capsys, seed):
    a, b = synthetic.split(real, seed)
    assert cli.main(["compare", *_write(tmp_path, a, b)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no regression")
    rows = [ln for ln in out.splitlines() if ln.startswith("  ") and " ms," in ln]
    assert len(rows) >= 8
    assert all("x slower  " not in r for r in rows)


def test_real_run_thirty_percent_slower_is_flagged(tmp_path, real, capsys):
    a, b = synthetic.split(real, 4)
    b = synthetic.slow_down(b, "keystone.issue_token", 1.3)
    assert cli.main(["compare", *_write(tmp_path, a, b)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("REGRESSION")
    flagged = [ln for ln in out.splitlines() if ln.startswith(" !keystone.issue_token")]
    assert flagged and all("x slower" in ln for ln in flagged)


def test_real_run_against_itself_is_no_significant_change(tmp_path, real, capsys):
    assert cli.main(["compare", *_write(tmp_path, real, real)]) == 0
    out = capsys.readouterr().out
    assert "x slower" not in out and "x faster" not in out
