"""Keystone's own cost counters, for real: traced counts against SQLAlchemy's own count.

One traced Keystone (SQLite, 1 worker, 4 bcrypt rounds) with the SQL audit
on: every statement SQLAlchemy's before_cursor_execute event sees is written
with the traced request's id, independently of OSprofiler. The gate test
builds 30.0.0 with one more query per token validation and needs the
counters alone to fail it.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _bench_helpers import ROOT, bench, live_pids, states, tiny_task

from rally_keystone_bench.clients.tokens import TokenClient, UserAuth
from rally_keystone_bench.deploy import tracing
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.verdicts import counters

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _packages import require_package  # noqa: E402

pytestmark = pytest.mark.functional


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory):
    run_dir = tmp_path_factory.mktemp("traced")
    saved = {k: os.environ.get(k) for k in ("KEYSTONE_BENCH_SQL_AUDIT", "KEYSTONE_BENCH_TRACE_DIR")}
    os.environ["KEYSTONE_BENCH_SQL_AUDIT"] = "1"
    os.environ["KEYSTONE_BENCH_TRACE_DIR"] = str(tracing.store_path(run_dir))
    deployment = Deployment(workers=1, password_hash_rounds=4, trace=True)
    try:
        with LocalKeystone(deployment, run_dir) as ks:
            yield ks
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_issue_and_validate_counts_match_sqlalchemys_own(traced):
    with tracing.client_environment(traced.run_dir):
        client = TokenClient(traced.auth_url)
    auth = UserAuth.from_credential(traced.admin_credentials)
    client.authorize(auth)  # untimed: not signed, not traced
    timed = contextlib.nullcontext  # only timed requests are signed
    tokens = [client.issue(auth, timer=timed).token for _ in range(4)]
    for token in tokens:
        client.validate(token, timer=timed)
        client.check(token, timer=timed)
    costs = counters.request_costs(tracing.read_records(traced.run_dir))
    audit = collections.Counter(
        r["base_id"] for r in tracing.read_records(traced.run_dir, "audit") if r.get("base_id")
    )
    kinds = collections.Counter(c.action for c in costs)
    assert kinds["keystone.issue_token"] == 4  # not the untimed authorize
    assert kinds["keystone.validate_token"] == 4
    assert kinds["keystone.check_token"] == 4
    for cost in costs:
        assert cost.complete
        assert cost.sql_count == audit[cost.base_id] > 0, cost.action
        assert 0 < cost.db_seconds < 5


def test_an_unsigned_request_is_not_traced(traced):
    before = len(tracing.read_records(traced.run_dir))
    client = TokenClient(traced.auth_url)  # no key in the environment
    auth = UserAuth.from_credential(traced.admin_credentials)
    client.issue(auth, timer=contextlib.nullcontext)
    assert len(tracing.read_records(traced.run_dir)) == before


def test_teardown_leaves_no_trace_store_or_key(tmp_path):
    ks = LocalKeystone(Deployment(workers=1, password_hash_rounds=4, trace=True), tmp_path)
    with ks:
        key = tracing.key_path(tmp_path).read_text().strip()
        assert (tmp_path / "traces").is_dir()
    assert not tracing.key_path(tmp_path).exists()
    assert not (tmp_path / "traces").exists()
    assert key not in (tmp_path / "keystone.conf").read_text()


@pytest.mark.slow
def test_one_more_query_per_validation_fails_the_gate_on_counters(tmp_path):
    from _patched_trees import extra_sql_tree

    tree = extra_sql_tree()
    proc = bench(
        "gate", "--baseline", "keystone", "--candidate", str(tree),
        "--task", str(ROOT / "tasks" / "gate.yaml"),
        "--task-args", json.dumps({"issue_seconds": 12, "validate_seconds": 12}),
        "--block-seconds", "2", "--max-time", "1",
        "--reports-dir", str(tmp_path / "reports"), cwd=tmp_path, timeout=900,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-2000:]
    first = out.splitlines()[0]
    # per workload: "COUNTER REGRESSION: Validate tokens (GET), paired: keystone.validate_token"
    assert first.startswith("COUNTER REGRESSION: Validate"), out[:2000]
    assert ": keystone.validate_token " in first, out[:2000]
    assert "SELECT ... FROM revocation_event" in first
    (reports,) = (tmp_path / "reports").iterdir()
    junit = (reports / "gate-junit.xml").read_text()
    assert "counter regression" in junit and "keystone.validate_token" in junit
    assert all(live_pids(s) == [] for s in states(tmp_path / ".keystone-bench"))
    assert not list((tmp_path / ".keystone-bench").rglob("trace-key"))
    assert not list((tmp_path / ".keystone-bench").rglob("traces"))


def _memcached_stats(port: int) -> dict[str, int]:
    """memcached's own counters (its ``stats`` command)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"stats\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            data += conn.recv(65536)
    fields = [line.split() for line in data.decode().splitlines() if line.startswith("STAT ")]
    return {f[1]: int(f[2]) for f in fields if f[2].isdigit()}


