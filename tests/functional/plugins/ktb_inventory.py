"""A test-only scenario: write Keystone's inventory to a file, while the contexts' data exists.

Loaded with ``rally --plugin-paths`` by tests/functional/test_data_contexts_live.py,
which compares it with the inventory before and after the task.
"""

from __future__ import annotations

import json

import requests
from rally.task import scenario, validation

KINDS = ("users", "projects", "roles", "groups", "services", "regions", "endpoints")


def inventory(auth_url: str, admin: dict) -> dict[str, list[str]]:
    """Ids of every resource of KINDS, every role assignment, and the revocation events."""
    session = requests.Session()
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {
                        "name": admin["username"],
                        "password": admin["password"],
                        "domain": {"name": admin.get("user_domain_name") or "Default"},
                    }
                },
            },
            "scope": {
                "project": {
                    "name": admin.get("tenant_name") or admin.get("project_name"),
                    "domain": {"name": admin.get("project_domain_name") or "Default"},
                }
            },
        }
    }
    base = auth_url.rstrip("/")
    base = base if base.endswith("/v3") else base + "/v3"
    resp = session.post(base + "/auth/tokens?nocatalog", json=body, timeout=30)
    resp.raise_for_status()
    session.headers["X-Auth-Token"] = resp.headers["X-Subject-Token"]
    out: dict[str, list[str]] = {}
    for kind in KINDS:
        records = session.get(f"{base}/{kind}", timeout=60).json()[kind]
        # a project with its parent: the hierarchy is part of what is compared
        out[kind] = sorted(f"{r['id']}:{r.get('parent_id') or ''}" for r in records)
    assignments = session.get(f"{base}/role_assignments", timeout=60).json()["role_assignments"]
    out["role_assignments"] = sorted(
        json.dumps(
            {**a["scope"], "actor": a.get("user") or a.get("group"), "role": a["role"]["id"]}
        )
        for a in assignments
    )
    memberships = []
    for group in (g.split(":")[0] for g in out["groups"]):
        users = session.get(f"{base}/groups/{group}/users", timeout=60).json()["users"]
        memberships += [f"{group}:{u['id']}" for u in users]
    out["memberships"] = sorted(memberships)
    out["revocation_events"] = [
        json.dumps(e, sort_keys=True)
        for e in session.get(f"{base}/OS-REVOKE/events", timeout=60).json()["events"]
    ]
    return out


@validation.add("required_platform", platform="openstack", admin=True)
@scenario.configure(name="KtbTest.inventory", platform="openstack")
class Inventory(scenario.Scenario):
    def run(self, path: str) -> None:
        platform = self.context["env"]["platforms"]["openstack"]
        admin = dict(platform["admin"])
        auth_url = admin.get("auth_url") or platform["auth_url"]
        with open(path, "w") as out:
            json.dump(inventory(auth_url, admin), out)
