"""Contexts without a Keystone: retries, the create/409 rules, schemas, token_pool, reuse state."""

from __future__ import annotations

import json
import os
import stat
import time
from types import SimpleNamespace

import pytest
from fake_keystone import RESET, FakeKeystone, serving
from rally.task import context as rally_context

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.clients.retry import (
    KeystoneAdminError,
    RetryPolicy,
    RetryStats,
    TransientError,
    call,
)
from rally_keystone_bench.clients.tokens import Token
from rally_keystone_bench.plugins.contexts import _base, directory_users, reuse, token_pool, users
from rally_keystone_bench.verbs import cleanup

FAST = RetryPolicy(max_retries=3, base_delay=0.0, max_delay=0.0, min_patience=0.0)


# -- retries -------------------------------------------------------------------
def test_transient_failures_are_retried_and_counted():
    answers = [
        TransientError("HTTP 500", 500, "database is locked"),
        TransientError("connection", 0, "reset"),
        "ok",
    ]

    def attempt():
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    stats = RetryStats()
    assert call(attempt, "create user x", stats, FAST, sleep=lambda s: None) == "ok"
    assert stats.total == 2
    assert stats.describe() == "2 retries (HTTP 500: 1, connection: 1)"


def test_retries_exhausted_name_the_resource_and_status():
    def attempt():
        raise TransientError("HTTP 500", 500, "database is locked")

    with pytest.raises(KeystoneAdminError) as err:
        call(attempt, "create user rkb-x-p00-u0001", RetryStats(), FAST, sleep=lambda s: None)
    assert err.value.status == 500
    assert err.value.attempts == 4
    assert "create user rkb-x-p00-u0001: HTTP 500 after 4 attempts" in str(err.value)


def test_permanent_error_is_not_retried():
    calls = []

    def attempt():
        calls.append(1)
        raise KeystoneAdminError("create user x", 403, "forbidden")

    stats = RetryStats()
    with pytest.raises(KeystoneAdminError):
        call(attempt, "create user x", stats, FAST, sleep=lambda s: None)
    assert len(calls) == 1 and stats.total == 0


def test_patience_keeps_retrying_through_a_restart():
    clock = iter(range(100))
    policy = RetryPolicy(max_retries=1, base_delay=0, max_delay=0, min_patience=10)
    n = []

    def attempt():
        n.append(1)
        if len(n) < 6:
            raise TransientError("connection", 0, "refused")
        return "up"

    assert (
        call(attempt, "x", RetryStats(), policy, sleep=lambda s: None, clock=lambda: next(clock))
        == "up"
    )


def test_backoff_is_capped():
    policy = RetryPolicy(base_delay=0.1, max_delay=4.0)
    assert all(policy.delay(n) <= 4.0 for n in range(30))
    assert policy.delay(0) <= 0.1


# -- admin client: the create/409 rules ---------------------------------------------
@pytest.fixture
def keystone():
    """The scripted fake Keystone: the admin client speaks HTTP to it, retries and all."""
    with serving(FakeKeystone()) as server:
        yield server


def make_admin(server, script):
    server.script = {key: list(answers) for key, answers in script.items()}
    credential = {
        "auth_url": server.url,
        "username": "admin",
        "password": "s3cret",
        "project_name": "admin",
        "user_domain_name": "Default",
        "project_domain_name": "Default",
    }
    return _admin.AdminClient(credential, policy=FAST)


def test_create_adopts_its_own_resource_when_a_retry_answers_409(keystone):
    admin = make_admin(
        keystone,
        {
            ("POST", "/users"): [RESET, (409, {"error": {"message": "dup"}})],
            ("GET", "/users"): [(200, {"users": [{"id": "u1", "name": "n"}]})],
        },
    )
    assert admin.create("users", "n", {}, "default")["id"] == "u1"
    assert admin.stats.total == 1


def test_create_refuses_a_name_that_existed_before(keystone):
    admin = make_admin(
        keystone,
        {
            ("POST", "/projects"): [(409, {"error": {"message": "dup"}})],
            ("GET", "/projects"): [(200, {"projects": [{"id": "p9", "name": "n"}]})],
        },
    )
    with pytest.raises(KeystoneAdminError, match="existed before"):
        admin.create("projects", "n", {}, "default")