def test_cache_counts_match_memcacheds_own_stats_and_no_connection_is_left_out(tmp_path):
    """Serial requests, one client: memcached's stats move only for the request in flight."""
    require_package("memcached", "memcached")
    dep = Deployment(workers=1, password_hash_rounds=4, trace=True, cache="memcached")
    with LocalKeystone(dep, tmp_path) as ks:
        with tracing.client_environment(ks.run_dir):
            client = TokenClient(ks.auth_url)
        auth = UserAuth.from_credential(ks.admin_credentials)
        client.authorize(auth)
        direct = []
        for _ in range(3):
            before = _memcached_stats(ks.memcached_port)
            token = client.issue(auth, timer=contextlib.nullcontext).token
            between = _memcached_stats(ks.memcached_port)
            client.validate(token, timer=contextlib.nullcontext)
            after = _memcached_stats(ks.memcached_port)
            for a, b in ((before, between), (between, after)):
                direct.append(tuple(b[k] - a[k] for k in ("cmd_get", "get_misses", "cmd_set")))
        costs = counters.request_costs(tracing.read_records(ks.run_dir))  # authorize: untimed
        left = tracing.checked_out(ks.run_dir)
    assert [(c.cache_gets, c.cache_misses, c.cache_sets) for c in costs] == direct
    assert all(gets > 0 for gets, _, _ in direct)
    assert left and set(left.values()) == {0}, left  # the worker's file, nothing checked out


@pytest.mark.slow
def test_ldap_calls_match_the_operations_slapd_logged(tmp_path):
    """Pools off: each call of Keystone's LDAP handler is one operation on the wire."""
    require_package("slapd", "slapd", "ldap-utils", "libldap2-dev", "libsasl2-dev")
    dep = Deployment(
        workers=1, password_hash_rounds=4, trace=True, identity="ldap", ldap_pool=False
    )
    with LocalKeystone(dep, tmp_path) as ks:
        user = json.loads(ks.directory_users_path.read_text())["users"][0]
        auth = UserAuth(username=user["name"], password=user["password"], user_domain_name="LDAP")
        with tracing.client_environment(ks.run_dir):
            client = TokenClient(ks.auth_url)
        log = ks.run_dir / "ldap" / "slapd.log"
        direct = []
        for _ in range(3):
            before = _slapd_operations(log)
            timed = contextlib.nullcontext  # only timed requests are signed
            assert client.issue(auth, scope="unscoped", timer=timed).status == 201
            direct.append(_wait_for_more(log, before))
        costs = counters.request_costs(tracing.read_records(ks.run_dir))
    assert [len(c.ldap_calls) for c in costs] == direct
    assert all(n >= 3 for n in direct)  # a bind, a search, an unbind at least
    assert "LDAP" not in str(costs[0].ldap_calls)  # call names only: no DN, no password


def _slapd_operations(log) -> int:
    """Operations slapd logged: each ``conn=N op=M`` once (its request and RESULT lines)."""
    text = log.read_text(errors="replace")
    return len(set(re.findall(r"(conn=\d+ op=\d+) [A-Z]", text)))


def _wait_for_more(log, before: int) -> int:
    """The operations logged since BEFORE, once slapd's log stops growing (its writes lag)."""
    seen, still = _slapd_operations(log), 0
    while still < 3:
        time.sleep(0.2)
        now = _slapd_operations(log)
        still = still + 1 if now == seen else 0
        seen = now
    return seen - before


def _py_spy_pids(under) -> list[int]:
    """py-spy processes writing under UNDER: another xdist worker's gate may profile too."""
    out = subprocess.run(["pgrep", "-a", "-x", "py-spy"], capture_output=True, text=True).stdout
    return [int(ln.split()[0]) for ln in out.splitlines() if str(under) in ln]


