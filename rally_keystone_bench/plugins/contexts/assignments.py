"""keystone_roles and keystone_groups: role assignments and group memberships per user."""

from __future__ import annotations

from typing import Any

from rally import consts
from rally.task import context

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.clients.retry import KeystoneAdminError
from rally_keystone_bench.plugins.contexts import _base, _sized


def _schema(sizes: dict[str, str]) -> dict[str, Any]:
    props: dict[str, Any] = {k: {**_sized.SIZE_SCHEMA, "description": d} for k, d in sizes.items()}
    props["resource_management_workers"] = _base.WORKERS_SCHEMA
    return {
        "type": "object",
        "$schema": consts.JSON_SCHEMA,
        "properties": props,
        "additionalProperties": False,
    }


class _Assigning(_sized.SizedContext):
    def make_roles(self, count: int, stem: str) -> list[str]:
        """COUNT new roles named with the run's prefix; their ids."""
        names = [f"{self.run_prefix()}{stem}{i:03d}" for i in range(count)]
        records = self.parallel(lambda n: self.new("roles", {"name": n}, n), names, "create roles")
        return [r["id"] for r in records]

    def put(self, paths: list[str], what: str) -> None:
        """PUT each path (a grant or a membership), in parallel."""
        assert self.admin is not None
        admin = self.admin

        def one(path: str) -> None:
            status, _ = admin.request("PUT", path, f"{what} {path}")
            if status == 404:
                raise KeystoneAdminError(f"{what} {path}", 404, "not found")

        self.parallel(one, paths, what)


@context.configure(name="keystone_roles", platform="openstack", order=112)
class KeystoneRoles(_Assigning):
    """Grants each user `roles_per_user` more roles, directly, on its project.

    The roles are new (named with the run's prefix) and deleted at cleanup,
    which deletes their assignments with them.
    """

    CONFIG_SCHEMA = _schema({"roles_per_user": "Direct role assignments added per user."})
    DEFAULT_CONFIG = {"roles_per_user": 0, "resource_management_workers": _admin.DEFAULT_WORKERS}

    def build(self) -> dict[str, Any]:
        users = self.users()
        roles = self.make_roles(self.config["roles_per_user"], "role")
        paths = [
            f"/projects/{u['tenant_id']}/users/{u['id']}/roles/{r}" for u in users for r in roles
        ]
        self.put(paths, "grant")
        return {"roles_per_user": len(roles), "users": len(users), "assignments": len(paths)}


@context.configure(name="keystone_groups", platform="openstack", order=113)
class KeystoneGroups(_Assigning):
    """Puts each user in `groups_per_user` new groups; each group holds
    `roles_per_group` new roles on every user's project (assignments through groups).

    Cleanup deletes the groups and roles, and with them the memberships and
    assignments; Keystone writes a revocation event per member of a deleted
    group, as it does for any group deletion.
    """

    CONFIG_SCHEMA = _schema(
        {
            "groups_per_user": "Group memberships per user.",
            "roles_per_group": "Roles each group holds on the users' projects.",
        }
    )
    DEFAULT_CONFIG = {
        "groups_per_user": 0,
        "roles_per_group": 0,
        "resource_management_workers": _admin.DEFAULT_WORKERS,
    }

    def build(self) -> dict[str, Any]:
        users = self.users()
        domain = self.bench().get("domain_id") or "default"
        names = [f"{self.run_prefix()}group{i:03d}" for i in range(self.config["groups_per_user"])]
        groups = self.parallel(
            lambda n: self.new("groups", {"name": n, "domain_id": domain}, n),
            names,
            "create groups",
        )
        group_ids = [g["id"] for g in groups]
        roles = self.make_roles(self.config["roles_per_group"] if group_ids else 0, "grole")
        projects = sorted({u["tenant_id"] for u in users})
        self.put([f"/groups/{g}/users/{u['id']}" for g in group_ids for u in users], "add to group")
        grants = [
            f"/projects/{p}/groups/{g}/roles/{r}"
            for p in projects
            for g in group_ids
            for r in roles
        ]
        self.put(grants, "grant")
        return {
            "groups_per_user": len(group_ids),
            "roles_per_group": len(roles),
            "users": len(users),
            "group_assignments": len(grants),
        }
