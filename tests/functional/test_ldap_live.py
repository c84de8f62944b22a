"""Users from LDAP: a real slapd, a real Keystone with its LDAP identity driver, real Rally.

The directory's users live in the LDAP domain (domain-specific config); the
admin stays in SQL. Connections are counted from slapd's own log, one
``ACCEPT from IP=`` line per LDAP connection it accepted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import requests
from _bench_helpers import bench, live_pids, states

from rally_keystone_bench import cli
from rally_keystone_bench.clients.auth import UserAuth
from rally_keystone_bench.clients.tokens import TokenClient
from rally_keystone_bench.deploy import directory, process
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _packages import require_package  # noqa: E402

require_package("slapd", "slapd", "ldap-utils", "libldap2-dev", "libsasl2-dev")

pytestmark = [pytest.mark.functional, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 2
POOL_SIZE = 2
AUTH_POOL_SIZE = 2


def ldap_user(ks: LocalKeystone) -> dict:
    return json.loads(ks.directory_users_path.read_text())["users"][0]


def issue(ks: LocalKeystone, name: str, password: str) -> requests.Response:
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {"name": name, "domain": {"name": "LDAP"}, "password": password}
                },
            }
        }
    }
    return requests.post(ks.auth_url + "/auth/tokens", json=body, timeout=60)


def admin_token(ks: LocalKeystone) -> str:
    result = TokenClient(ks.auth_url).issue(UserAuth.from_credential(ks.admin_credentials))
    assert result.status == 201 and result.token is not None
    return result.token.value


def accepts(ks: LocalKeystone) -> int:
    return directory.count_accepts(ks.run_dir / "ldap" / "slapd.log")


def assert_nothing_left(ks: LocalKeystone, pids: dict[str, int]) -> None:
    assert set(pids) >= {"slapd", "server"}
    assert not [name for name, pid in pids.items() if process.is_alive(pid)]
    ldap_dir = ks.run_dir / "ldap"
    assert not (ldap_dir / "data").exists()
    assert not (ldap_dir / "directory-users.json").exists()
    assert (ldap_dir / "slapd.log").exists()  # the log is kept


@pytest.fixture
def pools_off(tmp_path):
    ks = LocalKeystone(Deployment(identity="ldap", ldap_pool=False, workers=WORKERS), tmp_path)
    ks.start()
    try:
        yield ks
    finally:
        ks.stop()


def test_ldap_user_gets_a_token_a_wrong_password_401_and_each_issue_opens_connections(
    pools_off,
):
    ks = pools_off
    user = ldap_user(ks)
    first = issue(ks, user["name"], user["password"])
    assert first.status_code == 201
    assert first.json()["token"]["user"]["domain"]["name"] == "LDAP"
    subject = first.headers["X-Subject-Token"]
    check = requests.get(
        ks.auth_url + "/auth/tokens",
        headers={"X-Auth-Token": admin_token(ks), "X-Subject-Token": subject},
        timeout=60,
    )
    assert check.status_code == 200
    assert check.json()["token"]["user"]["name"] == user["name"]
    assert issue(ks, user["name"], user["password"] + "-wrong").status_code == 401

    before = accepts(ks)
    tokens = 5
    for _ in range(tokens):
        assert issue(ks, user["name"], user["password"]).status_code == 201
    # Pools off: every token issue connects to LDAP anew (search and bind).
    assert accepts(ks) - before >= tokens

    pids = dict(ks.pids)
    ks.stop()
    assert_nothing_left(ks, pids)


def test_pools_on_open_at_most_workers_times_pool_sizes_for_the_whole_run(tmp_path):
    dep = Deployment(
        identity="ldap",
        ldap_pool=True,
        ldap_pool_size=POOL_SIZE,
        ldap_auth_pool_size=AUTH_POOL_SIZE,
        workers=WORKERS,
    )
    ks = LocalKeystone(dep, tmp_path)
    ks.start()
    try:
        conf = (ks.domain_config_dir / "keystone.LDAP.conf").read_text()
        assert "use_pool = true" in conf and "use_auth_pool = true" in conf
        user = ldap_user(ks)
        tokens = 20
        for _ in range(tokens):
            assert issue(ks, user["name"], user["password"]).status_code == 201
        assert issue(ks, user["name"], "wrong").status_code == 401
    finally:
        pids = dict(ks.pids)
        ks.stop()
    # One pool and one auth pool per worker process, for the whole run (plus
    # the readiness probe at slapd's start). An auth-pool connection lives
    # auth_pool_connection_lifetime (60 s): this run is far shorter.
    total = accepts(ks)
    assert 0 < total <= WORKERS * (POOL_SIZE + AUTH_POOL_SIZE) < tokens
    assert_nothing_left(ks, pids)


def test_rally_tokens_for_ldap_users_leave_no_project_or_grant(tmp_path):
    ks = LocalKeystone(Deployment(identity="ldap", workers=WORKERS), tmp_path / "ks")
    ks.start()
    try:
        home = RallyHome(tmp_path / "rally")
        spec = keystone_spec(ks.admin_credentials)
        spec["!extras"] = {"keystone_bench": {"directory_users": str(ks.directory_users_path)}}
        home.create_env("ldap", spec)
        home.check_env("ldap")
        token = admin_token(ks)
        headers = {"X-Auth-Token": token}

        def projects() -> set[str]:
            body = requests.get(ks.auth_url + "/projects", headers=headers, timeout=60).json()
            return {p["name"] for p in body["projects"]}

        before = projects()
        task_args = {"times": 5, "concurrencies": [1, 2], "ldap_domain": "LDAP"}
        task = str(ROOT / "tasks" / "ldap-serial-tokens.yaml")
        proc = home.rally(
            "task", "start", task, "--env", "ldap", "--task-args", json.dumps(task_args),
            check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-2000:]
        out = tmp_path / "report.json"
        home.rally("task", "report", "--json", "--out", str(out))
        report = json.loads(out.read_text())
        workloads = [w for t in report["tasks"] for s in t["subtasks"] for w in s["workloads"]]
        assert len(workloads) == 2
        for wl in workloads:
            assert wl["pass_sla"]
            assert len(wl["data"]) == 5
            assert not [it for it in wl["data"] if it["error"]]
        assert projects() == before
        domains = requests.get(
            ks.auth_url + "/domains", headers=headers, params={"name": "LDAP"}, timeout=60
        ).json()["domains"]
        users = requests.get(
            ks.auth_url + "/users",
            headers=headers,
            params={"name": ldap_user(ks)["name"], "domain_id": domains[0]["id"]},
            timeout=60,
        ).json()["users"]
        assert len(users) == 1
        grants = requests.get(
            ks.auth_url + "/role_assignments",
            headers=headers,
            params={"user.id": users[0]["id"]},
            timeout=60,
        ).json()["role_assignments"]
        assert grants == []
    finally:
        pids = dict(ks.pids)
        ks.stop()
    assert_nothing_left(ks, pids)


SMALL_SUITE = """
{% set user_contexts = {"keystone_tenants": {"tenants": 1},
    "keystone_users": {"existing": true, "domain": ldap_domain, "users_per_tenant": 2}} %}
