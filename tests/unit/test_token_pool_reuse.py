"""token_pool's reuse: one pool per reuse tag, kept owner-only, used again by the next run.

A capacity search's probes share a keystone_users reuse tag; with it, the
validate probe's token_pool keeps its tokens beside the tag's state, and a
later probe issues only those missing, near expiry, of a user not the tag's,
or that Keystone no longer accepts.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from datetime import datetime, timezone

import jsonschema
import pytest
import yaml
from fake_keystone import FakeKeystone, serving
from rally import api, exceptions

from rally_keystone_bench.clients import pool as client_pool
from rally_keystone_bench.driver import probe_args
from rally_keystone_bench.plugins.contexts import _base, reuse, token_pool
from rally_keystone_bench.shipped import probe_task_path
from rally_keystone_bench.verdicts import capacity

TAG = "capacity-0123456789ab"
USERS, PER_USER = 2, 3


def iso(seconds_from_now: float) -> str:
    return datetime.fromtimestamp(time.time() + seconds_from_now, timezone.utc).isoformat()


@pytest.fixture
def keystone():
    with serving(FakeKeystone()) as server:
        yield server
    client_pool.clear()


@pytest.fixture(autouse=True)
def reuse_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KEYSTONE_BENCH_REUSE_DIR", str(tmp_path / "reuse"))
    return tmp_path / "reuse"


def run_users(url: str, ids=("u0", "u1")) -> list[dict]:
    return [
        {
            "id": uid,
            "tenant_id": "p1",
            "credential": {
                "auth_url": url, "username": f"user-{uid}", "password": f"pw-{uid}",
                "project_name": "rkb-reuse-p00", "user_domain_name": "Default",
                "project_domain_name": "Default",
            },
        }
        for uid in ids
    ]  # fmt: skip


def tag_state(url: str, ids=("u0", "u1")) -> None:
    """The tag's state as keystone_users leaves it: its users' ids and passwords."""
    users = {uid: {"name": f"user-{uid}", "password": f"pw-{uid}"} for uid in ids}
    reuse.save_state({"tag": TAG, "auth_url": url, "users": users})


def set_up(keystone: FakeKeystone, pool_cfg: dict | None = None, users_tag=TAG, ids=("u0", "u1")):
    """One token_pool setup (a probe's), as Rally gives it its config; the context dict."""
    cfg = {"tokens_per_user": PER_USER, **({"reuse": TAG} if users_tag else {}), **(pool_cfg or {})}
    ctx = {
        "config": {
            "token_pool@openstack": cfg,
            _base.USERS: {"users_per_tenant": USERS, **({"reuse": users_tag} if users_tag else {})},
        },
        "users": run_users(keystone.url, ids),
    }
    token_pool.TokenPool(ctx).setup()
    return ctx


def pooled(ctx: dict) -> dict[str, list[str]]:
    return {uid: [t.value for t in ts] for uid, ts in ctx["token_pool"]["tokens"].items()}


def issued(keystone: FakeKeystone) -> int:
    """Token issues Keystone answered: pooled ones, and the validators' (here one per user)."""
    return keystone.count("POST")


# -- the second probe uses the first one's tokens ---------------------------------------
def test_a_second_probe_of_the_tag_issues_no_pooled_token(keystone, reuse_dir, caplog):
    tag_state(keystone.url)
    caplog.set_level(logging.DEBUG)
    first = set_up(keystone)
    validators = len(first["token_pool"]["auth_tokens"])  # one per user: no admin here
    assert issued(keystone) == USERS * PER_USER + validators

    path = reuse.tokens_path(TAG, keystone.url)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    kept = json.loads(path.read_text())["users"]
    assert {uid: [t["value"] for t in e["tokens"]] for uid, e in kept.items()} == pooled(first)

    second = set_up(keystone)
    assert pooled(second) == pooled(first)
    assert issued(keystone) == USERS * PER_USER + 2 * validators  # no pooled token again
    assert keystone.count("HEAD") == USERS  # one kept token checked per user
    assert f"0 issued, {USERS * PER_USER} kept by reuse tag {TAG}" in caplog.text
    # no token value in any log line
    values = [v for vs in pooled(first).values() for v in vs]
    assert values and not any(v in caplog.text for v in values)


def test_only_the_tokens_near_expiry_or_missing_are_issued_again(keystone, reuse_dir):
    tag_state(keystone.url)
    first = pooled(set_up(keystone))
    path = reuse.tokens_path(TAG, keystone.url)
    kept = json.loads(path.read_text())
    kept["users"]["u0"]["tokens"][1]["expires_at"] = iso(300)  # < 60 + 600 s left
    del kept["users"]["u1"]["tokens"][2]  # missing
    path.write_text(json.dumps(kept))
    before = issued(keystone)

    second = pooled(set_up(keystone, {"reuse_min_ttl": 660}))
    assert issued(keystone) - before == 2 + USERS  # the two, and the validators' tokens
    # the kept ones come first, in their order; the new one fills the pool
    assert second["u0"][:2] == [first["u0"][0], first["u0"][2]]
    assert second["u0"][2] not in first["u0"]
    assert second["u1"][:2] == first["u1"][:2] and second["u1"][2] not in first["u1"]
    # saved back: a third probe finds the full pool fit
    third = pooled(set_up(keystone, {"reuse_min_ttl": 660}))
    assert third == second


def test_tokens_of_a_user_not_the_tags_are_not_used(keystone, reuse_dir):
    tag_state(keystone.url, ids=("u0",))  # u1 is not (or no longer) a user of the tag
    set_up(keystone)
    path = reuse.tokens_path(TAG, keystone.url)
    assert set(json.loads(path.read_text())["users"]) == {"u0"}
    # a stored pool naming u1 (say, written by hand) is not trusted for it
    kept = json.loads(path.read_text())
    kept["users"]["u1"] = dict(kept["users"]["u0"])
    path.write_text(json.dumps(kept))
    before = issued(keystone)
    second = set_up(keystone)
    assert issued(keystone) - before == PER_USER + USERS  # u1's three, and the validators'
    assert not set(pooled(second)["u1"]) & set(pooled(second)["u0"])


def test_a_keystone_that_no_longer_accepts_the_kept_tokens_gets_a_fresh_pool(keystone):
    tag_state(keystone.url)
    first = pooled(set_up(keystone))
    keystone.revoked |= keystone.issued  # as after new Fernet keys: every old token refused
    before = issued(keystone)
    second = pooled(set_up(keystone))
    assert issued(keystone) - before == USERS * PER_USER + USERS
    assert not {v for vs in second.values() for v in vs} & {v for vs in first.values() for v in vs}


def test_kept_tokens_are_fit_only_for_the_same_user_project_scope_and_time_left():
    users = [{"id": "u0", "tenant_id": "p1"}, {"id": "u1", "tenant_id": "p1"}]
    entry = {"scope": "project", "project_id": "p1"}
    stored = {
        "users": {
            "u0": {**entry, "tokens": [{"value": "a", "expires_at": iso(3600)},
                                       {"value": "b", "expires_at": iso(30)},
                                       {"value": "c", "expires_at": None},
                                       {"value": "d", "expires_at": iso(3600)}]},
            "u1": {**entry, "project_id": "p2",
                   "tokens": [{"value": "e", "expires_at": iso(3600)}]},
            "u9": {**entry, "tokens": [{"value": "f", "expires_at": iso(3600)}]},
        }
    }  # fmt: skip
    fit = token_pool.kept_tokens(stored, users, {"u0", "u1", "u9"}, "project", 8, 60)
    assert {k: [t.value for t in v] for k, v in fit.items()} == {"u0": ["a", "d"]}
    one = token_pool.kept_tokens(stored, users, {"u0"}, "project", 1, 60)
    assert [t.value for t in one["u0"]] == ["a"]
    assert token_pool.kept_tokens(stored, users, set(), "project", 8, 60) == {}
    assert token_pool.kept_tokens(stored, users, {"u0"}, "system", 8, 60) == {}
    assert token_pool.kept_tokens({"users": {}}, users, {"u0"}, "project", 8, 60) == {}


# -- without a tag, and with a wrong one --------------------------------------------------
def test_without_a_reuse_tag_nothing_is_kept_and_every_token_issued(keystone, reuse_dir):
    tag_state(keystone.url)
    set_up(keystone, users_tag=None)
    set_up(keystone, users_tag=None)
    assert issued(keystone) == 2 * (USERS * PER_USER + USERS)
    assert not reuse.tokens_path(TAG, keystone.url).exists()
    assert keystone.count("HEAD") == 0


def test_a_pool_tag_that_is_not_keystone_users_one_says_what_to_set(keystone):
    with pytest.raises(exceptions.ContextSetupFailure, match="give keystone_users reuse: "):
        set_up(keystone, users_tag="another")
    assert issued(keystone) == 0


def test_revoked_at_cleanup_the_kept_tokens_are_dropped(keystone):
    tag_state(keystone.url)
    ctx = set_up(keystone, {"revoke_at_cleanup": True})
    token_pool.TokenPool(ctx).cleanup()
    assert keystone.count("DELETE") == USERS * PER_USER
    assert json.loads(reuse.tokens_path(TAG, keystone.url).read_text())["users"] == {}


# -- the state's files go together -------------------------------------------------------
def test_forget_deletes_the_state_and_the_kept_tokens(tmp_path, monkeypatch):
    url = "http://127.0.0.1:5000/v3"
    reuse.save_state({"tag": TAG, "auth_url": url, "users": {"u0": {"password": "pw"}}})
    reuse.save_tokens({"tag": TAG, "auth_url": url, "users": {"u0": {"tokens": []}}})
    assert len(reuse.forget(TAG, url)) == 2
    assert not reuse.state_path(TAG, url).exists() and reuse.load_tokens(TAG, url)["users"] == {}
    assert reuse.forget(TAG, url) == []
    # a Rally home's files: its environment names where they are
    monkeypatch.delenv("KEYSTONE_BENCH_REUSE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    home = {"HOME": str(tmp_path / "rally-home")}
    monkeypatch.setenv("HOME", home["HOME"])
    written = reuse.save_tokens({"tag": TAG, "auth_url": url, "users": {}})
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    assert written.is_relative_to(tmp_path / "rally-home" / ".cache")
    assert reuse.forget(TAG, url, home) == [written] and not written.exists()


def test_keystone_bench_cleanup_deletes_the_kept_tokens_with_the_state(monkeypatch, capsys):
    from types import SimpleNamespace

    from rally_keystone_bench.verbs import cleanup

    url = "http://127.0.0.1:5000/v3"
    reuse.save_state({"tag": TAG, "auth_url": url, "users": {}})
    reuse.save_tokens({"tag": TAG, "auth_url": url, "users": {}})
    monkeypatch.setattr(cleanup, "admin_credential", lambda spec, run_dir: {"auth_url": url})
    admin = SimpleNamespace(stats=SimpleNamespace(total=0))
    monkeypatch.setattr(cleanup, "AdminClient", lambda cred: admin)
    monkeypatch.setattr(reuse, "delete_tag", lambda admin, tag: (1, 4))
    args = SimpleNamespace(reuse=TAG, workload=None, load=None, spec=None, run_dir=None)
    assert cleanup.main(args) == 0
    assert f"reuse tag {TAG}: deleted 1 projects and 4 users" in capsys.readouterr().out
    assert not reuse.state_path(TAG, url).exists() and not reuse.tokens_path(TAG, url).exists()


# -- the probe task ----------------------------------------------------------------------
SEARCH = capacity.Settings(
    scenario="validate", low=1, high=40, warmup=10, window=30, max_slope=0.01, precision=1
)


def pool_config(args: dict) -> dict:
    """The probe task's token_pool config as Rally renders it (its missing-argument check too)."""
    path = probe_task_path()
    text = api._Task(None).render_template(path.read_text(), str(path.parent), **args)
    (sub,) = yaml.safe_load(text)["subtasks"]
    cfg = sub["contexts"]["token_pool"]
    jsonschema.validate(cfg, token_pool.TokenPool.CONFIG_SCHEMA)
    return cfg


def test_the_probe_task_keeps_the_pool_with_the_searchs_tag_past_the_probes_end():
    cfg = pool_config(probe_args.task_args(SEARCH, 40, TAG))
    assert cfg == {"tokens_per_user": 8, "reuse": TAG, "reuse_min_ttl": 60 + 10 + 30}
    ramp = probe_args.ramp_task_args(SEARCH, [1, 9, 17], TAG)
    cfg = pool_config(ramp)
    assert cfg["reuse"] == TAG
    assert cfg["reuse_min_ttl"] == pytest.approx(60 + sum(s for _, s in ramp["ramp"]))


def test_the_probe_task_keeps_no_pool_without_a_tag_or_with_a_directorys_users():
    assert pool_config(probe_args.task_args(SEARCH, 40)) == {"tokens_per_user": 8}
    ldap = {**probe_args.task_args(SEARCH, 40, TAG), "ldap_domain": "LDAP"}
    assert pool_config(ldap) == {"tokens_per_user": 8}


@pytest.mark.parametrize("ends", ["with N", "on an error"])
def test_a_search_on_a_local_keystone_deletes_its_tags_passwords_and_tokens(
    tmp_path, monkeypatch, ends
):
    import argparse
    import contextlib
    from types import SimpleNamespace

    from rally_keystone_bench.driver import targets
    from rally_keystone_bench.errors import BenchError
    from rally_keystone_bench.verbs import capacity as capacity_verb

    url = "http://127.0.0.1:5000/v3"
    # the probes' Rally runs with its home as HOME: the files are below it
    rally_env = {"HOME": str(tmp_path / "rally-home")}
    monkeypatch.delenv("KEYSTONE_BENCH_REUSE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", rally_env["HOME"])
    files = [
        reuse.save_state({"tag": TAG, "auth_url": url, "users": {"u0": {"password": "pw"}}}),
        reuse.save_tokens({"tag": TAG, "auth_url": url, "users": {}}),
    ]
    monkeypatch.setenv("HOME", str(tmp_path / "me"))

    @contextlib.contextmanager
    def prepared_env(run_dir, **kw):
        home = SimpleNamespace(environ=lambda: dict(rally_env))
        yield SimpleNamespace(home=home, name="e", auth_url=url, keystone_dir=None)

    def find_capacity(settings, prober, **kw):
        assert prober.reuse == TAG and all(f.exists() for f in files)  # kept between probes
        if ends == "on an error":
            raise BenchError("probe 3 ran no iteration")
        return "outcome"

    monkeypatch.setattr(targets, "prepared_env", prepared_env)
    monkeypatch.setattr(capacity_verb, "users_tag", lambda args, ldap: TAG)
    monkeypatch.setattr(capacity_verb.capacity_search, "find_capacity", find_capacity)
    search = (SEARCH, tmp_path, tmp_path, argparse.Namespace(target="local"), [], None)
    with pytest.raises(BenchError) if ends == "on an error" else contextlib.nullcontext():
        assert capacity_verb._search_rally(*search)[0] == "outcome"
    assert not any(f.exists() for f in files)
