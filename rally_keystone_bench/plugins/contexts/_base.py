"""What the three contexts share: the admin client, names, retry reports, abort."""

from __future__ import annotations

import copy
import secrets
from typing import Any

from rally import exceptions
from rally.common import logging
from rally.task import context as rally_context
from rally_openstack.common import consts as os_consts
from rally_openstack.common import credential as os_credential

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.clients.retry import RetryStats
from rally_keystone_bench.plugins.contexts import leftovers

LOG = logging.getLogger(__name__)

TENANTS = "keystone_tenants@openstack"
USERS = "keystone_users@openstack"
POOL = "token_pool@openstack"

REUSE_PREFIX = "rkb-reuse-"
REUSE_MARKER = "rkb-reuse:"

WORKERS_SCHEMA = {
    "type": "integer",
    "minimum": 1,
    "description": "Parallel admin requests while creating and deleting (default 20).",
}


def reuse_prefix(tag: str) -> str:
    """Name prefix of a reuse TAG's projects and users."""
    return f"{REUSE_PREFIX}{tag}-"


def reuse_marker(tag: str) -> str:
    """First word of the description of every project and user a reuse TAG owns."""
    return f"{REUSE_MARKER}{tag}"


def reuse_description(tag: str) -> str:
    return (
        f"{reuse_marker(tag)} kept by rally-keystone-bench; "
        f"delete with: keystone-bench cleanup --reuse {tag}"
    )


def owned_by_tag(resource: dict, tag: str) -> bool:
    """True when RESOURCE carries TAG's marker (and so may be reused or deleted)."""
    words = (resource.get("description") or "").split()
    return bool(words) and words[0] == reuse_marker(tag)


def project_name(prefix: str, index: int) -> str:
    return f"{prefix}p{index:02d}"


def user_name(project: str, index: int) -> str:
    return f"{project}-u{index:04d}"


def task_uuid(ctx: dict) -> str | None:
    """The Rally task's uuid (the task is a DB object, not a dict: no .get)."""
    try:
        return ctx["task"]["uuid"]
    except (KeyError, TypeError):
        return None


# Contexts of this process set up and not yet cleaned up, per workload. Kept
# here, not in the context dict, which Rally deep-copies for every iteration.
_set_up: dict[str, list[BenchContext]] = {}