@pytest.mark.slow
def test_run_shows_sql_counts_and_a_flame_graph_and_leaves_nothing(tmp_path):
    task = tiny_task(tmp_path / "tiny.json", times=4)
    proc = bench(
        "run", str(task), "--password-hash-rounds", "4", "--reports-dir", str(tmp_path / "r"),
        cwd=tmp_path, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    row = next(line for line in proc.stdout.splitlines() if "keystone.issue_token" in line)
    sql = row.split()[-2]  # SQL/req: median/max
    assert int(sql.split("/")[0]) > 10, row
    (summary,) = (tmp_path / "r").rglob("summary.html")
    html = summary.read_text()
    assert "SQL statements (median)" in html
    assert "Where Keystone's time went in this workload" in html
    assert '<div class="flame"><svg' in html  # the workload's own flame graph, drawn
    assert _py_spy_pids(tmp_path) == []
    root = tmp_path / ".keystone-bench"
    assert not list(root.rglob("trace-key")) and not list(root.rglob("traces"))
    assert all(live_pids(s) == [] for s in states(root))


@pytest.mark.slow
def test_the_150_ms_tree_names_the_sleep_under_the_issue_handler(tmp_path):
    from _patched_trees import gate_noise

    from rally_keystone_bench.deploy import venv

    tree = gate_noise().patched_tree(venv.cache_root() / "trees")
    proc = bench(
        "gate", "--baseline", "keystone", "--candidate", str(tree),
        "--task", str(ROOT / "tasks" / "gate.yaml"),
        "--task-args", json.dumps({"issue_seconds": 12, "validate_seconds": 8}),
        "--block-seconds", "2", "--max-time", "1",
        "--reports-dir", str(tmp_path / "reports"), cwd=tmp_path, timeout=900,
    )  # fmt: skip
    lines = proc.stdout.splitlines()
    at = lines.index(
        "where the time went (py-spy, self time per request Keystone served, candidate - baseline):"
    )
    top, block = lines[at + 1], "\n".join(lines[at : at + 6])
    assert top.strip().startswith(
        "keystone.issue_token: keystone/token/provider.py:Manager.issue_token"
    ), block
    assert "under keystone/api/auth.py:AuthTokenResource.post" in top
    # the line its samples were taken at, and the call made there, read from the tree
    line = _sleep_line(tree)
    assert f" line {line} (" in top and "%: _gate_noise_time.sleep(0.15))" in top, block
    added = float(top.split(" ms per request")[0].rsplit(" ", 1)[1])
    # 150 ms asked; a starved worker wakes late (seen: +230 ms at load average 17)
    assert 100 <= added <= 400, top
    assert all(live_pids(s) == [] for s in states(tmp_path / ".keystone-bench"))


def _sleep_line(tree) -> int:
    """The line of the tree's keystone/token/provider.py that sleeps."""
    text = (tree / "keystone" / "token" / "provider.py").read_text().splitlines()
    return next(n for n, line in enumerate(text, 1) if "_gate_noise_time.sleep(" in line)


@pytest.mark.slow
def test_sigint_mid_run_keeps_the_counters_gathered_so_far(tmp_path):
    """Ctrl-C once Rally's log shows 6 iterations done (100000 cannot end first): the
    partial summary still has Keystone's counters for what ran. No timed assertion."""
    task = tmp_path / "long.json"
    task.write_text(
        json.dumps(
            {
                "version": 2,
                "title": "long",
                "subtasks": [
                    {
                        "title": "issue tokens for a long time",
                        "scenario": {"KeystoneTokens.authenticate": {"method": "password"}},
                        "runner": {"constant": {"times": 100000, "concurrency": 1}},
                        "contexts": {"users": {"tenants": 1, "users_per_tenant": 1}},
                    }
                ],
            }
        )
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "rally_keystone_bench.cli", "run", str(task), "--trace", "on",
         "--password-hash-rounds", "4", "--reports-dir", "reports"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        log = _wait_for_iterations(tmp_path / "reports", "long.rally.log", 6, proc)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err[-3000:]
    summary = json.loads((log.parent / "long-summary" / "summary.json").read_text())
    (issue,) = summary["workloads"][0]["counters"].values()
    assert issue["traced_requests"] >= 5 and issue["sql_statements_median"] > 10, issue
    assert summary["keystone"]["db_connections_checked_out"] == 0
    row = next(line for line in out.splitlines() if line.strip().startswith("keystone.issue"))
    assert int(row.split()[-2].split("/")[0]) == issue["sql_statements_median"], row
    assert "interrupted by SIGINT" in out
    root = tmp_path / ".keystone-bench"
    assert not list(root.rglob("trace-key")) and not list(root.rglob("traces"))
    assert _py_spy_pids(tmp_path) == []


def _wait_for_iterations(reports: Path, name: str, n: int, proc) -> Path:
    deadline = time.monotonic() + 900  # a busy machine: starting Keystone, Rally's contexts
    while time.monotonic() < deadline and proc.poll() is None:
        for log in reports.glob(f"*/{name}"):
            if log.read_text(errors="replace").count(" END: ") >= n:
                return log
        time.sleep(1)
    raise AssertionError(f"the load never got to {n} iterations: {proc.poll()}")
