"""keystone_users' own users: created in keystone_tenants' projects, or reused under a tag.

The methods of :class:`CreatedUsers` are KeystoneUsers' (plugins/contexts/users.py)
when it creates users (no ``existing``): plan each user (create, reuse, or
reset the password of a tag's user this machine does not know), make them in
parallel with their roles, check that reused users still hold their roles
and still authenticate, and publish them in plan order.
"""

from __future__ import annotations

import secrets
from typing import Any

from rally.common import logging

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.plugins.contexts import _base, reuse

# keystone_users' lines keep its logger name, whichever of its modules says them
LOG = logging.getLogger("rally_keystone_bench.plugins.contexts.users")


class CreatedUsers:
    """KeystoneUsers' creating side (a mixin: the state is the context's)."""

    def _create(self) -> None:
        bench = self._tenants_bench(
            "keystone_users creates its users in keystone_tenants' projects: "
            "add keystone_tenants to the contexts (or use existing: true)"
        )
        projects = bench["projects"]
        admin, admin_cred, role_ids = self._admin_and_roles()
        workers = self.config["resource_management_workers"]
        project_domain = bench["domain_id"]
        if self.config.get("user_domain"):
            self.domain_id = admin.resolve_domain(self.config["user_domain"])
        else:
            self.domain_id = project_domain
        domain_names = {d: admin.domain_name(d) for d in {project_domain, self.domain_id}}

        tag = self.config.get("reuse")
        found: dict[str, dict] = {}
        if tag:
            self.kept = True
            self.state = reuse.load_state(tag, admin_cred["auth_url"])
            found = self._tagged_users(admin, projects)
            description = _base.reuse_description(tag)
        else:
            description = f"rally-keystone-bench task {self.task_uuid()}"
        known = self.state["users"] if self.state else {}
        plan = self._plan(projects, found, known, tag)
        domains = (domain_names[project_domain], domain_names[self.domain_id])

        def grant_all(user_id: str, name: str, project: dict, have=frozenset()) -> None:
            for role, role_id in role_ids.items():
                if (user_id, role_id) not in have:
                    admin.grant(
                        project["id"],
                        user_id,
                        role_id,
                        f"grant role {role} to user {name} on project {project['name']}",
                    )

        def do(step: tuple[str, dict, str]) -> dict:
            name, project, action = step
            if action == "reuse":
                user_id = found[name]["id"]
                password = known[user_id]["password"]
            else:
                password = secrets.token_urlsafe(18)
                if action == "create":
                    user_id = self._new_user(admin, name, password, project, description)
                else:  # reset: a tag's user whose password this machine does not know
                    user_id = found[name]["id"]
                    admin.set_password(user_id, password)
                if self.state is not None:
                    self.state["users"][user_id] = {"name": name, "password": password}
                grant_all(user_id, name, project)
            return {
                "id": user_id,
                "credential": _base.user_credential(admin_cred, name, password, project, domains),
                "tenant_id": project["id"],
                "action": action,
                "_password": password,
            }

        try:
            users, errors, aborted = _admin.run_parallel(do, plan, workers, self.abort_watch())
            if not errors and not aborted and any(u["action"] == "reuse" for u in users):
                self._check_reused(users, role_ids, grant_all)
        finally:
            if self.state is not None:
                self.state["domain_id"] = self.domain_id
                reuse.save_state(self.state)
        self._publish_created(users, errors, aborted, plan, projects, role_ids)

    def _tagged_users(self, admin: Any, projects: list[dict]) -> dict[str, dict]:
        """The users already in the user domain whose names are this context's, by name."""
        found: dict[str, dict] = {}
        for p in projects:
            prefix = p["name"] + "-u"
            for u in admin.list_prefixed("users", prefix, self.domain_id):
                found[u["name"]] = u
        return found

    def _plan(
        self, projects: list[dict], found: dict, known: dict, tag: str | None
    ) -> list[tuple[str, dict, str]]:
        """(name, project, action) for each user: create it, reuse it, or reset its password."""
        plan: list[tuple[str, dict, str]] = []
        for p in projects:
            for j in range(self.config["users_per_tenant"]):
                name = _base.user_name(p["name"], j)
                if name not in found:
                    plan.append((name, p, "create"))
                elif not _base.owned_by_tag(found[name], tag):
                    raise self._fail(
                        f"user {name} exists but is not marked as reuse tag {tag!r}'s; "
                        "it is left alone: choose another tag"
                    )
                elif found[name]["id"] in known:
                    plan.append((name, p, "reuse"))
                else:
                    plan.append((name, p, "reset"))
        return plan

    def _new_user(self, admin: Any, name: str, password: str, project: dict, why: str) -> str:
        """Create user NAME in the user domain; its id. A failed call may have made it."""
        try:
            record = admin.create(
                "users",
                name,
                {"password": password, "default_project_id": project["id"], "description": why},
                self.domain_id,
            )
        except Exception:
            self.uncertain.append(name)
            raise
        self.created.append({"id": record["id"], "name": name})
        return record["id"]

    def _publish_created(
        self, users: list, errors: list, aborted: bool, plan: list, projects: list, role_ids: dict
    ) -> None:
        """Fail on any error or an abort; else put the users in the context, in plan order."""
        tag = self.config.get("reuse")
        counts = {
            a: sum(1 for u in users if u["action"] == a) for a in ("create", "reuse", "reset")
        }
        if errors:
            raise self._fail(
                f"{_base.describe_errors(errors)}; created {counts['create']} of "
                f"{sum(1 for s in plan if s[2] == 'create')} users"
                + ("" if self.kept else ", removed at cleanup")
            )
        if aborted:
            raise self._fail(
                f"task aborted during setup; created {counts['create']} users"
                + ("" if self.kept else ", removed at cleanup")
            )
        order = {s[0]: i for i, s in enumerate(plan)}
        users.sort(key=lambda u: order[u["credential"]["username"]])
        for u in users:
            u.pop("action")
            u.pop("_password")
        self._publish(users, {p["id"]: p["name"] for p in projects})
        LOG.info(
            f"keystone_users: {counts['create']} users created"
            + (f", {counts['reuse']} reused, {counts['reset']} passwords reset" if tag else "")
            + f" in {len(projects)} projects, roles {', '.join(role_ids)}"
        )

    def _check_reused(self, users: list[dict], role_ids: dict, grant_all) -> None:
        """Reused users still hold their roles, and (one per project) still authenticate.

        A project whose sampled user fails has every user checked, and the
        passwords of those that fail are reset.
        """
        admin = self.admin
        assert admin is not None
        by_project: dict[str, list[dict]] = {}
        for u in users:
            if u["action"] == "reuse":
                by_project.setdefault(u["tenant_id"], []).append(u)
        workers = self.config["resource_management_workers"]

        def check_project(item: tuple[str, list[dict]]) -> int:
            project_id, members = item
            have = admin.role_assignments(project_id)
            project = {"id": project_id, "name": members[0]["credential"]["tenant_name"]}
            for u in members:
                grant_all(u["id"], u["credential"]["username"], project, have)
            sample = members[0]
            if admin.authenticates(sample["id"], sample["_password"], project_id):
                return 0
            stale = [
                u for u in members if not admin.authenticates(u["id"], u["_password"], project_id)
            ]
            for u in stale:
                password = secrets.token_urlsafe(18)
                admin.set_password(u["id"], password)
                u["credential"]["password"] = password
                u["_password"] = password
                u["action"] = "reset"
                self.state["users"][u["id"]] = {
                    "name": u["credential"]["username"],
                    "password": password,
                }
            return len(stale)

        _, errors, _ = _admin.run_parallel(check_project, list(by_project.items()), workers)
        if errors:
            raise self._fail(f"checking reused users: {_base.describe_errors(errors)}")
