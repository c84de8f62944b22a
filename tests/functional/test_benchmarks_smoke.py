"""Every script in benchmarks/ runs to its end at its smallest settings.

Nothing else runs the benchmarks, and one broke unseen (generator_ceiling.py
died at its Locust step once the engine refused rates above its ceiling).
Each script runs as a user runs it, with its smallest invocation from
SMALLEST below (the table is each script's documented smallest run), and
fails on a traceback, an exit code not listed, or a missing last line.
Figures are not judged: the machine is shared and the settings tiny.

Two modes, because every script at its smallest still takes about 12
minutes here (most start Keystones of their own and run Rally tasks):

* fast (the default, in ``tox -e slow``): the light scripts run; a heavy
  one (``heavy=True``: it starts Keystones or Rally tasks of its own) is
  only imported, which catches a broken import or a syntax error;
* all (``KEYSTONE_BENCH_SMOKE=all``, e.g. ``tox -e benchmarks``): every
  script runs.

``{tmp}`` is a fresh directory of the test, ``{fixtures}`` tests/fixtures,
``{keystone_db}`` the SQLite database of the session's small Keystone,
after one token was revoked (revocation_query.py reads a copy of it). A
new script gets a row here, or test_every_script_has_a_smallest_run fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
FIXTURES = ROOT / "tests" / "fixtures"
MODE = os.environ.get("KEYSTONE_BENCH_SMOKE", "fast")
TIMEOUT = 1800  # s per script: a capacity search on the mock took 9.6 min at load 18

pytestmark = [pytest.mark.functional, pytest.mark.slow]


class Run(NamedTuple):
    args: str  # split at spaces; {tmp}, {fixtures}, {keystone_db} filled in
    prints: str  # a regular expression the script's output must match
    heavy: bool = False  # starts Keystones or Rally tasks of its own
    exits: tuple[int, ...] = (0,)  # 1 too when the script exits 1 for a missed target


SMALLEST: dict[str, Run] = {
    "aa_false_alarms.py": Run("--pairs 1", r"flagged \(compare would exit 1\): \d+ of 1"),
    "capacity_repeat.py": Run("--smoke", r"N = ", heavy=True),
    "client_cpu.py": Run("--requests 20", r"http\.client alone .* per request"),
    "compare_aa_live.py": Run("--pairs 1 --times 3", r"exit 1 \(false alarms\): \d", heavy=True),
    "context_setup.py": Run(
        "--tenants 1 --users 1 --workers 1 --password-hash-rounds 4",
        r"reused / first setup: ",
        heavy=True,
    ),
    "gate_family_rate.py": Run("--synthetic --gates 200", r"family-wise false alarms"),
    "gate_noise.py": Run(
        "--aa-runs 1 --ab-runs 0 --no-quiet --issue-seconds 2 --validate-seconds 2"
        " --max-time 30 --work {tmp}/gate-noise",
        r"total: \d+ s",
        heavy=True,
    ),
    "generator_ceiling.py": Run(
        "--seconds 1 --processes 1 --threads 1 --mock-workers 1 --runners none --locust-workers 1",
        r"Locust engine, 1 worker\(s\): .* CPU per request",
    ),
    "history_aa.py": Run("--runs 1 --times 2 --store {tmp}/aa.sqlite", r"series", heavy=True),
    "history_releases.py": Run(
        "--releases 30.0.0 --runs 1 --times 1 --store {tmp}/r.sqlite",
        r"30\.0\.0",
        heavy=True,
    ),
    "keystone_block_noise.py": Run(
        "--blocks 2 --tokens 2 --gap 0", r"load average after", heavy=True
    ),
    "keystone_startup.py": Run("--skip-cold --warm 1", r"target: warm within 15 s", heavy=True),
    "ldap_pools_ab.py": Run("2 --workers 1", r"pools on: .*x the speed", heavy=True),
    "report_scale.py": Run("--iterations 200", r"compare\s+0\s", exits=(0, 1)),
    # Keystone's own managers: a Keystone environment's Python and a seeded run dir
    # (gate seeding); with the tests' Python it says so, exit 2.
    "revocation_plans.py": Run(
        "{tmp}/keystone.conf", r"run with a Keystone environment's Python", exits=(2,)
    ),
    "revocation_query.py": Run(
        "--db a={keystone_db} --db b={keystone_db} --rounds 1 --queries 1",
        r"^b: .* ms per query",
    ),
    "scenario_overhead.py": Run(
        "--times 2 --workers 1", r"target median client overhead", heavy=True
    ),
    "screenshot_pages.py": Run("--out {tmp}/shots", r"\.png: \d+ bytes, 0 console message"),
    "screenshot_summary.py": Run(
        "{fixtures}/rally-keystone-tokens.json --png {tmp}/summary.png",
        r"console messages: 0",
    ),
    "sla_stream.py": Run("--iterations 2000 --rps 200 --warmup 2", r"memory: "),
    "sqlite_readers.py": Run("1 1", r"sqlite / postgresql: p50", heavy=True),
    "traced_paths.py": Run("--seconds 2", r"traced requests; \d+ timed", heavy=True),
    "tracing_overhead.py": Run("--requests 2", r"trace store and key removed", heavy=True),
    "uwsgi_hook_ab.py": Run("1 1", r"tokens=1 mean=", heavy=True),
}


def scripts() -> list[str]:
    return sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


def test_every_script_has_a_smallest_run():
    assert sorted(SMALLEST) == scripts()


@pytest.fixture(scope="module")
def keystone_db(small_keystone) -> Path:
    """The small Keystone's database, with one revocation event (the script needs one)."""
    from rally_keystone_bench.clients.tokens import TokenClient, UserAuth

    client = TokenClient(small_keystone.auth_url)
    auth = UserAuth.from_credential(small_keystone.admin_credentials)
    client.authorize(auth)  # the X-Auth-Token that revokes
    assert client.revoke(client.issue(auth).token).status == 204
    found = sorted(small_keystone.run_dir.rglob("keystone.db"))
    assert found, f"no keystone.db under {small_keystone.run_dir}"
    return found[0]