def test_create_retries_a_409_from_a_concurrent_write(keystone):
    admin = make_admin(
        keystone,
        {
            ("POST", "/projects"): [
                (409, {"error": {"message": "deadlock"}}),
                (201, {"project": {"id": "p1", "name": "n"}}),
            ],
            ("GET", "/projects"): [(200, {"projects": []})],
        },
    )
    assert admin.create("projects", "n", {}, "default")["id"] == "p1"
    assert admin.stats.causes == {"HTTP 409": 1}


def test_a_permanent_error_names_the_resource_and_status_without_the_password(keystone):
    admin = make_admin(keystone, {("POST", "/users"): [(400, {"error": {"message": "bad"}})]})
    with pytest.raises(KeystoneAdminError) as err:
        admin.create("users", "rkb-1-p00-u0000", {"password": "s3cret"}, "default")
    assert str(err.value) == "create user rkb-1-p00-u0000: HTTP 400: bad"
    assert "s3cret" not in str(err.value)


def test_delete_of_something_already_gone_is_not_an_error(keystone):
    admin = make_admin(keystone, {("DELETE", "/users/u1"): [(500, {}), (404, {})]})
    assert admin.delete("users", "u1") is False
    assert admin.stats.total == 1


def test_missing_role_is_named_with_the_roles_that_exist(keystone):
    admin = make_admin(
        keystone, {("GET", "/roles"): [(200, {"roles": [{"id": "r1", "name": "member"}]})]}
    )
    with pytest.raises(
        ValueError, match=r"role 'nosuch' does not exist in Keystone \(roles there: member\)"
    ):
        admin.role_ids(["member", "nosuch"])


def test_run_parallel_stops_after_the_first_error_and_on_abort():
    def job(i):
        if i == 0:
            raise RuntimeError("boom")
        time.sleep(0.01)
        return i

    results, errors, _ = _admin.run_parallel(job, range(50), workers=1)
    assert len(errors) == 1 and results == []
    results, errors, stopped = _admin.run_parallel(lambda i: i, range(5), 2, lambda: True)
    assert results == [] and stopped
    results, errors, _ = _admin.run_parallel(job, range(5), 1, fail_fast=False)
    assert sorted(results) == [1, 2, 3, 4] and len(errors) == 1


# -- schemas (what `rally task validate` says) ------------------------------------------
@pytest.fixture(scope="module")
def rally_plugins():
    from rally import plugins

    plugins.load()


def syntax_errors(name, cfg):
    return rally_context.Context.validate(
        name=name, context=None, config=None, plugin_cfg=cfg, vtype="syntax"
    )


@pytest.mark.parametrize(
    "name, cfg, field",
    [
        ("keystone_users", {"users_per_tenant": 0}, "users_per_tenant"),
        ("token_pool", {"tokens_per_user": 0}, "tokens_per_user"),
        ("keystone_tenants", {"tenants": 0}, "tenants"),
        ("keystone_users", {"roles": []}, "roles"),
        ("keystone_users", {"reuse": "no spaces"}, "reuse"),
        ("keystone_users", {"users_per_tenent": 2}, "users_per_tenent"),
        ("token_pool", {"scope": "galaxy"}, "scope"),
    ],
)
def test_bad_config_is_rejected_naming_the_field(rally_plugins, name, cfg, field):
    errors = syntax_errors(name, cfg)
    assert errors and field in errors[0]


@pytest.mark.parametrize(
    "name, cfg",
    [
        ("keystone_tenants", {"tenants": 12, "resource_management_workers": 30}),
        (
            "keystone_users",
            {"users_per_tenant": 512, "roles": ["member", "reader"], "reuse": "seed-000"},
        ),
        ("keystone_users", {"existing": True}),
        (
            "token_pool",
            {"tokens_per_user": 3, "scope": "project", "min_ttl": 120, "revoke_at_cleanup": True},
        ),
    ],
)
def test_good_config_passes(rally_plugins, name, cfg):
    assert syntax_errors(name, cfg) == []


def existing_check(plugin_cfg, env_users):
    ctx = {"env": {"platforms": {"openstack": {"admin": {"username": "a"}, "users": env_users}}}}
    v = users.UsersConfigValidator()
    try:
        v.validate(ctx, None, users.KeystoneUsers, plugin_cfg)
    except Exception as exc:  # ValidationError
        return str(exc)
    return None


