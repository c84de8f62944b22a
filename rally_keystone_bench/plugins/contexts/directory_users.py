"""The env's directory users: the LDAP users a local directory made, placed in our projects.

keystone-bench's local directory writes them (mode 0600) and names the file
in the Rally env's ``!extras``; keystone_users (``existing: true`` with a
``domain``) reads them, grants them roles on keystone_tenants' projects
(:class:`DirectoryUsers`, its methods) and revokes the grants at cleanup.
"""

from __future__ import annotations

import json

from rally import exceptions
from rally.common import logging

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.clients.retry import RetryStats
from rally_keystone_bench.plugins.contexts import _base

# keystone_users' lines keep its logger name, whichever of its modules says them
LOG = logging.getLogger("rally_keystone_bench.plugins.contexts.users")


def directory_users_path(env: dict) -> str | None:
    """The env's directory users file: !extras {keystone_bench: {directory_users: FILE}}."""
    extras = (env or {}).get("extras") or {}
    return ((extras.get("keystone_bench") or {}).get("directory_users")) or None


def load_directory_users(env: dict, domain: str) -> list[dict]:
    """[{"name", "password"}] of DOMAIN from the env's directory users file.

    The file (mode 0600, written by keystone-bench's local directory) is JSON:
    {"domain": NAME, "users": [{"name": ..., "password": ...}, ...]}.
    """
    path = directory_users_path(env)
    if not path:
        raise exceptions.ContextSetupFailure(
            ctx_name="keystone_users", msg="the env names no directory users file"
        )
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise exceptions.ContextSetupFailure(
            ctx_name="keystone_users", msg=f"cannot read the directory users {path}: {exc}"
        ) from None
    if doc.get("domain") != domain:
        raise exceptions.ContextSetupFailure(
            ctx_name="keystone_users",
            msg=f"the directory users in {path} are of domain {doc.get('domain')!r}, "
            f"not {domain!r}",
        )
    return list(doc.get("users") or [])


class DirectoryUsers:
    """KeystoneUsers' directory side (a mixin: the state is the context's)."""

    def _use_directory(self) -> None:
        """Users of a directory's domain (they exist there), granted roles on our projects."""
        domain = self.config["domain"]
        bench = self._tenants_bench(
            "existing: true with a domain puts its users in keystone_tenants' projects: "
            "add keystone_tenants to the contexts"
        )
        projects = bench["projects"]
        listed = load_directory_users(self.env, domain)
        need = len(projects) * self.config["users_per_tenant"]
        if need > len(listed):
            raise self._fail(
                f"domain {domain} lists {len(listed)} directory users, the task needs {need} "
                f"({len(projects)} projects x {self.config['users_per_tenant']} users): "
                f"start the directory with --ldap-users {need}"
            )
        admin, admin_cred, role_ids = self._admin_and_roles()
        workers = self.config["resource_management_workers"]
        try:
            self.domain_id = admin.resolve_domain(domain)
        except Exception as exc:
            raise self._fail(f"domain {domain}: {exc}") from None
        project_domain = admin.domain_name(bench["domain_id"])
        plan = [
            (listed[i * self.config["users_per_tenant"] + j], p)
            for i, p in enumerate(projects)
            for j in range(self.config["users_per_tenant"])
        ]

        def place(step: tuple[dict, dict]) -> dict:
            entry, project = step
            found = admin.find("users", entry["name"], self.domain_id)
            if len(found) != 1:
                raise RuntimeError(f"user {entry['name']} not found in domain {domain}")
            user_id = found[0]["id"]
            for role, role_id in role_ids.items():
                admin.grant(
                    project["id"],
                    user_id,
                    role_id,
                    f"grant role {role} to user {entry['name']} on project {project['name']}",
                )
                self.granted.append((project["id"], user_id, role_id))
            # One token now, before the load: Keystone records an LDAP user
            # (its shadow user) at the first authentication, and two workers
            # doing that for the same user at once collide (seen: 409
            # "Duplicate entry ... nonlocal_user", a failed iteration).
            if not admin.authenticates(user_id, entry["password"], project["id"]):
                raise RuntimeError(
                    f"user {entry['name']} of domain {domain} cannot authenticate with the "
                    "password in the directory users file"
                )
            cred = _base.user_credential(
                admin_cred, entry["name"], entry["password"], project, (project_domain, domain)
            )
            return {"id": user_id, "credential": cred, "tenant_id": project["id"]}

        users, errors, aborted = _admin.run_parallel(place, plan, workers, self.abort_watch())
        if errors:
            raise self._fail(f"{_base.describe_errors(errors)}; grants revoked at cleanup")
        if aborted:
            raise self._fail("task aborted during setup; grants revoked at cleanup")
        order = {e["name"]: i for i, (e, _) in enumerate(plan)}
        users.sort(key=lambda u: order[u["credential"]["username"]])
        self._publish(users, {p["id"]: p["name"] for p in projects})
        LOG.info(
            f"keystone_users: {len(users)} users of domain {domain} in {len(projects)} "
            f"projects, roles {', '.join(role_ids)}"
        )

    def _revoke_granted(self) -> None:
        """Revoke the roles granted to directory users; raise if any stay."""
        if not self.granted:
            return
        workers = self.config["resource_management_workers"]
        stats = RetryStats()
        admin = self.admin or self.make_admin(workers, stats)
        admin.stats = stats
        granted, self.granted = list(self.granted), []

        def revoke(grant: tuple[str, str, str]) -> tuple[str, str, str]:
            admin.revoke(*grant)
            return grant

        done, errors, _ = _admin.run_parallel(revoke, granted, workers, fail_fast=False)
        self.report_retries("cleanup", stats)
        if errors:
            self.granted = [g for g in granted if g not in set(done)]
            raise exceptions.RallyException(
                f"keystone_users cleanup: {_base.describe_errors(errors)}; "
                f"{len(self.granted)} role grants left behind"
            )
        LOG.info(f"keystone_users: revoked {len(done)} role grants of directory users")
