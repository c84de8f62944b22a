"""gate with its default task: a verdict per token path, JWS on the candidate only.

One Keystone release on both sides (SPEC ``keystone``: the cached
environment), ``token.provider=jws`` on the candidate: the gate runs
tasks/gate-cloud.yaml (memcached on both sides) and judges every workload.

What is asserted is a count (a verdict for each of the 13 workloads), not a
latency, so each workload runs 9 s in 1-second blocks (the 8 clean blocks
the signed-rank test needs at alpha 0.01, and one more) rather than the
task's 18 s in 2-second blocks: 99 s less load.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _bench_helpers import bench

pytestmark = [pytest.mark.functional, pytest.mark.slow]  # two deployments

WORKLOADS = 13  # tasks/gate-cloud.yaml: 11 token paths, and check and validate with the cache off


def test_jws_against_fernet_gets_a_verdict_per_token_path(tmp_path: Path) -> None:
    proc = bench(
        "gate", "--baseline", "keystone", "--candidate", "keystone",
        "--candidate-option", "token.provider=jws", "--set", "identity.password_hash_rounds=4",
        "--task-args", json.dumps({"seconds": 9}), "--block-seconds", "1",
        "--max-time", "1", "--reports-dir", str(tmp_path / "reports"),
        cwd=tmp_path, timeout=1200,
    )  # fmt: skip
    assert proc.returncode in (0, 1, 3), proc.stdout[-3000:] + proc.stderr[-2000:]
    (out,) = (tmp_path / "reports").iterdir()
    data = json.loads((out / "gate.json").read_text())
    labels = {a["workload"] for a in data["actions"]}
    assert len(labels) == WORKLOADS, labels
    assert "token.provider=jws" in json.dumps(data)  # the candidate's deployment line