def _environ() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _import_only(script: str, tmp: Path) -> subprocess.CompletedProcess:
    """Import SCRIPT as a module (its main not run): its imports and syntax hold."""
    code = (
        "import importlib.util, sys; sys.path.insert(0, sys.argv[2]);"
        "spec = importlib.util.spec_from_file_location('smoke', sys.argv[1]);"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec)); print('imported')"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(BENCHMARKS / script), str(BENCHMARKS)],
        cwd=tmp, env=_environ(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("script", sorted(SMALLEST))
def test_script_runs_to_its_end(script, tmp_path, request):
    run = SMALLEST[script]
    started = time.monotonic()
    if run.heavy and MODE != "all":
        proc = _import_only(script, tmp_path)
        prints, exits = r"^imported$", (0,)
    else:
        values = {"tmp": str(tmp_path), "fixtures": str(FIXTURES)}
        if "{keystone_db}" in run.args:
            values["keystone_db"] = str(request.getfixturevalue("keystone_db"))
        proc = subprocess.run(
            [sys.executable, str(BENCHMARKS / script), *run.args.format(**values).split()],
            cwd=tmp_path, env=_environ(), capture_output=True, text=True, timeout=TIMEOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        prints, exits = run.prints, run.exits
    out = proc.stdout + proc.stderr
    print(f"{script}: exit {proc.returncode} in {time.monotonic() - started:.0f} s")
    tail = "\n".join(out.splitlines()[-15:])
    assert "Traceback (most recent call last)" not in out, f"{script} raised:\n{out[-3000:]}"
    assert proc.returncode in exits, f"{script} exited {proc.returncode}:\n{tail}"
    assert re.search(prints, proc.stdout, re.MULTILINE), f"{script} printed no {prints!r}:\n{tail}"
