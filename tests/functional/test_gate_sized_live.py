"""The default gate's sized pass for real: one gate run, keystone==30.0.0 against a tree
with two changes on two token paths: its revocation check does a little more work
per revocation event it reads back, and an application-credential token's
validation does three more SQL statements (a role-assignment listing).

One run serves every assertion: it exits 1 naming a validation workload (on an
empty Keystone the change costs nothing); the counters name the one workload
whose SQL changed, in SQL terms, and no other; both pairs of deployments were
seeded with the same rows per table; and the seeding happened before the
task, never over HTTP inside a judged window.
"""

from __future__ import annotations

import json
import re

import pytest
from _bench_helpers import bench
from _patched_trees import sized_gate_tree

from rally_keystone_bench.deploy import venv

# serial: the gate judges latencies; a neighbour's load would be its interference.
pytestmark = [pytest.mark.functional, pytest.mark.slow, pytest.mark.serial]

# What the seeding makes, and what no request inside a task run may touch.
SEEDED_PATHS = re.compile(r" /v3/(projects|services|endpoints|regions|groups|roles|OS-REVOKE)")
# The gate's per-workload SQL line (report/counters.py, verdicts/counters.py).
SQL_LINE = re.compile(
    r"^(?P<verdict>COUNTER REGRESSION|counter): (?P<workload>.+?): (?P<action>keystone\.\w+) "
    r"(?P<before>\d+) -> (?P<after>\d+) SQL statements per request(?: \((?P<detail>.*)\))?$",
    re.M,
)
APP_CRED_VALIDATION = "Validate application-credential tokens (GET), paired"


@pytest.fixture(scope="module")
def sized_gate(tmp_path_factory) -> tuple:
    tree = sized_gate_tree()
    venv.ensure_keystone_env(str(tree))  # built before the gate, outside its clock
    where = tmp_path_factory.mktemp("sized")
    # Validation without a cache reads every audit-chain event: a pair takes
    # seconds on a busy machine, so the validations get 40 s each.
    done = bench(
        "gate", "--baseline", "keystone==30.0.0", "--candidate", str(tree),
        "--task-args", json.dumps({"seconds": 40, "issue_seconds": 12}),
        "--reports-dir", str(where / "reports"), cwd=where, timeout=2400,
    )  # fmt: skip
    return done, where


def test_the_sized_pass_catches_work_per_revocation_event(sized_gate) -> None:
    done, _ = sized_gate
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    regressions = [line for line in done.stdout.splitlines() if "REGRESSION" in line]
    assert any("validate_token" in line or "check_token" in line for line in regressions), (
        done.stdout[-3000:]
    )
    assert re.search(r"^gate: \d+ s from start to verdict", done.stdout, re.M)


def test_the_counter_names_the_one_token_path_whose_sql_changed(sized_gate) -> None:
    """Three more statements per app-cred token validated, in that workload only: its line
    says them in SQL terms (three listings of the assignment table per validation Keystone
    makes while it serves the request); every other workload's count is unchanged."""
    done, _ = sized_gate
    lines = {(m["workload"], m["action"]): m for m in SQL_LINE.finditer(done.stdout)}
    app_cred = lines.pop((APP_CRED_VALIDATION, "keystone.validate_token"), None)
    assert app_cred is not None, done.stdout[-3000:]
    assert app_cred["verdict"] == "COUNTER REGRESSION", app_cred[0]
    listed = re.search(r"SELECT \.\.\. FROM assignment x(\d+)", app_cred["detail"] or "")
    assert listed and int(listed[1]) >= 3 and int(listed[1]) % 3 == 0, app_cred[0]
    assert int(app_cred["after"]) - int(app_cred["before"]) >= int(listed[1]), app_cred[0]
    assert len(lines) >= 10, done.stdout[-3000:]  # the other workloads were judged too
    moved = [m[0] for m in lines.values() if m["before"] != m["after"] or m["detail"] not in (
        "unchanged", "too few traced requests to judge")]  # fmt: skip
    assert moved == [], moved


def test_both_sides_hold_the_same_seeded_rows(sized_gate) -> None:
    _, where = sized_gate
    (out,) = (where / "reports").iterdir()
    seeded = json.loads((out / "seeded.json").read_text())
    assert sorted(seeded) == ["baseline", "baseline_nocache", "candidate", "candidate_nocache"]
    counts = {name: report["counts"] for name, report in seeded.items()}
    assert counts["baseline"] == counts["candidate"]
    assert counts["baseline_nocache"] == counts["candidate_nocache"] == counts["baseline"]
    assert counts["baseline"]["revocation_event"] >= 4400
    assert counts["baseline"]["endpoint"] >= 180


def test_seeding_is_outside_every_timed_window(sized_gate) -> None:
    done, where = sized_gate
    out = done.stdout + done.stderr
    assert out.index("setup: seeded 4 deployments") < out.index("task run 1")
    logs = list(where.glob(".keystone-bench/runs/gate-*/*/keystone/access.log"))
    assert len(logs) >= 4, logs
    for log in logs:
        touched = [line for line in log.read_text().splitlines() if SEEDED_PATHS.search(line)]
        assert touched == [], f"{log}: {touched[:3]}"
