"""KeystoneTokens.* through the real `rally task start` against a real Keystone.

Every scenario must succeed on every iteration, its atomic actions must be in
`rally task report --json`, and Keystone's own access log must show exactly
one request per timed keystone.issue_token, validate_token and check_token.
"""

from __future__ import annotations

import json
import re
import secrets
from collections import Counter
from pathlib import Path

import pytest

from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec

pytestmark = pytest.mark.functional

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
TASK_UUID = re.compile(r"Task ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")

# Small sizes for tasks/token-suite.yaml: every scenario, a few iterations.
SUITE_ARGS = {
    "times": 6,
    "concurrency": 2,
    "repetitions": 3,
    "burst_count": 6,
    "burst_parallel": 3,
    "bursts": 2,
    "tenants": 1,
    "users_per_tenant": 2,
}


# -- helpers shared with test_no_secrets.py -----------------------------------


def run_task(
    rh: RallyHome,
    env: str,
    task: Path,
    args: dict | None = None,
    out_dir: Path | None = None,
    debug: bool = False,
) -> tuple[int, dict, str]:
    """`rally task start`, then its JSON report: (exit code, report, rally's output)."""
    cmd = ["--debug"] if debug else []
    cmd += ["task", "start", str(task), "--deployment", env]
    if args is not None:
        cmd += ["--task-args", json.dumps(args)]
    proc = rh.rally(*cmd, check=False, timeout=900)
    output = proc.stdout + proc.stderr
    found = TASK_UUID.search(output)
    assert found, output[-3000:]
    out_dir = out_dir or rh.path
    report = out_dir / f"{found.group(1)}.json"
    rh.rally("task", "report", found.group(1), "--json", "--out", str(report))
    return proc.returncode, json.loads(report.read_text()), output


def workloads(report: dict) -> list[dict]:
    return [w for task in report["tasks"] for s in task["subtasks"] for w in s["workloads"]]


def scenario_name(workload: dict) -> str:
    return next(iter(workload["scenario"]))


def atomic_counts(workload: dict) -> Counter:
    """How many times each atomic action ran, nested ones included."""
    counts: Counter = Counter()

    def walk(actions: list[dict]) -> None:
        for action in actions:
            counts[action["name"]] += 1
            walk(action["children"])

    for iteration in workload["data"]:
        walk(iteration["atomic_actions"])
    return counts


def load_window(workload: dict) -> tuple[float, float]:
    """From the first iteration's start to the last one's end (epoch seconds)."""
    starts = [it["timestamp"] for it in workload["data"]]
    ends = [it["timestamp"] + it["duration"] for it in workload["data"]]
    return min(starts), max(ends)


def access_lines(keystone: LocalKeystone, window: tuple[float, float]) -> Counter:
    """Requests Keystone logged in the window, counted by (method, uri)."""
    first, last = int(window[0] * 1000) - 2, int(window[1] * 1000) + 2
    counts: Counter = Counter()
    for line in keystone.access_log_path.read_text().splitlines():
        fields = line.split()
        if len(fields) < 4 or not fields[0].isdigit():
            continue
        if first <= int(fields[0]) <= last:
            counts[(fields[1], fields[2])] += 1
    return counts


def assert_all_succeeded(workload: dict) -> None:
    errors = [it["error"] for it in workload["data"] if it["error"]]
    assert not errors, f"{scenario_name(workload)}: {errors[0][:2]}"
    assert workload["total_iteration_count"] > 0
    assert workload["failed_iteration_count"] == 0
    assert workload["pass_sla"]


# -- fixtures -----------------------------------------------------------------


@pytest.fixture(scope="module")
def keystone(small_keystone):
    return small_keystone


@pytest.fixture(scope="module")
def rh(keystone, tmp_path_factory):
    home = RallyHome(tmp_path_factory.mktemp("rally"))
    home.create_env("ks", keystone_spec(keystone.admin_credentials))
    home.check_env("ks")
    return home


@pytest.fixture(scope="module")
def suite(rh):
    """tasks/token-suite.yaml, as shipped, with small arguments."""
    return run_task(rh, "ks", TASKS / "token-suite.yaml", SUITE_ARGS)


# -- the token suite, on keystone_tenants and keystone_users ----------------------


