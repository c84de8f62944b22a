"""keystone_users: users in keystone_tenants' projects, or the env's existing users.

Sets context["users"] and context["tenants"] in the shape of rally-openstack's
stock `users` context, so that stock scenarios run with it too. That stock
context is a default of every OpenStack scenario and runs first (order 100):
whatever it put in the context is set aside during the run and put back at
cleanup, so that it deletes its own users and never ours. The KeystoneTokens
scenarios have keystone_bench_default_users as their default instead
(plugins/contexts/default_users.py): the stock context where the workload
names no users context, nothing where it names keystone_users.

Three ways to fill it, one module each: the env's existing users (here),
a directory's users placed in our projects (directory_users.py), users we
create or reuse under a tag (created_users.py).
"""

from __future__ import annotations

import copy
from typing import Any

from rally import consts, exceptions
from rally.common import logging, validation
from rally.task import context
from rally_openstack.common import credential as os_credential

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.clients.auth import UserAuth
from rally_keystone_bench.clients.credentials import verify_of
from rally_keystone_bench.clients.retry import RetryStats
from rally_keystone_bench.clients.tokens import TokenClient, TokenRequestError
from rally_keystone_bench.plugins.contexts import _base, reuse
from rally_keystone_bench.plugins.contexts.created_users import CreatedUsers
from rally_keystone_bench.plugins.contexts.directory_users import (
    DirectoryUsers,
    directory_users_path,
)

LOG = logging.getLogger(__name__)

_STOCK_KEYS = ("users", "tenants", "user_choice_method")


@validation.add("required_platform", platform="openstack", users=True)
@validation.configure(name="keystone_bench_users_config", platform="openstack")
class UsersConfigValidator(validation.Validator):
    """existing: true needs users in the env, and no creation options beside it.

    With ``domain`` the users come from the env's directory users of that
    domain instead, and are placed in keystone_tenants' projects.
    """

    def validate(self, context, config, plugin_cls, plugin_cfg):
        cfg = plugin_cfg or {}
        if cfg.get("domain") and not cfg.get("existing"):
            self.fail("keystone_users: domain names a directory's domain: it needs existing: true")
        if not cfg.get("existing"):
            return
        if cfg.get("domain"):
            extra = sorted(set(cfg) & {"user_domain", "reuse"})
            if extra:
                self.fail(
                    f"keystone_users: existing: true with a domain uses that domain's users; "
                    f"remove {', '.join(extra)}"
                )
            env = (context or {}).get("env", {})
            if not directory_users_path(env):
                self.fail(
                    f"keystone_users: existing: true with domain {cfg['domain']!r} but the env "
                    "names no directory users (keystone-bench --identity ldap names them; "
                    "elsewhere put !extras: {keystone_bench: {directory_users: FILE}} "
                    "in the env spec)"
                )
            return
        extra = sorted(set(cfg) & {"users_per_tenant", "roles", "user_domain", "reuse"})
        if extra:
            self.fail(
                f"keystone_users: existing: true uses the env's users and creates none; "
                f"remove {', '.join(extra)}"
            )
        platforms = (context or {}).get("env", {}).get("platforms") or (context or {}).get(
            "platforms", {}
        )
        if not (platforms.get("openstack") or {}).get("users"):
            self.fail(
                "keystone_users: existing: true but the env lists no users "
                "(add them under 'users' in the env spec, or drop existing)"
            )


