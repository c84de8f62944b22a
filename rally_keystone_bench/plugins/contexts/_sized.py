"""What the data-size contexts share: timing, what they made, deleting it again.

Each data-size context (revocation_events, keystone_roles, keystone_groups,
keystone_catalog, keystone_project_tree) creates its data through Keystone's
API, in parallel, names everything with the run's prefix, and records every
resource as soon as Keystone answers for it. Cleanup deletes what was
recorded, newest kind first, and then looks up by the run's name prefix
whatever a failed create may or may not have made. Its setup time goes into
``context["keystone_bench"]["data"][NAME]`` and the log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from rally import exceptions
from rally.common import logging

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.clients.retry import RetryStats
from rally_keystone_bench.plugins.contexts import _base

LOG = logging.getLogger(__name__)

# Kinds in the order they are deleted: what depends on others goes first.
# Deleting a service deletes its endpoints; a role or group its assignments.
DELETE_ORDER = ("endpoints", "services", "regions", "groups", "roles", "projects")

SIZE_SCHEMA = {"type": "integer", "minimum": 0}


class SizedContext(_base.BenchContext):
    """Base of the data-size contexts: records what it made, deletes it at cleanup."""

    def __init__(self, ctx: dict[str, Any]) -> None:
        super().__init__(ctx)
        self.made: dict[str, list[str]] = {}  # kind -> ids, as Keystone answered
        self.uncertain: dict[str, list[str]] = {}  # kind -> names of creates that failed
        self.stats = RetryStats()
        self.admin: _admin.AdminClient | None = None
        self._started = 0.0

    # -- setup --------------------------------------------------------------
    def setup(self) -> None:
        self._started = time.monotonic()
        self.track()
        try:
            self.admin = self.make_admin(self.workers(), self.stats)
            summary = self.build()
        except BaseException as exc:
            if not isinstance(exc, Exception):
                self.cleanup_on_interrupt()
            raise
        finally:
            self.report_retries("setup", self.stats)
        seconds = time.monotonic() - self._started
        summary["setup_seconds"] = round(seconds, 3)
        self.bench().setdefault("data", {})[self.get_name()] = summary
        LOG.info(f"{self.get_name()}: {describe(summary)} in {seconds:.1f} s")

    def build(self) -> dict[str, Any]:
        """Create the data; return what a report says about it (sizes, counts)."""
        raise NotImplementedError

    def workers(self) -> int:
        return int(self.config["resource_management_workers"])

    def new(self, kind: str, body: dict[str, Any], name: str) -> dict:
        """POST one KIND ("roles", "groups"...) and record its id; its record."""
        single = kind[:-1]
        assert self.admin is not None
        try:
            _, answer = self.admin.request(
                "POST", f"/{kind}", f"create {single} {name}", json={single: body}, ok=(201,)
            )
        except Exception:
            if name:  # an endpoint has no name: it goes with its service
                self.uncertain.setdefault(kind, []).append(name)
            raise
        record = answer[single]
        self.made.setdefault(kind, []).append(record["id"])
        return record

    def parallel(self, job: Callable[[Any], Any], items: Iterable[Any], what: str) -> list[Any]:
        """Run JOB over ITEMS on the context's workers; a setup failure naming WHAT."""
        results, errors, aborted = _admin.run_parallel(
            job, items, self.workers(), self.abort_watch()
        )
        if errors:
            raise exceptions.ContextSetupFailure(
                ctx_name=self.get_name(),
                msg=f"{what}: {_base.describe_errors(errors)}; what was made is removed at cleanup",
            )
        if aborted:
            raise exceptions.ContextSetupFailure(
                ctx_name=self.get_name(), msg=f"task aborted during setup ({what})"
            )
        return results

    def users(self) -> list[dict]:
        users = self.context.get("users") or []
        if not users:
            raise exceptions.ContextSetupFailure(
                ctx_name=self.get_name(), msg="needs users: add keystone_tenants and keystone_users"
            )
        return users

    # -- cleanup ------------------------------------------------------------
    def cleanup(self) -> None:
        self.untrack()
        if not (self.made or self.uncertain):
            return
        stats = RetryStats()
        admin = self.admin or self.make_admin(self.workers(), stats)
        admin.stats = stats
        admin.policy.min_patience = 120.0
        left: list[str] = []
        errors: list[BaseException] = []
        for kind in DELETE_ORDER:
            ids = list(self.made.pop(kind, []))
            for name in self.uncertain.pop(kind, []):
                try:
                    ids += [r["id"] for r in _find(admin, kind, name)]
                except Exception as exc:  # reported with the rest
                    errors.append(exc)
            # projects are a chain: deleted leaf first, one at a time
            ordered = list(reversed(dict.fromkeys(ids))) if kind == "projects" else sorted(set(ids))
            done, errs, _ = _admin.run_parallel(
                lambda rid, k=kind: admin.request(
                    "DELETE", f"/{k}/{rid}", f"delete {k[:-1]} {rid}"
                ),
                ordered,
                1 if kind == "projects" else self.workers(),
                fail_fast=False,
            )
            errors += errs
            if errs:
                left.append(f"{len(set(ids)) - len(done)} {kind}")
        self.report_retries("cleanup", stats)
        if errors:
            raise exceptions.RallyException(
                f"{self.get_name()} cleanup: {_base.describe_errors(errors)}; "
                f"left behind: {', '.join(left) or 'see the log'}"
            )
        LOG.info(f"{self.get_name()}: deleted what it made")


def _find(admin: _admin.AdminClient, kind: str, name: str) -> list[dict]:
    """Resources of KIND named NAME (regions: the id is the name)."""
    if kind == "regions":
        record = admin.get("regions", name)
        return [record] if record else []
    _, body = admin.request("GET", f"/{kind}", f"look up {kind[:-1]} {name}", params={"name": name})
    return [r for r in body.get(kind) or [] if r.get("name") == name]


def describe(summary: dict[str, Any]) -> str:
    """'events 1000, created 1000' from a summary, in its own order."""
    return ", ".join(
        f"{k.replace('_', ' ')} {v}" for k, v in summary.items() if k != "setup_seconds"
    )