def test_suite_succeeds_on_every_iteration_of_every_scenario(suite):
    code, report, output = suite
    assert code == 0, output[-3000:]
    found = workloads(report)
    assert {scenario_name(w) for w in found} == {
        "KeystoneTokens.authenticate",
        "KeystoneTokens.validate",
        "KeystoneTokens.concurrent_create",
        "KeystoneTokens.lifecycle",
    }
    for workload in found:
        assert_all_succeeded(workload)


def test_no_stock_users_context_runs_beside_keystone_users(suite):
    """Every workload of the suite names keystone_users: the stock users context, a
    default of every OpenStack scenario, made a project and a user there that nothing
    used. Its stand-in (keystone_bench_default_users) runs instead and does nothing;
    where a workload names no users context it is the stock one (the env-users test)."""
    _, report, _ = suite
    for workload in workloads(report):
        ran = {c["plugin_name"]: c for c in workload["contexts_results"]}
        assert "users@openstack" not in ran, sorted(ran)
        assert "keystone_users@openstack" in ran
        default = ran["keystone_bench_default_users@openstack"]
        assert default["setup"]["error"] is None and default["cleanup"]["error"] is None


def _by_title(report: dict) -> dict[str, dict]:
    out = {}
    for task in report["tasks"]:
        for subtask in task["subtasks"]:
            out[subtask["title"]] = subtask["workloads"][0]
    return out


