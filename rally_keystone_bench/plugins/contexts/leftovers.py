"""What a workload's contexts may leave in a cloud, found by name and deleted.

Every resource our contexts create carries its workload's prefix,
``rkb-<first 8 hex digits of the workload uuid>-`` (keystone_tenants,
keystone_users, keystone_roles, keystone_groups, keystone_catalog,
keystone_project_tree); Rally's stock users context names its projects and
users ``c_rally_<the same 8 hex digits>_``. A task cut short before its
contexts cleaned up (a second Ctrl-C, Rally killed) leaves them behind:
``keystone-bench cleanup --workload-id ID`` deletes whatever carries those
prefixes and nothing else. Deleting a user ends its tokens, trusts, TOTP
credentials and role grants (keystone_trusts, keystone_totp,
keystone_scope_roles hang theirs on our users); a service its endpoints; a
role or group its assignments. Revocation events (revocation_events)
are Keystone's own records and stay.
"""

from __future__ import annotations

import re
from typing import Any

# Deleted in this order: members before what they belong to, children
# before parents (projects are further ordered leaf first).
KINDS = ("users", "groups", "projects", "roles", "services", "regions")
_ID_RE = re.compile(r"^[0-9a-f]{8}(?:[0-9a-f-]*)$")


def short_id(workload: str) -> str:
    """The 8 hex digits of a workload uuid that its resources' names carry."""
    return workload.replace("-", "")[:8]


def check_workload(text: str) -> str:
    """WORKLOAD as given (a workload uuid or its first 8 hex digits), checked; its short id."""
    value = (text or "").strip().lower()
    if not _ID_RE.match(value) or len(short_id(value)) < 8:
        from rally_keystone_bench.errors import BenchError

        raise BenchError(
            f"--workload-id {text!r} must be a workload uuid or its first 8 hex digits "
            "(as keystone-bench printed them)"
        )
    return short_id(value)


def run_prefix(workload: str) -> str:
    """The prefix of what our contexts create for WORKLOAD."""
    return f"rkb-{short_id(workload)}-"


def prefixes(workload: str) -> tuple[str, ...]:
    """Our contexts' prefix and Rally's stock users context's, for WORKLOAD."""
    return (run_prefix(workload), f"c_rally_{short_id(workload)}_")


def _key(kind: str, record: dict) -> str:
    # Regions have no name: our catalog context gives them ids of its own.
    return str(record.get("id" if kind == "regions" else "name") or "")


def find(admin: Any, workload: str) -> dict[str, list[dict]]:
    """Per kind, the resources carrying WORKLOAD's prefixes (in every domain)."""
    found: dict[str, list[dict]] = {}
    for kind in KINDS:
        records: dict[str, dict] = {}
        for prefix in prefixes(workload):
            params = {} if kind in ("regions", "services") else {"name__startswith": prefix}
            _, body = admin.request("GET", f"/{kind}", f"list {kind} {prefix}*", params=params)
            # Older Keystones ignore unknown filters: filter again here.
            for r in body.get(kind) or []:
                if _key(kind, r).startswith(prefix):
                    records[r["id"]] = r
        found[kind] = list(records.values())
    return found


def leaf_first(projects: list[dict]) -> list[list[dict]]:
    """PROJECTS in rounds that Keystone accepts: no round holds a parent of a later one's."""
    left = list(projects)
    rounds = []
    while left:
        parents = {p.get("parent_id") for p in left}
        leaves = [p for p in left if p["id"] not in parents] or left  # a cycle: try all
        rounds.append(leaves)
        left = [p for p in left if p not in leaves]
    return rounds


def delete_workload(admin: Any, workload: str, workers: int = 8) -> dict[str, int]:
    """Delete what WORKLOAD's contexts left; per kind, how many were deleted.

    Raises the first error once every deletion was tried.
    """
    from rally_keystone_bench.clients import admin as _admin

    found = find(admin, workload)
    deleted: dict[str, int] = {}
    failures: list[BaseException] = []
    for kind in KINDS:
        rounds = leaf_first(found[kind]) if kind == "projects" else [found[kind]]
        deleted[kind] = 0
        for batch in rounds:

            def delete(record: dict, kind: str = kind) -> bool:
                return admin.delete(kind, record["id"])

            done, errors, _ = _admin.run_parallel(delete, batch, workers, fail_fast=False)
            # A 404 on a retried delete means an earlier attempt did delete it.
            deleted[kind] += len(done)
            failures += errors
    if failures:
        raise failures[0]
    return deleted


def describe(counts: dict[str, int]) -> str:
    """'3 users, 2 projects' (kinds with none left out); 'nothing' when all are 0."""
    said = [f"{n} {kind}" for kind, n in counts.items() if n]
    return ", ".join(said) or "nothing"
