"""Interrupting ``load --engine locust`` keeps and reports what was sent (issue 27, item 2).

Before, SIGINT and SIGTERM ended it with 130/143, an empty stdout and an
empty samples.json, while the master's log counted the requests sent.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.functional


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_locust_load_keeps_its_samples(tmp_path, sig, code):
    argv = [sys.executable, "-m", "rally_keystone_bench.cli", "load", "--target", "mock"]
    argv += ["--scenario", "authenticate", "--rate", "20", "--duration", "60"]
    argv += ["--reports-dir", str(tmp_path / "reports")]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "Locust master on" in line:
            break
    time.sleep(10)  # users made, the schedule under way
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == code, err
    kept = [ln for ln in out.splitlines() if ln.startswith("interrupted: ")]
    assert kept, out
    count = int(kept[0].split()[1])
    assert count > 20
    (samples,) = (tmp_path / "reports").glob("*/locust/samples.json")
    assert len(json.loads(samples.read_text())) == count
    meta = json.loads(next((tmp_path / "reports").glob("*/locust/run.json")).read_text())
    assert meta["interrupted"] and meta["left_behind"] == []
    assert "requests/s" in out  # the summary of what was sent
