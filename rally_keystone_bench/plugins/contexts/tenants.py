"""keystone_tenants: the projects that keystone_users fills with users."""

from __future__ import annotations

from typing import Any

from rally import consts, exceptions
from rally.common import logging
from rally.task import context

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.clients.retry import RetryStats
from rally_keystone_bench.plugins.contexts import _base, tree

LOG = logging.getLogger(__name__)


@context.configure(name="keystone_tenants", platform="openstack", order=110)
class KeystoneTenants(_base.BenchContext):
    """Creates `tenants` projects, named with a run-specific prefix, in parallel.

    With keystone_users' `reuse: TAG`, the tag's projects are found and kept
    instead; with its `existing: true`, nothing is created (unless it names a
    directory `domain`, whose users are put in these projects).
    """

    CONFIG_SCHEMA = {
        "type": "object",
        "$schema": consts.JSON_SCHEMA,
        "properties": {
            "tenants": {
                "type": "integer",
                "minimum": 1,
                "description": "Number of projects to create (default 1).",
            },
            "domain": {
                "type": "string",
                "minLength": 1,
                "description": "Domain name or id of the projects (default: the admin's).",
            },
            "resource_management_workers": _base.WORKERS_SCHEMA,
        },
        "additionalProperties": False,
    }

    DEFAULT_CONFIG = {"tenants": 1, "resource_management_workers": _admin.DEFAULT_WORKERS}

    def __init__(self, ctx: dict[str, Any]) -> None:
        super().__init__(ctx)
        self.created: list[dict] = []  # {"id", "name"} of what this run created
        self.uncertain: list[str] = []  # names whose create may or may not have happened
        self.domain_id: str | None = None
        self.kept = False  # reuse: nothing is deleted at cleanup
        self.stats = RetryStats()
        self.admin: _admin.AdminClient | None = None

    def setup(self) -> None:
        bench = self.bench()
        bench["projects"] = []
        users_cfg = self.users_config()
        if users_cfg.get("existing") and not users_cfg.get("domain"):
            LOG.info("keystone_tenants: keystone_users uses existing users, nothing to create")
            return
        self.track()
        try:
            self._setup(bench, users_cfg.get("reuse"))
        except BaseException as exc:
            if not isinstance(exc, Exception):
                self.cleanup_on_interrupt()
            raise
        finally:
            self.report_retries("setup", self.stats)

    def _setup(self, bench: dict, tag: str | None) -> None:
        workers = self.config["resource_management_workers"]
        self.admin = admin = self.make_admin(workers, self.stats)
        if self.config.get("domain"):
            domain_id = admin.resolve_domain(self.config["domain"])
        else:
            domain_id = admin.admin_project_domain_id()
        bench["domain_id"] = self.domain_id = domain_id
        count = self.config["tenants"]

        if tag:
            self.kept = True
            prefix = _base.reuse_prefix(tag)
            description = _base.reuse_description(tag)
            found = {p["name"]: p for p in admin.list_prefixed("projects", prefix, domain_id)}
        else:
            prefix = self.run_prefix()
            description = f"rally-keystone-bench task {self.task_uuid()}"
            found = {}

        wanted = [_base.project_name(prefix, i) for i in range(count)]
        projects: dict[str, dict] = {}
        to_create = []
        for name in wanted:
            if name in found:
                if not _base.owned_by_tag(found[name], tag):
                    raise exceptions.ContextSetupFailure(
                        ctx_name=self.get_name(),
                        msg=f"project {name} exists but is not marked as reuse tag "
                        f"{tag!r}'s; it is left alone: choose another tag",
                    )
                projects[name] = {"id": found[name]["id"], "name": name, "reused": True}
            else:
                to_create.append(name)

        # keystone_project_tree (order 105) may have made a chain to hang them from
        parent = {"parent_id": bench[tree.PARENT_KEY]} if bench.get(tree.PARENT_KEY) else {}

        def create(name: str) -> dict:
            try:
                record = admin.create(
                    "projects", name, {"description": description, **parent}, domain_id
                )
            except Exception:
                self.uncertain.append(name)
                raise
            self.created.append({"id": record["id"], "name": name})
            return {"id": record["id"], "name": name, "reused": False}

        results, errors, aborted = _admin.run_parallel(
            create, to_create, workers, self.abort_watch()
        )
        for p in results:
            projects[p["name"]] = p
        bench["projects"] = [projects[n] for n in wanted if n in projects]
        if errors:
            raise exceptions.ContextSetupFailure(
                ctx_name=self.get_name(),
                msg=f"{_base.describe_errors(errors)}; created {len(self.created)} of "
                f"{len(to_create)} projects, removed at cleanup",
            )
        if aborted:
            raise exceptions.ContextSetupFailure(
                ctx_name=self.get_name(),
                msg=f"task aborted during setup; created {len(self.created)} of "
                f"{len(to_create)} projects, removed at cleanup",
            )
        reused = len(projects) - len(results)
        LOG.info(
            f"keystone_tenants: {len(results)} projects created"
            + (f", {reused} reused (tag {tag})" if tag else "")
            + f" in domain {domain_id}"
        )

    def cleanup(self) -> None:
        self.untrack()
        if self.kept:
            if self.created:
                LOG.info(f"keystone_tenants: keeping {len(self.created)} new projects for the tag")
            self.created, self.uncertain = [], []
            return
        self.delete_created("projects")
