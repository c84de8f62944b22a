"""keystone_users: users in keystone_tenants' projects, or the env's existing users.

Sets context["users"] and context["tenants"] in the shape of rally-openstack's
stock `users` context, so that stock scenarios run with it too. That stock
context is a default of every OpenStack scenario and runs first (order 100):
whatever it put in the context is set aside during the run and put back at
cleanup, so that it deletes its own users and never ours. The KeystoneTokens
scenarios have keystone_bench_default_users as their default instead
(plugins/contexts/default_users.py): the stock context where the workload
names no users context, nothing where it names keystone_users.
"""

from __future__ import annotations

import copy
import secrets
from typing import Any

from rally import consts, exceptions
from rally.common import logging, validation
from rally.task import context
from rally_openstack.common import consts as os_consts
from rally_openstack.common import credential as os_credential

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.clients import session
from rally_keystone_bench.clients.credentials import verify_of
from rally_keystone_bench.clients.retry import RetryStats
from rally_keystone_bench.clients.tokens import scrub
from rally_keystone_bench.plugins.contexts import _base, reuse
from rally_keystone_bench.plugins.contexts.directory_users import (
    directory_users_path,
    load_directory_users,
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
class KeystoneUsers(_base.BenchContext):
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
            cred = os_credential.OpenStackCredential(
                auth_url=admin_cred["auth_url"],
                username=entry["name"],
                password=entry["password"],
                tenant_name=project["name"],
                permission=os_consts.EndpointPermission.USER,
                project_domain_name=project_domain,
                user_domain_name=domain,
                endpoint_type=admin_cred["endpoint_type"],
                https_insecure=admin_cred["https_insecure"],
                https_cacert=admin_cred["https_cacert"],
                region_name=admin_cred["region_name"],
                api_info=admin_cred["api_info"],
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

    def _admin_and_roles(self) -> tuple[Any, Any, dict]:
        """The admin client (kept for cleanup), its credential and the ids of the roles to grant."""
        self.admin = admin = self.make_admin(self.config["resource_management_workers"], self.stats)
        try:
            role_ids = admin.role_ids(self.config["roles"])
        except ValueError as exc:
            raise self._fail(f"roles: {exc}") from None
        return admin, self.admin_credential(), role_ids

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
                "credential": _user_credential(admin_cred, name, password, project, domains),
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
    auth = session.password_auth(cred)
    try:
        access = auth.get_access(session.build(cred["auth_url"], verify=verify_of(cred)))
    except Exception as exc:
        message = scrub(str(exc), [cred["password"] or ""])
        raise RuntimeError(f"user {cred['username']}: {message}") from None
    return access.user_id, access.project_id


def _user_credential(
    admin_cred: Any, name: str, password: str, project: dict, domains: tuple[str, str]
) -> Any:
    """User NAME's credential, scoped to PROJECT; DOMAINS: the project's and the user's."""
    return os_credential.OpenStackCredential(
        auth_url=admin_cred["auth_url"],
        username=name,
        password=password,
        tenant_name=project["name"],
        permission=os_consts.EndpointPermission.USER,
        project_domain_name=domains[0],
        user_domain_name=domains[1],
        endpoint_type=admin_cred["endpoint_type"],
        https_insecure=admin_cred["https_insecure"],
        https_cacert=admin_cred["https_cacert"],
        region_name=admin_cred["region_name"],
        api_info=admin_cred["api_info"],
    )
