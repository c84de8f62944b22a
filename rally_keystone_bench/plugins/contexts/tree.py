"""keystone_project_tree: keystone_tenants' projects at the bottom of a hierarchy."""

from __future__ import annotations

from typing import Any

from rally import consts
from rally.task import context

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.plugins.contexts import _base, _sized

PARENT_KEY = "parent_project_id"  # in context["keystone_bench"], read by keystone_tenants


@context.configure(name="keystone_project_tree", platform="openstack", order=105)
class KeystoneProjectTree(_sized.SizedContext):
    """Puts keystone_tenants' projects at `depth` below their domain.

    It creates a chain of `depth` - 1 projects (root first, named with the
    run's prefix) before keystone_tenants, whose projects are then made
    children of its last one: every token scoped to a user's project is
    at that depth, and Keystone walks the parents to check they are enabled
    and to collect inherited roles. Cleanup deletes the chain leaf first,
    after keystone_tenants has deleted its projects. Not with keystone_users'
    `reuse` (reused projects keep the parent they were made with).
    """

    CONFIG_SCHEMA = {
        "type": "object",
        "$schema": consts.JSON_SCHEMA,
        "properties": {
            "depth": {
                "type": "integer",
                "minimum": 1,
                "maximum": 10,
                "description": "Depth of the users' projects; 1 is a project right in its "
                "domain, as without this context (Keystone's [DEFAULT] max_project_tree_depth "
                "is 5 unless set).",
            },
            "domain": {
                "type": "string",
                "minLength": 1,
                "description": "Domain name or id (default: the admin's, as keystone_tenants).",
            },
            "resource_management_workers": _base.WORKERS_SCHEMA,
        },
        "additionalProperties": False,
    }

    DEFAULT_CONFIG = {"depth": 1, "resource_management_workers": _admin.DEFAULT_WORKERS}

    def build(self) -> dict[str, Any]:
        assert self.admin is not None
        if self.config.get("domain"):
            domain = self.admin.resolve_domain(self.config["domain"])
        else:
            domain = self.admin.admin_project_domain_id()
        parent = None
        for level in range(1, self.config["depth"]):
            name = f"{self.run_prefix()}tree{level:02d}"
            body = {"name": name, "domain_id": domain, "description": "rally-keystone-bench tree"}
            if parent:
                body["parent_id"] = parent
            parent = self.new("projects", body, name)["id"]
        if parent:
            self.bench()[PARENT_KEY] = parent
        return {"depth": self.config["depth"], "projects": self.config["depth"] - 1}