@validation.add("keystone_bench_users_config")
@context.configure(name="keystone_users", platform="openstack", order=111)
class KeystoneUsers(CreatedUsers, DirectoryUsers, _base.BenchContext):
    """Creates `users_per_tenant` users in each keystone_tenants project, with roles.

    `existing: true` uses the users of the Rally env instead (production or
    LDAP identity backends); with `domain: NAME` beside it, the users of that
    domain listed in the env's directory users file (an LDAP domain: Keystone
    cannot create them), put `users_per_tenant` to a keystone_tenants project
    with `roles` granted, and the grants revoked at cleanup. `reuse: TAG`
    keeps the projects and users at the end and reuses them on the next run
    with the same tag.
    """

    CONFIG_SCHEMA = {
        "type": "object",
        "$schema": consts.JSON_SCHEMA,
        "properties": {
            "users_per_tenant": {
                "type": "integer",
                "minimum": 1,
                "description": "Users created in each project (default 1).",
            },
            "roles": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 1,
                "uniqueItems": True,
                "description": "Roles granted on their project (default [member]).",
            },
            "user_domain": {
                "type": "string",
                "minLength": 1,
                "description": "Domain name or id of the users (default: the projects').",
            },
            "existing": {
                "type": "boolean",
                "description": "Use the env's users instead of creating any.",
            },
            "domain": {
                "type": "string",
                "minLength": 1,
                "description": "With existing: true, the directory domain whose users "
                "(from the env's directory users file) go into keystone_tenants' projects.",
            },
            "reuse": {
                "type": "string",
                "pattern": reuse.TAG_PATTERN,
                "description": "Keep projects and users under this tag and reuse them.",
            },
            "user_choice_method": {
                "enum": ["random", "round_robin"],
                "description": "How iterations pick their user (default random).",
            },
            "resource_management_workers": _base.WORKERS_SCHEMA,
        },
        "additionalProperties": False,
    }

    DEFAULT_CONFIG = {
        "users_per_tenant": 1,
        "roles": ["member"],
        "existing": False,
        "user_choice_method": "random",
        "resource_management_workers": _admin.DEFAULT_WORKERS,
    }

    def __init__(self, ctx: dict[str, Any]) -> None:
        super().__init__(ctx)
        self.created: list[dict] = []  # {"id", "name"}
        self.uncertain: list[str] = []
        self.kept = False
        self.state: dict[str, Any] | None = None  # reuse state file contents
        self.domain_id: str | None = None
        self.stats = RetryStats()
        self.admin: _admin.AdminClient | None = None
        self._set_aside: dict[str, Any] | None = None
        self.granted: list[tuple[str, str, str]] = []  # (project id, user id, role id)

    # -- setup ------------------------------------------------------------------
    def setup(self) -> None:
        self._set_aside = {k: self.context[k] for k in _STOCK_KEYS if k in self.context}
        self.context["users"] = []
        self.context["tenants"] = {}
        self.context["user_choice_method"] = self.config["user_choice_method"]
        self.track()
        try:
            if self.config["existing"] and self.config.get("domain"):
                self._use_directory()
            elif self.config["existing"]:
                self._use_existing()
            else:
                self._create()
        except BaseException as exc:
            if not isinstance(exc, Exception):
                self.cleanup_on_interrupt()
            raise
        finally:
            if not self.config["existing"] or self.config.get("domain"):
                self.report_retries("setup", self.stats)

    def _fail(self, msg: str) -> exceptions.ContextSetupFailure:
        return exceptions.ContextSetupFailure(ctx_name=self.get_name(), msg=msg)

    def _use_existing(self) -> None:
        platform = self.env.get("platforms", {}).get("openstack", {})
        env_users = platform.get("users") or []
        if not env_users:
            raise self._fail("existing: true but the env lists no users")
        api_info = platform.get("api_info", {})
        workers = self.config["resource_management_workers"]

        def resolve(raw: dict) -> dict:
            cred = copy.deepcopy(raw)
            info = copy.deepcopy(api_info)
            info.update(cred.pop("api_info", {}) or {})
            cred["api_info"] = info
            cred = os_credential.OpenStackCredential(**cred)
            user_id, project_id = _whoami(cred)
            return {"id": user_id, "credential": cred, "tenant_id": project_id}

        users, errors, _ = _admin.run_parallel(resolve, env_users, workers)
        if errors:
            raise self._fail(f"an env user cannot authenticate: {_base.describe_errors(errors)}")
        order = {u["username"]: i for i, u in enumerate(env_users)}
        users.sort(key=lambda u: order.get(u["credential"]["username"], 0))
        self._publish(users)
        LOG.info(f"keystone_users: using the env's {len(users)} existing users")

    def _tenants_bench(self, missing: str) -> dict:
        """The bench state with keystone_tenants' projects, or a failure saying MISSING."""
        bench = self.bench()
        if "projects" not in bench:
            raise self._fail(missing)
        return bench

    def _admin_and_roles(self) -> tuple[Any, Any, dict]:
        """The admin client (kept for cleanup), its credential and the ids of the roles to grant."""
        self.admin = admin = self.make_admin(self.config["resource_management_workers"], self.stats)
        try:
            role_ids = admin.role_ids(self.config["roles"])
        except ValueError as exc:
            raise self._fail(f"roles: {exc}") from None
        return admin, self.admin_credential(), role_ids

    def _publish(self, users: list[dict], project_names: dict[str, str] | None = None) -> None:
        """context["users"] and context["tenants"], as the stock users context sets them."""
        tenants: dict[str, dict] = {}
        for u in users:
            tid = u["tenant_id"]
            if tid not in tenants:
                name = (project_names or {}).get(tid) or u["credential"]["tenant_name"]
                tenants[tid] = {"id": tid, "name": name, "users": []}
            tenants[tid]["users"].append(u)
        self.context["users"] = users
        self.context["tenants"] = tenants

    # -- cleanup ----------------------------------------------------------------
    def cleanup(self) -> None:
        self.untrack()
        try:
            self._cleanup()
        finally:
            self._restore()

    def _restore(self) -> None:
        if self._set_aside is None:
            return
        for key in _STOCK_KEYS:
            if key in self._set_aside:
                self.context[key] = self._set_aside[key]
            else:
                self.context.pop(key, None)
        self._set_aside = None

    def _cleanup(self) -> None:
        if self.config.get("domain"):
            self._revoke_granted()
            return
        if self.kept:
            if self.state is not None:
                reuse.save_state(self.state)
            if self.created:
                LOG.info(f"keystone_users: keeping {len(self.created)} new users for the tag")
            self.created, self.uncertain = [], []
            return
        self.delete_created("users")


def _whoami(cred: Any) -> tuple[str, str]:
    """(user id, project id) of a credential, from one project-scoped token."""
    client = TokenClient(cred["auth_url"], verify=verify_of(cred))
    try:
        result = client.issue(UserAuth.from_credential(cred), include_catalog=False)
    except TokenRequestError as exc:  # its message is scrubbed of the password
        raise RuntimeError(f"user {cred['username']}: {exc}") from None
    return result.user_id, result.project_id