class BenchContext(rally_context.Context):
    """Base of keystone_tenants and keystone_users: an admin client and bookkeeping."""

    def _owner(self) -> str:
        return str(self.context.get("owner_id") or self.task_uuid() or id(self.context))

    def track(self) -> None:
        """Remember this context as set up, for cleanup_on_interrupt."""
        _set_up.setdefault(self._owner(), []).append(self)

    def untrack(self) -> None:
        # By identity: Rally's contexts compare equal when their orders are.
        chain = [c for c in _set_up.get(self._owner(), []) if c is not self]
        _set_up[self._owner()] = chain
        if not chain:
            _set_up.pop(self._owner(), None)

    def make_each(self, make: Any, items: list, workers: int) -> None:
        """MAKE(item) for every item, WORKERS at a time. The first failure stops the rest;
        what was made is then cleaned up and the setup fails, naming the error."""
        _, errors, _ = _admin.run_parallel(make, items, workers, fail_fast=True)
        if errors:
            self.cleanup()
            raise exceptions.ContextSetupFailure(
                ctx_name=self.get_name(), msg=describe_errors(errors)
            )

    def cleanup_on_interrupt(self) -> None:
        """Ctrl-C during setup: Rally's context manager only cleans up after an
        Exception, so clean up this context and the ones set up before it, in
        reverse order, here."""
        for ctx in reversed(list(_set_up.get(self._owner(), []))):
            try:
                ctx.cleanup()
            except Exception as exc:  # keep cleaning the others
                LOG.error(f"{ctx.get_name()} cleanup after an interrupt: {exc}")

    def task_uuid(self) -> str | None:
        return task_uuid(self.context)

    def admin_credential(self) -> os_credential.OpenStackCredential | None:
        """The env's admin as an OpenStackCredential (also set as context["admin"])."""
        admin = self.context.get("admin", {}).get("credential")
        if admin is not None:
            return admin
        platform = self.env.get("platforms", {}).get("openstack", {})
        if not platform.get("admin"):
            return None
        cred = copy.deepcopy(platform["admin"])
        api_info = copy.deepcopy(platform.get("api_info", {}))
        api_info.update(cred.pop("api_info", {}) or {})
        cred["api_info"] = api_info
        admin = os_credential.OpenStackCredential(**cred)
        self.context["admin"] = {"credential": admin}
        return admin

    def make_admin(self, workers: int, stats: RetryStats) -> _admin.AdminClient:
        cred = self.admin_credential()
        if cred is None:
            raise ValueError(
                f"{self.get_name()} needs admin credentials in the Rally env "
                "(an env with users only can use keystone_users with existing: true)"
            )
        return _admin.AdminClient(cred, pool_size=workers, stats=stats)

    def bench(self) -> dict[str, Any]:
        """context["keystone_bench"]: what the contexts created and their retries."""
        return self.context.setdefault("keystone_bench", {"retries": {}})

    def users_config(self) -> dict[str, Any]:
        return dict(self.context.get("config", {}).get(USERS) or {})

    def run_prefix(self) -> str:
        """'rkb-<8 chars of the workload id>-': names nothing else can carry."""
        owner = self.context.get("owner_id") or self.task_uuid() or secrets.token_hex(4)
        return leftovers.run_prefix(owner)  # what keystone-bench cleanup --workload-id finds

    def abort_watch(self) -> _admin.AbortWatch:
        return _admin.AbortWatch(self.task_uuid())

    def report_retries(self, phase: str, stats: RetryStats) -> None:
        """Put the retry count in the context and the log (a warning when non-zero)."""
        retries = self.bench().setdefault("retries", {})
        retries.setdefault(self.get_name(), {})[phase] = stats.total
        msg = f"{self.get_name()} {phase}: {stats.describe()}"
        (LOG.warning if stats.total else LOG.info)(msg)

    def delete_created(self, kind: str) -> None:
        """Delete the KIND ("projects" or "users") this context created; raise if any stay.

        Cleanup waits longer than setup, so a restarting Keystone can come back.
        """
        if not (self.created or self.uncertain):
            return
        workers = self.config["resource_management_workers"]
        stats = RetryStats()
        admin = self.admin or self.make_admin(workers, stats)
        admin.stats = stats
        admin.policy.min_patience = 120.0
        count = len(self.created)
        left, errors = delete_resources(
            admin, kind, self.created, self.uncertain, self.domain_id, workers
        )
        self.created, self.uncertain = left, []
        self.report_retries("cleanup", stats)
        name = self.get_name()
        if errors:
            names = ", ".join(f"{r['name']} ({r['id']})" for r in left)
            raise exceptions.RallyException(
                f"{name} cleanup: {describe_errors(errors)}; {kind} left behind: {names}"
            )
        LOG.info(f"{name}: deleted {count - len(left)} {kind}")


def delete_resources(
    admin: _admin.AdminClient,
    kind: str,
    records: list[dict],
    uncertain: list[str],
    domain_id: str | None,
    workers: int,
) -> tuple[list[dict], list[BaseException]]:
    """Delete RECORDS ({"id", "name"}) and whatever carries an UNCERTAIN name.

    Uncertain names are creates whose outcome is unknown (retries exhausted
    after a request that may have reached the database): they are looked up
    by their run-specific name. Every deletion is tried, whatever fails.
    Returns (records left behind, errors).
    """
    records = list(records)
    for name in uncertain:
        try:
            found = admin.find(kind, name, domain_id)
        except Exception as exc:  # reported with the rest
            return records + [{"id": "?", "name": name}], [exc]
        records.extend({"id": r["id"], "name": name} for r in found)

    def delete(record: dict) -> str:
        admin.delete(kind, record["id"])
        return record["id"]

    done, errors, _ = _admin.run_parallel(delete, records, workers, fail_fast=False)
    done_ids = set(done)
    return [r for r in records if r["id"] not in done_ids], errors


def describe_errors(errors: list[BaseException]) -> str:
    """The first failure in full, and how many more there were."""
    first = errors[0]
    more = f" (and {len(errors) - 1} more failures)" if len(errors) > 1 else ""
    return f"{first}{more}"


def user_credential(
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
