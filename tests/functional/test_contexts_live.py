"""keystone_tenants, keystone_users, token_pool under the real rally CLI and a real Keystone.

Every run compares the full list of Keystone's users and projects before and
after: a normal run, a failing scenario, a Keystone restart, `rally task
abort` during setup, a bad role. Reuse runs keep exactly their tag's own,
and `keystone-bench cleanup --reuse` removes them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver.rally import UUID_RE, RallyHome, keystone_spec

pytestmark = pytest.mark.functional

ROUNDS = 4  # bcrypt's minimum: user creation stays cheap on 2 cores


@pytest.fixture(scope="module")
def ks(tmp_path_factory):
    keystone = LocalKeystone(
        Deployment(workers=2, password_hash_rounds=ROUNDS), tmp_path_factory.mktemp("ks")
    )
    keystone.start()
    try:
        yield keystone
    finally:
        keystone.stop()


@pytest.fixture(scope="module")
def admin(ks):
    return AdminClient(ks.admin_credentials)


@pytest.fixture(scope="module")
def rh(ks, tmp_path_factory):
    home = RallyHome(tmp_path_factory.mktemp("rally"))
    home.create_env("ks", keystone_spec(ks.admin_credentials))
    home.check_env("ks")
    return home


@pytest.fixture(autouse=True)
def reuse_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KEYSTONE_BENCH_REUSE_DIR", str(tmp_path / "reuse"))
    return tmp_path / "reuse"


def inventory(admin: AdminClient) -> set[tuple[str, str, str]]:
    """Every user and project in Keystone: (kind, id, name)."""
    out = set()
    for kind in ("users", "projects"):
        _, body = admin.request("GET", f"/{kind}", f"list {kind}")
        out |= {(kind, r["id"], r["name"]) for r in body[kind]}
    return out


def task_file(tmp: Path, workloads: list[dict]) -> Path:
    path = tmp / "task.json"
    path.write_text(
        json.dumps(
            {
                "version": 2,
                "title": "contexts",
                "subtasks": [{"title": "t", "workloads": workloads}],
            }
        )
    )
    return path


def workload(scenario: str, contexts: dict, args: dict | None = None, times: int = 2) -> dict:
    return {
        "scenario": {scenario: args or {}},
        "runner": {"constant": {"times": times, "concurrency": 2}},
        "contexts": contexts,
    }


def run_task(rh: RallyHome, path: Path, env: str = "ks") -> tuple[str, dict, str]:
    """rally task start; returns (task uuid, the workload of its JSON report, rally's output)."""
    proc = rh.rally("task", "start", "--env", env, str(path), check=False, timeout=600)
    output = proc.stdout + proc.stderr
    uuid = UUID_RE.search(output).group(0)
    report = path.parent / f"{uuid}.json"
    rh.rally("task", "report", uuid, "--json", "--out", str(report))
    data = json.loads(report.read_text())
    return uuid, data["tasks"][0]["subtasks"][0]["workloads"][0], output


def context_errors(wl: dict) -> dict[str, str]:
    errors = {}
    for ctx in wl["contexts_results"]:
        for phase in ("setup", "cleanup"):
            if ctx[phase]["error"]:
                errors[f"{ctx['plugin_name']} {phase}"] = json.dumps(ctx[phase]["error"])
    return errors


USERS_CTX = {
    "keystone_tenants": {"tenants": 2},
    "keystone_users": {"users_per_tenant": 3},
    "token_pool": {"tokens_per_user": 2, "revoke_at_cleanup": True},
}


def test_normal_run_with_stock_and_own_scenarios_leaves_keystone_as_it_was(rh, admin, tmp_path):
    before = inventory(admin)
    path = task_file(
        tmp_path,
        [
            workload("Authenticate.keystone", USERS_CTX),
            workload("KeystoneTokens.validate", USERS_CTX, {"repetitions": 2}),
        ],
    )
    _, wl, output = run_task(rh, path)
    assert context_errors(wl) == {}
    assert all(not it["error"] for it in wl["data"]), "stock scenario failed with our users"
    assert wl["total_iteration_count"] == 2
    assert "keystone_users: 6 users created in 2 projects, roles member" in output
    assert "keystone_users setup: 0 retries" in output
    assert inventory(admin) == before


def test_a_failing_scenario_still_cleans_up(rh, admin, tmp_path):
    before = inventory(admin)
    _, wl, _ = run_task(
        rh,
        task_file(
            tmp_path, [workload("Dummy.failure", USERS_CTX, {"sleep": 0, "to_iteration": 2})]
        ),
    )
    assert wl["data"] and all(it["error"] for it in wl["data"])
    assert context_errors(wl) == {}
    assert inventory(admin) == before


def test_a_role_that_does_not_exist_fails_setup_clearly_and_leaves_nothing(rh, admin, tmp_path):
    before = inventory(admin)
    ctx = {"keystone_tenants": {"tenants": 2}, "keystone_users": {"roles": ["member", "nosuch"]}}
    _, wl, _ = run_task(rh, task_file(tmp_path, [workload("Dummy.dummy", ctx)]))
    errors = context_errors(wl)
    assert list(errors) == ["keystone_users@openstack setup"]
    assert "role 'nosuch' does not exist in Keystone" in errors["keystone_users@openstack setup"]
    assert inventory(admin) == before


# serial: each restart must be over within the contexts' 30 s of patience
# (RetryPolicy.min_patience); beside another worker's Keystones it took longer.
@pytest.mark.serial
def test_keystone_restarted_during_setup_and_cleanup(ks, rh, admin, tmp_path):
    """Keystone restarts once 20 rkb- resources exist, and again while they are deleted.

    Bound: each restart must be over within the contexts' patience, 30 s in setup and
    120 s in cleanup (RetryPolicy); a warm ``keystone up``, setup included, took 9.7 to
    15.5 s (doc/source/run.rst), at most about half the 30 s. The restarter polls every 0.2 s
    (and two list calls) for windows of seconds (164 resources to create, cleanup from
    100 down to 1); one restart on admin calls suffices; 300 s bounds each wait.
    """
    before = inventory(admin)
    ctx = {"keystone_tenants": {"tenants": 4}, "keystone_users": {"users_per_tenant": 40}}
    path = task_file(tmp_path, [workload("Dummy.dummy", ctx, {"sleep": 2}, times=2)])
    restarts = []

    def restart_when(predicate, label):
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if predicate(len([r for r in inventory(admin) if r[2].startswith("rkb-")])):
                    ks.restart()
                    restarts.append(label)
                    return
            except Exception:
                pass
            time.sleep(0.2)

    def restarter():
        restart_when(lambda n: n >= 20, "setup")  # some users exist: mid-creation
        restart_when(lambda n: 0 < n < 100, "cleanup")  # deletion under way

    thread = threading.Thread(target=restarter)
    thread.start()
    _, wl, output = run_task(rh, path)
    thread.join()
    assert restarts, "Keystone was never restarted"
    assert context_errors(wl) == {}
    assert "retries (" in output  # the connection failures were retried and reported
    assert inventory(admin) == before


def test_rally_task_abort_during_setup_leaves_keystone_as_it_was(rh, admin, tmp_path):
    """rally task abort once 20 of 1,200 users exist: aborted in setup, nothing left.

    Timing: polled every 0.2 s (two list calls), the abort lands with about 1,180
    creations to come, 4 at a time at 4 bcrypt rounds; no creation rate at 4 rounds
    is quoted (at 12 rounds, 20 threads made 100 users in 35.8 s: contexts.rst).
    300 s bounds each wait."""
    before = inventory(admin)
    ctx = {
        "keystone_tenants": {"tenants": 4},
        "keystone_users": {"users_per_tenant": 300, "resource_management_workers": 4},
    }
    path = task_file(tmp_path, [workload("Dummy.dummy", ctx)])
    from rally_keystone_bench.driver.rally import rally_executable

    # Earlier tests of this Rally home may have left a task marked running:
    # abort only the one started here.
    earlier = set(rh.rally("task", "list", "--env", "ks", "--uuids-only").stdout.split())
    proc = subprocess.Popen(
        [
            rally_executable(),
            "--config-file",
            str(rh.config_path),
            "task",
            "start",
            "--env",
            "ks",
            str(path),
        ],
        env=rh.environ(),
        cwd=rh.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if (
                len([r for r in inventory(admin) if r[0] == "users" and r[2].startswith("rkb-")])
                >= 20
            ):
                break
            time.sleep(0.2)
        else:
            pytest.fail("setup never started creating users")
        running = rh.rally("task", "list", "--env", "ks", "--status", "running", "--uuids-only")
        tasks = [t for t in running.stdout.split() if t not in earlier]
        assert len(tasks) == 1, (running.stdout, earlier)
        rh.rally("task", "abort", tasks[-1])
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "task aborted during setup" in output
    status = rh.rally("task", "status", tasks[-1]).stdout
    assert "aborted" in status
    assert inventory(admin) == before


def test_reuse_keeps_exactly_its_own_and_the_cleanup_verb_removes_them(
    ks, rh, admin, tmp_path, reuse_dir
):
    before = inventory(admin)
    ctx = {
        "keystone_tenants": {"tenants": 2},
        "keystone_users": {"users_per_tenant": 3, "reuse": "ft"},
        "token_pool": {},
    }
    path = task_file(tmp_path, [workload("KeystoneTokens.validate", ctx)])
    _, wl, output = run_task(rh, path)
    assert context_errors(wl) == {}
    kept = inventory(admin) - before
    assert inventory(admin) >= before
    assert sorted(name for _, _, name in kept) == sorted(
        [f"rkb-reuse-ft-p0{i}" for i in range(2)]
        + [f"rkb-reuse-ft-p0{i}-u000{j}" for i in range(2) for j in range(3)]
    )
    state = next(reuse_dir.iterdir())
    assert oct(state.stat().st_mode & 0o777) == "0o600"
    # The passwords are in the state file only, never in Rally's output.
    for user in json.loads(state.read_text())["users"].values():
        assert user["password"] not in output

    _, wl, output = run_task(rh, path)
    assert context_errors(wl) == {}
    assert all(not it["error"] for it in wl["data"])
    assert "keystone_users: 0 users created, 6 reused, 0 passwords reset" in output
    assert inventory(admin) - before == kept  # the very same ids

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rally_keystone_bench.cli",
            "cleanup",
            "--reuse",
            "ft",
            "--run-dir",
            str(ks.run_dir),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "reuse tag ft: deleted 2 projects and 6 users" in proc.stdout
    assert inventory(admin) == before
    assert not state.exists()


def test_existing_users_are_used_and_never_deleted(ks, rh, admin, tmp_path):
    roles = admin.role_ids(["member"])
    project = admin.create("projects", "ft-existing", {}, "default")
    user = admin.create(
        "users",
        "ft-existing-user",
        {"password": "ft-pass-1234", "default_project_id": project["id"]},
        "default",
    )
    admin.grant(project["id"], user["id"], roles["member"], "grant")
    try:
        creds = dict(ks.admin_credentials)
        users = [
            {
                "username": "ft-existing-user",
                "password": "ft-pass-1234",
                "project_name": "ft-existing",
                "user_domain_name": "Default",
                "project_domain_name": "Default",
            }
        ]
        rh.create_env("ks-users", keystone_spec(creds, users))
        before = inventory(admin)
        ctx = {"keystone_users": {"existing": True}, "token_pool": {"tokens_per_user": 2}}
        _, wl, output = run_task(
            rh, task_file(tmp_path, [workload("KeystoneTokens.validate", ctx)]), env="ks-users"
        )
        assert context_errors(wl) == {}
        assert all(not it["error"] for it in wl["data"])
        assert "using the env's 1 existing users" in output
        assert inventory(admin) == before
    finally:
        admin.delete("users", user["id"])
        admin.delete("projects", project["id"])


@pytest.mark.parametrize(
    "contexts, expected",
    [
        ({"keystone_tenants": {}, "keystone_users": {"users_per_tenant": 0}}, "users_per_tenant"),
        (
            {"keystone_tenants": {}, "keystone_users": {}, "token_pool": {"tokens_per_user": 0}},
            "tokens_per_user",
        ),
        ({"keystone_users": {"existing": True}}, "existing: true but the env lists no users"),
    ],
)
def test_rally_task_validate_rejects_bad_config_naming_the_field(rh, tmp_path, contexts, expected):
    path = task_file(tmp_path, [workload("Dummy.dummy", contexts)])
    proc = rh.rally("task", "validate", "--env", "ks", str(path), check=False)
    assert proc.returncode != 0
    assert expected in proc.stdout + proc.stderr
