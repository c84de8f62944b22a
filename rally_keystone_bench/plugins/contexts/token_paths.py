"""Contexts for the token paths beyond a password: TOTP credentials and trusts.

keystone_totp enrols one TOTP credential per user (through the admin API:
POST /v3/credentials); keystone_trusts makes, for each user, a trust from
the next user of the same project (the trustor) to it (the trustee), with
the trustor's own token. Both remove exactly what they made at cleanup, and
fail the cleanup naming what they could not remove.

    context["keystone_totp"]   = {user id: {"credential_id": ..., "secret": ...}}
    context["keystone_trusts"] = {trustee user id: trust id}
"""

from __future__ import annotations

from typing import Any

from rally import consts, exceptions
from rally.common import logging
from rally.task import context

from rally_keystone_bench.clients import auth_paths
from rally_keystone_bench.clients.admin import run_parallel
from rally_keystone_bench.clients.retry import RetryStats
from rally_keystone_bench.clients.tokens import TokenClient, UserAuth
from rally_keystone_bench.plugins.contexts import _base

LOG = logging.getLogger(__name__)

_SCHEMA = {
    "type": "object",
    "$schema": consts.JSON_SCHEMA,
    "properties": {"resource_management_workers": _base.WORKERS_SCHEMA},
    "additionalProperties": False,
}


@context.configure(name="keystone_totp", platform="openstack", order=113)
class KeystoneTotp(_base.BenchContext):
    """Enrols a TOTP credential for every user; the scenarios compute its passcodes."""

    CONFIG_SCHEMA = _SCHEMA
    DEFAULT_CONFIG = {"resource_management_workers": 4}

    def setup(self) -> None:
        self.made: dict[str, dict[str, str]] = {}
        self.context["keystone_totp"] = self.made
        self.track()
        workers = self.config["resource_management_workers"]
        self.admin = self.make_admin(workers, RetryStats())

        def enrol(user: dict) -> None:
            credential_id, secret = auth_paths.enrol_totp(self.admin, user["id"])
            self.made[user["id"]] = {"credential_id": credential_id, "secret": secret}

        users = self.context.get("users") or []
        self.make_each(enrol, users, workers)
        LOG.info(f"keystone_totp: enrolled {len(self.made)} TOTP credentials")

    def cleanup(self) -> None:
        made = getattr(self, "made", {})
        if not made:
            self.untrack()
            return
        workers = self.config["resource_management_workers"]

        def remove(user_id: str) -> None:
            if auth_paths.remove_totp(self.admin, made[user_id]["credential_id"]):
                made.pop(user_id)

        run_parallel(remove, list(made), workers, fail_fast=False)
        self.untrack()
        if made:
            left = ", ".join(m["credential_id"] for m in made.values())
            raise exceptions.RallyException(f"keystone_totp cleanup: credentials left: {left}")
        LOG.info("keystone_totp: removed every TOTP credential")


@context.configure(name="keystone_trusts", platform="openstack", order=114)
class KeystoneTrusts(_base.BenchContext):
    """A trust to every user from the next user of its project (two users per project at least)."""

    CONFIG_SCHEMA = _SCHEMA
    DEFAULT_CONFIG = {"resource_management_workers": 4}

    def setup(self) -> None:
        self.made: dict[str, tuple[str, Any]] = {}  # trustee id -> (trust id, trustor cred)
        self.context["keystone_trusts"] = {}
        self.track()
        pairs = trust_pairs(self.context.get("users") or [])
        self.client = TokenClient(pairs[0][0]["credential"]["auth_url"]) if pairs else None

        def create(pair: tuple[dict, dict]) -> None:
            trustor, trustee = pair
            auth = UserAuth.from_credential(trustor["credential"])
            assert self.client is not None
            trust_id = auth_paths.create_trust(self.client, auth, trustee["id"])
            self.made[trustee["id"]] = (trust_id, trustor["credential"])
            self.context["keystone_trusts"][trustee["id"]] = trust_id

        workers = self.config["resource_management_workers"]
        self.make_each(create, pairs, workers)
        LOG.info(f"keystone_trusts: created {len(self.made)} trusts")

    def cleanup(self) -> None:
        made = getattr(self, "made", {})
        if not made:
            self.untrack()
            return

        def delete(trustee_id: str) -> None:
            trust_id, trustor = made[trustee_id]
            auth = UserAuth.from_credential(trustor)
            if auth_paths.delete_trust(self.client, auth, trust_id):
                made.pop(trustee_id)

        run_parallel(
            delete, list(made), self.config["resource_management_workers"], fail_fast=False
        )
        self.untrack()
        if made:
            left = ", ".join(trust for trust, _ in made.values())
            raise exceptions.RallyException(f"keystone_trusts cleanup: trusts left: {left}")
        LOG.info("keystone_trusts: deleted every trust")


def trust_pairs(users: list[dict]) -> list[tuple[dict, dict]]:
    """(trustor, trustee) for every user: the trustor is the next user of the same project."""
    by_project: dict[str, list[dict]] = {}
    for user in users:
        by_project.setdefault(user["tenant_id"], []).append(user)
    pairs = []
    for project, members in by_project.items():
        if len(members) < 2:
            raise exceptions.ContextSetupFailure(
                ctx_name="keystone_trusts",
                msg=f"project {project} has one user: a trust needs two (users_per_tenant >= 2)",
            )
        pairs += [(members[(i + 1) % len(members)], u) for i, u in enumerate(members)]
    return pairs


@context.configure(name="keystone_scope_roles", platform="openstack", order=112)
class KeystoneScopeRoles(_base.BenchContext):
    """Grants every user a role on its own domain and on the system, for domain and
    system scoped tokens; revokes exactly those grants at cleanup."""

    CONFIG_SCHEMA = {
        "type": "object",
        "$schema": consts.JSON_SCHEMA,
        "properties": {
            "role": {"type": "string", "minLength": 1, "description": "default: reader"},
            "resource_management_workers": _base.WORKERS_SCHEMA,
        },
        "additionalProperties": False,
    }
    DEFAULT_CONFIG = {"role": "reader", "resource_management_workers": 4}

    def setup(self) -> None:
        self.granted: list[str] = []  # paths under /v3 of each grant
        self.track()
        workers = self.config["resource_management_workers"]
        self.admin = self.make_admin(workers, RetryStats())
        role = self.admin.role_ids([self.config["role"]])[self.config["role"]]
        domains: dict[str, str] = {}
        grants = []
        for user in self.context.get("users") or []:
            name = user["credential"].get("user_domain_name") or "Default"
            if name not in domains:
                domains[name] = self.admin.resolve_domain(name)
            grants.append(f"/domains/{domains[name]}/users/{user['id']}/roles/{role}")
            grants.append(f"/system/users/{user['id']}/roles/{role}")

        def grant(path: str) -> None:
            self.admin.request("PUT", path, f"grant {path}")
            self.granted.append(path)

        self.make_each(grant, grants, workers)
        LOG.info(f"keystone_scope_roles: {len(self.granted)} grants")

    def cleanup(self) -> None:
        granted = list(getattr(self, "granted", []))

        def revoke(path: str) -> None:
            self.admin.request("DELETE", path, f"revoke {path}")
            self.granted.remove(path)

        run_parallel(revoke, granted, self.config["resource_management_workers"], fail_fast=False)
        self.untrack()
        if self.granted:
            raise exceptions.RallyException(
                f"keystone_scope_roles cleanup: grants left: {', '.join(self.granted)}"
            )