def test_existing_without_env_users_is_rejected():
    assert "existing: true but the env lists no users" in existing_check({"existing": True}, [])
    assert existing_check({"existing": True}, [{"username": "u", "password": "p"}]) is None
    assert "remove users_per_tenant" in existing_check(
        {"existing": True, "users_per_tenant": 3}, [{"username": "u"}]
    )


def test_existing_users_of_a_directory_domain_need_the_envs_users_file():
    def check(cfg, extras):
        v = users.UsersConfigValidator()
        try:
            v.validate({"env": {"extras": extras, "platforms": {}}}, None, None, cfg)
        except Exception as exc:  # ValidationError
            return str(exc)
        return None

    extras = {"keystone_bench": {"directory_users": "/run/directory-users.json"}}
    ok = {"existing": True, "domain": "LDAP", "users_per_tenant": 2, "roles": ["member"]}
    assert check(ok, extras) is None
    assert "names no directory users" in check(ok, {})
    assert "needs existing: true" in check({"domain": "LDAP"}, extras)
    assert "remove reuse" in check({"existing": True, "domain": "LDAP", "reuse": "t"}, extras)


def test_directory_users_are_read_from_the_file_the_env_names(tmp_path):
    path = tmp_path / "users.json"
    path.write_text(json.dumps({"domain": "LDAP", "users": [{"name": "u1", "password": "p"}]}))
    env = {"extras": {"keystone_bench": {"directory_users": str(path)}}}
    assert directory_users.load_directory_users(env, "LDAP") == [{"name": "u1", "password": "p"}]
    with pytest.raises(Exception, match="of domain 'LDAP', not 'Corp'"):
        directory_users.load_directory_users(env, "Corp")


# -- token_pool ---------------------------------------------------------------------------
def iso(seconds_from_now):
    from datetime import datetime, timezone

    return datetime.fromtimestamp(time.time() + seconds_from_now, timezone.utc).isoformat()


class FakeTokenClient:
    def __init__(self):
        self.issued = 0

    def issue(self, auth, method, scope, include_catalog=True, **kw):
        self.issued += 1
        return SimpleNamespace(token=Token(f"fresh{self.issued}", iso(3600)), status=201)


def pool_context(expiries):
    user = {"id": "u1", "tenant_id": "p1", "credential": {"username": "x", "password": "y"}}
    tokens = [Token(f"tok{i}", iso(e)) for i, e in enumerate(expiries)]
    return {
        "user": user,
        "users": [user],
        "token_pool": {"scope": "project", "min_ttl": 60.0, "tokens": {"u1": tokens}},
    }


@pytest.fixture(autouse=True)
def fresh_pool_state():
    token_pool._next.clear()
    token_pool._replaced.clear()


def test_tokens_are_handed_out_round_robin():
    ctx = pool_context([3600, 3600, 3600])
    client = FakeTokenClient()
    got = [token_pool.next_token(ctx, client) for _ in range(6)]
    assert got == ["tok0", "tok1", "tok2"] * 2
    assert client.issued == 0


def test_a_token_near_expiry_is_replaced_before_use_and_the_replacement_kept():
    ctx = pool_context([3600, 30])  # the second has 30 s left, min_ttl is 60
    client = FakeTokenClient()
    got = [token_pool.next_token(ctx, client) for _ in range(4)]
    assert got == ["tok0", "fresh1", "tok0", "fresh1"]
    assert client.issued == 1 and token_pool.replaced_count() == 1


def test_next_token_without_a_pool_says_what_is_missing():
    with pytest.raises(ValueError, match="add the token_pool context"):
        token_pool.next_token({"user": {"id": "u"}}, FakeTokenClient())


# -- reuse state and names ------------------------------------------------------------------
def test_reuse_state_is_private_and_per_keystone(tmp_path, monkeypatch):
    monkeypatch.setenv("KEYSTONE_BENCH_REUSE_DIR", str(tmp_path / "reuse"))
    state = reuse.load_state("t1", "http://a:5000/v3")
    assert state["users"] == {}
    state["users"]["u1"] = {"name": "n", "password": "pw"}
    path = reuse.save_state(state)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert reuse.load_state("t1", "http://a:5000/v3")["users"]["u1"]["password"] == "pw"
    assert reuse.load_state("t1", "http://b:5000/v3")["users"] == {}