def test_suite_reports_the_atomic_actions_by_name(suite):
    _, report, _ = suite
    by_title = _by_title(report)
    iterations = SUITE_ARGS["times"]
    reps = SUITE_ARGS["repetitions"]

    password = atomic_counts(by_title["Issue project-scoped tokens with a password"])
    assert password == {"keystone.issue_token": iterations}
    rescope = atomic_counts(by_title["Rescope a token (no password hashing)"])
    assert rescope == {"keystone.issue_token": iterations}
    validate = atomic_counts(by_title["Validate tokens (GET)"])
    assert validate == {"keystone.validate_token": iterations * reps}
    check = atomic_counts(by_title["Check tokens (HEAD)"])
    assert check == {"keystone.check_token": iterations * reps}
    burst = atomic_counts(by_title["Create tokens in bursts"])
    assert burst == {
        "keystone.token_burst": SUITE_ARGS["bursts"],
        "keystone.issue_token": SUITE_ARGS["bursts"] * SUITE_ARGS["burst_count"],
    }
    lifecycle = atomic_counts(by_title["Issue, validate, revoke, and see the token refused"])
    assert lifecycle == {
        "keystone.issue_token": iterations // 2,
        "keystone.validate_token": 2 * (iterations // 2),
        "keystone.revoke_token": iterations // 2,
    }


def test_burst_requests_are_nested_inside_their_burst_and_charted(suite):
    _, report, _ = suite
    burst = _by_title(report)["Create tokens in bursts"]
    for iteration in burst["data"]:
        (parent,) = iteration["atomic_actions"]
        assert parent["name"] == "keystone.token_burst"
        children = parent["children"]
        assert len(children) == SUITE_ARGS["burst_count"]
        for child in children:
            assert parent["started_at"] <= child["started_at"] < child["finished_at"]
            assert child["finished_at"] <= parent["finished_at"]
        # the threads were released together: the first `parallel` requests
        # start within a few milliseconds of each other
        firsts = sorted(c["started_at"] for c in children)[: SUITE_ARGS["burst_parallel"]]
        assert firsts[-1] - firsts[0] < 0.05
        titles = {o["title"]: o for o in iteration["output"]["additive"]}
        wall = titles["Burst wall time"]["data"][0][1]
        rate = titles["Burst throughput"]["data"][0][1]
        assert wall == pytest.approx(parent["finished_at"] - parent["started_at"])
        assert rate == pytest.approx(SUITE_ARGS["burst_count"] / wall)


def test_one_keystone_request_per_timed_action(suite, keystone):
    """Keystone's access log, during each workload's load, against the atomic actions.

    Untimed requests are told apart by what they ask for: tokens issued
    before a timer (the token to validate, the validator's X-Auth-Token, the
    token that method "token" rescopes) ask for ?nocatalog=1 while the
    timed issues in these workloads ask for the catalog; lifecycle's check
    that a revoked token is refused asks for the catalog while its timed
    validations do not.
    """
    _, report, _ = suite
    by_title = _by_title(report)
    POST, POST_NC = ("POST", "/v3/auth/tokens"), ("POST", "/v3/auth/tokens?nocatalog=1")
    GET, GET_NC = ("GET", "/v3/auth/tokens"), ("GET", "/v3/auth/tokens?nocatalog=1")
    HEAD, DELETE = ("HEAD", "/v3/auth/tokens"), ("DELETE", "/v3/auth/tokens")

    def seen(title: str) -> tuple[Counter, Counter]:
        workload = by_title[title]
        return atomic_counts(workload), access_lines(keystone, load_window(workload))

    atomics, log = seen("Issue project-scoped tokens with a password")
    assert log[POST] == atomics["keystone.issue_token"]
    assert log[GET] + log[GET_NC] + log[HEAD] + log[DELETE] == 0

    atomics, log = seen("Rescope a token (no password hashing)")
    assert log[POST] == atomics["keystone.issue_token"]

    atomics, log = seen("Validate tokens (GET)")
    assert log[GET_NC] == atomics["keystone.validate_token"]
    assert log[GET] + log[HEAD] + log[POST] == 0
    # untimed: one token per iteration, plus the validator's own per thread
    assert SUITE_ARGS["times"] <= log[POST_NC] <= SUITE_ARGS["times"] + 2 * 2

    atomics, log = seen("Check tokens (HEAD)")
    assert log[HEAD] == atomics["keystone.check_token"]
    assert log[GET] + log[GET_NC] == 0

    atomics, log = seen("Create tokens in bursts")
    assert log[POST] == atomics["keystone.issue_token"]

    atomics, log = seen("Issue, validate, revoke, and see the token refused")
    assert log[POST] == atomics["keystone.issue_token"]
    assert log[GET_NC] == atomics["keystone.validate_token"]
    assert log[DELETE] == atomics["keystone.revoke_token"]
    assert log[GET] == atomics["keystone.revoke_token"]  # the untimed 404 check


def test_validate_uses_kept_alive_connections_across_iterations(suite, keystone):
    """Connections outlive Rally's per-iteration scenario objects.

    Each runner thread opens its connections once (a GET /v3 before any
    timer, per client); a client rebuilt per iteration would show one GET
    /v3 per iteration.
    """
    _, report, _ = suite
    workload = _by_title(report)["Validate tokens (GET)"]
    log = access_lines(keystone, load_window(workload))
    # two clients (issuer, validator) per runner thread, two threads
    assert log[("GET", "/v3")] <= 2 * SUITE_ARGS["concurrency"]
    assert log[("GET", "/v3")] < SUITE_ARGS["times"]


# -- other users: our contexts, existing users from the env spec ---------------


def _task(workloads_: list[dict], path: Path) -> Path:
    path.write_text(
        json.dumps(
            {"version": 2, "title": "t", "subtasks": [{"title": "t", "workloads": workloads_}]}
        )
    )
    return path


def _workload(name: str, args: dict, times: int, contexts: dict) -> dict:
    return {
        "scenario": {name: args},
        "runner": {"constant": {"times": times, "concurrency": min(2, times)}},
        "contexts": contexts,
        "sla": {"failure_rate": {"max": 0}},
    }


def test_scenarios_run_with_our_contexts_and_the_token_pool(rh, keystone, tmp_path):
    ours = {
        "keystone_tenants": {"tenants": 1},
        "keystone_users": {"users_per_tenant": 2},
        "token_pool": {"tokens_per_user": 2},
    }
    task = _task(
        [
            _workload("KeystoneTokens.authenticate", {}, 4, ours),
            _workload("KeystoneTokens.validate", {"repetitions": 3}, 4, ours),
            _workload("KeystoneTokens.lifecycle", {}, 2, ours),
        ],
        tmp_path / "ours.json",
    )
    code, report, output = run_task(rh, "ks", task)
    assert code == 0, output[-3000:]
    found = workloads(report)
    for workload in found:
        assert_all_succeeded(workload)
    validate = found[1]
    log = access_lines(keystone, load_window(validate))
    assert log[("GET", "/v3/auth/tokens?nocatalog=1")] == 12
    # pooled tokens: no token is issued per iteration, only validators' own
    assert log[("POST", "/v3/auth/tokens?nocatalog=1")] <= 2


def _admin_session(keystone: LocalKeystone):
    from keystoneauth1 import session as ks_session
    from keystoneauth1.identity import v3

    creds = keystone.admin_credentials
    return ks_session.Session(
        auth=v3.Password(
            auth_url=creds["auth_url"],
            username=creds["username"],
            password=creds["password"],
            project_name=creds["project_name"],
            user_domain_name="Default",
            project_domain_name="Default",
        )
    )


def _create_user(keystone: LocalKeystone, name: str, password: str) -> None:
    """A user with the member role on a project of its own, made with the admin API."""
    admin = _admin_session(keystone)
    url = keystone.auth_url
    project = admin.post(
        f"{url}/projects", json={"project": {"name": name, "domain_id": "default"}}, log=False
    ).json()["project"]
    user = admin.post(
        f"{url}/users",
        json={"user": {"name": name, "password": password, "domain_id": "default"}},
        log=False,
    ).json()["user"]
    roles = admin.get(f"{url}/roles?name=member", log=False).json()["roles"]
    admin.put(f"{url}/projects/{project['id']}/users/{user['id']}/roles/{roles[0]['id']}")


def test_scenarios_run_with_existing_users_from_the_env_spec(rh, keystone, tmp_path):
    name = "bench-existing-" + secrets.token_hex(3)
    password = secrets.token_urlsafe(12)
    _create_user(keystone, name, password)
    user = {
        "username": name,
        "password": password,
        "project_name": name,
        "user_domain_name": "Default",
        "project_domain_name": "Default",
    }
    # with the admin too, and with the user alone (it validates its own tokens)
    admin_and_user = keystone_spec(keystone.admin_credentials, users=[user])
    user_only = json.loads(json.dumps(admin_and_user))
    del user_only["openstack"]["admin"]
    user_only["openstack"]["users"] = [user]
    task = _task(
        [
            _workload("KeystoneTokens.authenticate", {"method": "token"}, 3, {}),
            _workload("KeystoneTokens.validate", {"method": "HEAD", "repetitions": 2}, 3, {}),
            _workload("KeystoneTokens.lifecycle", {"validations": 1}, 2, {}),
            _workload("KeystoneTokens.concurrent_create", {"count": 4, "parallel": 2}, 1, {}),
        ],
        tmp_path / "existing.json",
    )
    for env, spec in (("existing", admin_and_user), ("user-only", user_only)):
        rh.create_env(env, spec)
        code, report, output = run_task(rh, env, task)
        assert code == 0, f"{env}: {output[-3000:]}"
        for workload in workloads(report):
            assert_all_succeeded(workload)


def test_application_credentials_and_other_scopes(rh, keystone, tmp_path):
    session = _admin_session(keystone)
    url = keystone.auth_url
    admin_id = session.get_user_id()
    role = session.get(f"{url}/roles?name=admin").json()["roles"][0]["id"]
    session.put(f"{url}/domains/default/users/{admin_id}/roles/{role}")  # for scope: domain
    admin = dict(keystone.admin_credentials)
    admin.pop("auth_url")
    spec = keystone_spec(keystone.admin_credentials, users=[admin])
    rh.create_env("admin-as-user", spec)
    task = _task(
        [
            _workload("KeystoneTokens.authenticate", {"method": "application_credential"}, 3, {}),
            _workload("KeystoneTokens.authenticate", {"scope": "system"}, 2, {}),
            _workload("KeystoneTokens.authenticate", {"scope": "domain"}, 2, {}),
            _workload("KeystoneTokens.authenticate", {"scope": "unscoped"}, 2, {}),
            _workload(
                "KeystoneTokens.authenticate",
                {"fresh_connection": True, "include_catalog": False},
                2,
                {},
            ),
        ],
        tmp_path / "scopes.json",
    )
    code, report, output = run_task(rh, "admin-as-user", task)
    assert code == 0, output[-3000:]
    for workload in workloads(report):
        assert_all_succeeded(workload)
        statuses = [
            row
            for it in workload["data"]
            for out in it["output"]["additive"]
            for row in out["data"]
            if row[0] == "http status"
        ]
        assert statuses and all(value == 201 for _, value in statuses)
