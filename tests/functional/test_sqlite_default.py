"""The SQLite default under the token suite: no failed iteration, no request past the lock.

Before the reader/writer split, every SQLite transaction took the write lock
at BEGIN: validations queued behind token issues, and on keystone 29.1.0
``rally env check`` lost a deployment to "database is locked" after a 30 s
wait. Here each release of ``deployments/releases.yaml`` runs the token suite
at concurrency 2 on the default deployment: every iteration must pass (the
suite's SLA is failure_rate max 0) and no request may take as long as the
30 s busy timeout (the access log's server-side microseconds).
"""

from __future__ import annotations

import json

import pytest
import yaml
from _bench_helpers import ROOT, bench, live_pids, states

pytestmark = [pytest.mark.functional, pytest.mark.slow]

BUSY_TIMEOUT_US = 30 * 1_000_000


def _releases() -> list[str]:
    data = yaml.safe_load((ROOT / "deployments" / "releases.yaml").read_text())
    return sorted({d["keystone"] for d in data.values() if d and d.get("keystone")})


@pytest.mark.parametrize("release", _releases())
def test_token_suite_on_the_sqlite_default_fails_nothing_and_never_waits_out_the_lock(
    tmp_path, release
):
    proc = bench(
        "run", str(ROOT / "tasks" / "token-suite.yaml"),
        "--keystone", release,
        "--task-args", json.dumps({"concurrency": 2, "times": 6, "bursts": 2}),
        "--reports-dir", str(tmp_path / "reports"), cwd=tmp_path, timeout=1500,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (state,) = states(tmp_path / ".keystone-bench")
    assert state["deployment"]["db"] == "sqlite"
    assert live_pids(state) == []
    (run_dir,) = (tmp_path / ".keystone-bench").rglob("keystone/state.json")
    log = run_dir.parent / "access.log"
    lines = [ln.split() for ln in log.read_text().splitlines() if ln.strip()]
    assert any(f[2].startswith("/v3/auth/tokens") for f in lines)
    slowest = max(lines, key=lambda f: int(f[4]))
    assert int(slowest[4]) < BUSY_TIMEOUT_US, f"{' '.join(slowest[1:5])}"
    assert [f for f in lines if f[3] == "500"] == []
    assert "database is locked" not in (run_dir.parent / "keystone.log").read_text()
