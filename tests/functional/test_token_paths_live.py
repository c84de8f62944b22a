"""tasks/token-paths.yaml through the real `rally task start` on a real Keystone.

Every path succeeds; Keystone's access log shows one request per timed
action; the keystone_totp, keystone_trusts and keystone_scope_roles contexts
leave nothing behind (inventory of credentials, trusts and role assignments
before and after).

PostgreSQL, not SQLite: on SQLite, Keystone 30.0.0 leaves a deleted user's
application_credential_role rows behind, and a later credential that reuses
the internal id fails with 409 (seen here). TOTP is an auth method only when
keystone.conf's [auth] methods lists it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_scenarios_live import (
    _admin_session,
    access_lines,
    assert_all_succeeded,
    atomic_counts,
    load_window,
    run_task,
    workloads,
)

from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec

pytestmark = [pytest.mark.functional, pytest.mark.slow]  # about 11 min on 2 busy cores

TASK = Path(__file__).resolve().parents[2] / "tasks" / "token-paths.yaml"
ARGS = {"times": 3, "concurrency": 1, "paths": ["trust", "totp", "application_credential"]}
POST, POST_NC = ("POST", "/v3/auth/tokens"), ("POST", "/v3/auth/tokens?nocatalog=1")
GET, GET_NC = ("GET", "/v3/auth/tokens"), ("GET", "/v3/auth/tokens?nocatalog=1")
HEAD = ("HEAD", "/v3/auth/tokens")


def inventory(keystone) -> dict[str, int]:
    """What the contexts create, counted through the admin API."""
    session = _admin_session(keystone)
    url = keystone.auth_url
    return {
        "credentials": len(session.get(f"{url}/credentials").json()["credentials"]),
        "trusts": len(session.get(f"{url}/OS-TRUST/trusts").json()["trusts"]),
        "role assignments": len(session.get(f"{url}/role_assignments").json()["role_assignments"]),
        "users": len(session.get(f"{url}/users").json()["users"]),
        "projects": len(session.get(f"{url}/projects").json()["projects"]),
    }


METHODS = "external,password,token,oauth1,mapped,application_credential,totp"


@pytest.fixture(scope="module")
def small_keystone(tmp_path_factory):
    dep = Deployment(
        workers=1, password_hash_rounds=4, db="postgresql", conf={"auth.methods": METHODS}
    )
    with LocalKeystone(dep, tmp_path_factory.mktemp("ks")) as ks:
        yield ks


@pytest.fixture(scope="module")
def paths_run(small_keystone, tmp_path_factory):
    home = RallyHome(tmp_path_factory.mktemp("rally"))
    home.create_env("ks", keystone_spec(small_keystone.admin_credentials))
    home.check_env("ks")
    before = inventory(small_keystone)
    code, report, output = run_task(home, "ks", TASK, ARGS)
    return code, report, output, before, inventory(small_keystone)


def test_every_path_and_scope_succeeds(paths_run):
    code, report, output, _, _ = paths_run
    assert code == 0, output[-3000:]
    titles = [w["description"] or w.get("title") for w in workloads(report)]
    # trust: 1 scope + 3 validations; totp: 3 scopes, 3 validations in each;
    # application credential: 1 + 3
    assert len(workloads(report)) == 4 + 12 + 4, titles
    for workload in workloads(report):
        assert_all_succeeded(workload)


def test_one_keystone_request_per_timed_action(paths_run, small_keystone):
    _, report, _, _, _ = paths_run
    for workload in workloads(report):
        atomics = atomic_counts(workload)
        log = access_lines(small_keystone, load_window(workload))
        args = next(iter(workload["scenario"].values()))
        if "issue_path" in next(iter(workload["scenario"])):
            # timed issues ask for the catalog; untimed setup (none here but the
            # application credential's token) asks for nocatalog
            assert log[POST] == atomics["keystone.issue_token"] == ARGS["times"], args
            assert log[GET] + log[GET_NC] + log[HEAD] == 0, args
        elif args["method"] == "HEAD":
            assert log[HEAD] == atomics["keystone.check_token"] == ARGS["times"], args
            assert log[GET] + log[GET_NC] == 0, args
        else:
            seen = log[GET] if args["include_catalog"] else log[GET_NC]
            assert seen == atomics["keystone.validate_token"] == ARGS["times"], args
            assert log[HEAD] + log[GET_NC if args["include_catalog"] else GET] == 0, args


def test_the_contexts_leave_nothing_behind(paths_run):
    _, _, _, before, after = paths_run
    assert after == before