def test_only_the_tag_marker_makes_a_resource_the_tags():
    assert _base.owned_by_tag({"description": _base.reuse_description("a")}, "a")
    assert not _base.owned_by_tag({"description": _base.reuse_description("a-b")}, "a")
    assert not _base.owned_by_tag({"description": "someone else's"}, "a")
    assert not _base.owned_by_tag({}, "a")


def test_cleanup_reads_admin_credentials_from_a_run_dirs_openrc(tmp_path):
    (tmp_path / "openrc").write_text(
        "export OS_AUTH_URL=http://127.0.0.1:5000/v3\nexport OS_USERNAME=admin\n"
        "export OS_PASSWORD=pw\nexport OS_PROJECT_NAME=admin\n"
    )
    cred = cleanup.admin_credential(None, str(tmp_path))
    assert cred["auth_url"] == "http://127.0.0.1:5000/v3" and cred["username"] == "admin"


def test_cleanup_without_credentials_is_bad_input(monkeypatch):
    from rally_keystone_bench.errors import BenchError

    for k in list(os.environ):
        if k.startswith("OS_"):
            monkeypatch.delenv(k)
    with pytest.raises(BenchError, match="OS_AUTH_URL"):
        cleanup.admin_credential(None, None)
    with pytest.raises(BenchError, match="reuse tag"):
        reuse.check_tag("bad tag")


def test_ctrl_c_during_setup_cleans_up_every_context_set_up_so_far():
    from rally_keystone_bench.plugins.contexts.tenants import KeystoneTenants
    from rally_keystone_bench.plugins.contexts.users import KeystoneUsers

    ctx = {"config": {}, "owner_id": "w-interrupt"}
    tenants, users_ctx = KeystoneTenants(ctx), KeystoneUsers(ctx)
    cleaned = []
    tenants.cleanup = lambda: cleaned.append("keystone_tenants")
    users_ctx.cleanup = lambda: cleaned.append("keystone_users")
    tenants.track()
    users_ctx.track()
    users_ctx.cleanup_on_interrupt()
    assert cleaned == ["keystone_users", "keystone_tenants"]
    users_ctx.untrack()
    tenants.untrack()
    assert "w-interrupt" not in _base._set_up


def test_keystone_users_without_keystone_tenants_says_what_to_add():
    from rally import exceptions

    ctx = {"config": {}, "owner_id": "w-alone", "env": {"platforms": {"openstack": {}}}}
    users_ctx = users.KeystoneUsers(ctx)
    with pytest.raises(exceptions.ContextSetupFailure, match="add keystone_tenants"):
        users_ctx.setup()
    assert "users" not in ctx or ctx["users"] == []


@pytest.mark.parametrize(
    "status, stops",
    [("running", False), ("soft_aborting", False), ("aborting", True), ("aborted", True)],
)
def test_setup_stops_on_a_hard_abort_whether_rally_says_aborting_or_aborted(
    monkeypatch, status, stops
):
    # Rally 5 moves a task from running straight to aborted on `rally task
    # abort` while our contexts still set up: both mean stop.
    from rally.common import objects

    monkeypatch.setattr(objects.Task, "get_status", staticmethod(lambda uuid: status))
    watch = _admin.AbortWatch("a-task-uuid")
    assert watch() is stops


@pytest.mark.parametrize("admin", [True, False])
def test_token_pool_issues_the_validators_token_before_the_load(keystone, admin):
    from rally_keystone_bench.clients import pool as client_pool

    def credential(name, project):
        return {"auth_url": keystone.url, "username": name, "password": "pw",
                "project_name": project, "user_domain_name": "Default",
                "project_domain_name": "Default"}  # fmt: skip

    users_ = [
        {"id": f"u{i}", "tenant_id": "p1", "credential": credential(f"user{i}", "demo")}
        for i in range(3)
    ]
    ctx = {"config": {"token_pool": {"tokens_per_user": 2}}, "users": users_}
    if admin:
        ctx["admin"] = {"credential": credential("admin", "admin")}
    pool_ctx = token_pool.TokenPool(ctx)
    pool_ctx.setup()
    validators = ctx["token_pool"]["auth_tokens"]
    # one validator token for the admin, else one per user (each validates its own)
    assert len(validators) == (1 if admin else 3)
    assert keystone.count("POST") == 3 * 2 + len(validators)
    for user in users_:
        cred, auth, scope = client_pool.validator_auth(dict(ctx, user=user), user)
        assert client_pool.auth_token_key(cred, auth, scope) in validators
