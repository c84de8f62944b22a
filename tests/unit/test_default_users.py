"""keystone_bench_default_users: the stock users context only where no users context is named."""

from __future__ import annotations

from rally.common import opts
from rally.task import context as rally_context

from rally_keystone_bench.plugins.scenarios import paired, token_paths, tokens

# The [openstack] options rally-openstack's users context reads at import, as a rally
# process registers them before it loads plugins.
opts.register()
opts.register_options_from_path("rally_openstack.common.cfg.opts:list_opts")

from rally_openstack.task.contexts.keystone import users as stock  # noqa: E402

from rally_keystone_bench.plugins.contexts import default_users as users  # noqa: E402

ADMIN = {
    "auth_url": "http://127.0.0.1:1/v3",
    "username": "admin",
    "password": "never-sent",
    "tenant_name": "admin",
    "user_domain_name": "Default",
    "project_domain_name": "Default",
}


def ctx(config: dict, env_users: list | None = None) -> dict:
    return {
        "task": {"uuid": "4a88fea2-0000-0000-0000-000000000000"},
        "owner_id": "4a88fea2-0000-0000-0000-000000000001",
        "config": config,
        "env": {"platforms": {"openstack": {"admin": ADMIN, "users": env_users or []}}},
    }


def test_our_scenarios_default_to_the_stand_in_and_stock_ones_keep_theirs():
    for cls in (tokens.Authenticate, tokens.Validate, tokens.ConcurrentCreate,
                tokens.Lifecycle, token_paths.IssuePath, token_paths.ValidatePath,
                paired.Paired):  # fmt: skip
        assert cls.get_default_context() == {users.DEFAULT_USERS: {}}, cls
    from rally_openstack.task.scenarios.keystone import basic

    assert "users@openstack" in basic.CreateUser.get_default_context()
    found = rally_context.Context.get(users.DEFAULT_USERS, allow_hidden=True)
    assert found is users.DefaultUsers and found.get_order() == stock.UserGenerator.get_order()


def test_beside_keystone_users_it_does_nothing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the stock users context was asked to create or delete")

    monkeypatch.setattr(stock.UserGenerator, "create_users", refuse)
    monkeypatch.setattr(stock.UserGenerator, "cleanup", refuse)
    for named in ("keystone_users@openstack", "users@openstack"):
        c = ctx({named: {}, users.DEFAULT_USERS: {}})
        default = users.DefaultUsers(c)
        assert default.skipped
        default.setup()
        default.cleanup()
        assert "users" not in c and "tenants" not in c and "admin" not in c


def test_with_no_users_context_it_is_the_stock_one(monkeypatch):
    made = []
    monkeypatch.setattr(stock.UserGenerator, "create_users", lambda self: made.append(self))
    c = ctx({"keystone_tenants@openstack": {}, users.DEFAULT_USERS: {}})
    default = users.DefaultUsers(c)
    assert not default.skipped and isinstance(default.stock, stock.UserGenerator)
    assert c["admin"]["credential"]["username"] == "admin"  # as the stock context sets it
    assert default.stock.config["tenants"] == stock.UserGenerator.DEFAULT_FOR_NEW_USERS["tenants"]
    default.setup()
    assert made == [default.stock]
    # the env's own users, as the stock context uses them when the env lists some
    env_user = {**ADMIN, "username": "someone"}
    c = ctx({users.DEFAULT_USERS: {}}, env_users=[env_user])
    default = users.DefaultUsers(c)
    assert not default.skipped and default.stock.existing_users == [env_user]