---
version: 2
title: A small token suite for LDAP users
subtasks:
  - title: Issue password tokens
    scenario: {KeystoneTokens.authenticate: {scope: project, method: password}}
    runner: {constant: {times: 4, concurrency: 2}}
    contexts: {{ user_contexts | tojson }}
    sla: {failure_rate: {max: 0}}
  - title: Issue, validate, revoke
    scenario: {KeystoneTokens.lifecycle: {validations: 2, revoke: true}}
    runner: {constant: {times: 4, concurrency: 2}}
    contexts: {{ user_contexts | tojson }}
    sla: {failure_rate: {max: 0}}
"""


def test_run_identity_ldap_passes_a_small_token_suite(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    task = tmp_path / "ldap-suite.yaml"
    task.write_text(SMALL_SUITE)
    rc = cli.main(["run", "--identity", "ldap", "--ldap-pool", "off", str(task)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.count("SLA passed") == 2 and "SLA FAILED" not in out
    assert " 100.0% " in out and "% " in out
    ldap_dirs = list((tmp_path / ".keystone-bench" / "runs").glob("*/keystone/ldap"))
    assert len(ldap_dirs) == 1
    assert not (ldap_dirs[0] / "data").exists()
    assert not (ldap_dirs[0] / "directory-users.json").exists()


@pytest.mark.serial  # a gate: it judges latencies
def test_gate_identity_ldap_times_binds_of_a_directory_user_on_both_sides(tmp_path):
    """gate --identity ldap: each side's paired password tokens are a directory user's.

    Bound: at least 10 binds as the user a side, from 10 s of paired tokens at
    concurrency 1 (and the gate's validate tokens). A pools-off LDAP token took 75.7 ms
    p50 idle (doc/source/ldap.rst), about 65 a side in 10 s; at load 10 to 17 the
    serial average was 0.584 s, about 8 a side, under the bound."""
    proc = bench(
        "gate", "--baseline", "keystone", "--candidate", "keystone",
        "--identity", "ldap", "--ldap-pool", "off",
        "--task", str(ROOT / "tasks" / "gate.yaml"),
        "--task-args", json.dumps({"issue_seconds": 10, "validate_seconds": 4}),
        "--block-seconds", "2", "--max-time", "1",
        "--reports-dir", str(tmp_path / "reports"), cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert proc.returncode in (0, 3), proc.stdout[-3000:] + proc.stderr[-2000:]
    (run,) = (tmp_path / ".keystone-bench" / "runs").glob("gate-*")
    (out,) = (tmp_path / "reports").iterdir()
    issue = next(
        a for a in json.loads((out / "gate.json").read_text())["actions"]
        if a["action"] == "keystone.issue_token"
    )  # fmt: skip
    tokens = issue["clean_blocks"] + issue["blocks_set_aside"]
    assert tokens >= 1
    user_dn = f'BIND dn="uid={directory.user_name(1)},{directory.USERS_OU}"'
    for side in ("baseline", "candidate"):
        # The user's openrc (0600 while it lived) goes with the directory's users.
        assert not (run / side / "keystone" / "ldap-openrc").exists()
        log = (run / side / "keystone" / "ldap" / "slapd.log").read_text(errors="replace")
        # Pools off: every password token of the load binds as the user (and
        # the gate's own validate tokens too), on each side.
        assert log.count(user_dn) >= 10, side
        assert not (run / side / "keystone" / "ldap" / "data").exists()
    assert all(live_pids(s) == [] for s in states(tmp_path / ".keystone-bench"))
