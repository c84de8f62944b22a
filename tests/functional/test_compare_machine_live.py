"""compare on two real runs of the same code, one of them beside a CPU hog: exit 3, not 1.

Issue 41: two unpaired runs on a shared machine cannot carry a verdict.
Each ``run`` keeps the machine's record of its load windows in its
summary; the run made while a one-core busy loop ran is disturbed, and
``compare`` says inconclusive with both records, whatever the latencies.
Both runs use the session's shared Keystone (``--existing-cloud``): its
uWSGI workers count as the deployment, the hog as another process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _bench_helpers import bench, tiny_task

pytestmark = pytest.mark.functional


def run(ks, task: Path, reports: Path, cwd: Path) -> Path:
    cred = ks.admin_credentials
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update(
        OS_AUTH_URL=cred["auth_url"],
        OS_USERNAME=cred["username"],
        OS_PASSWORD=cred["password"],
        OS_PROJECT_NAME=cred["project_name"],
        OS_USER_DOMAIN_NAME="Default",
        OS_PROJECT_DOMAIN_NAME="Default",
    )
    argv = [sys.executable, "-m", "rally_keystone_bench.cli", "run", "--existing-cloud"]
    argv += [str(task), "--reports-dir", str(reports)]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "machine during the load:" in proc.stdout
    (found,) = re.findall(r"Rally JSON: (\S+)", proc.stdout)
    return Path(found)


def test_an_a_a_pair_with_a_hog_during_one_run_is_inconclusive(small_keystone, tmp_path):
    task = tiny_task(tmp_path / "tiny.json", times=10)
    base = run(small_keystone, task, tmp_path / "a", tmp_path)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        cand = run(small_keystone, task, tmp_path / "b", tmp_path)
    finally:
        hog.kill()
        hog.wait()
    record = json.loads((cand.parent / "tiny-summary" / "summary.json").read_text())["machine"]
    assert record["other_mean"] > 0.5 and record["disturbed"], record
    proc = bench("compare", str(base), str(cand), cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("INCONCLUSIVE"), lines[0]
    assert "run was disturbed" in lines[0]
    assert lines[1].startswith("advice: for a verdict on a change, run keystone-bench gate")
    (cand_line,) = [x for x in lines if x.startswith("candidate machine:")]
    assert "DISTURBED" in cand_line
