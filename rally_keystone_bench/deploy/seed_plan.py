"""What the gate's sized pass puts into both sides' Keystone: the plan, no I/O.

The plan is handed as JSON to ``keystone_bench_seed.py``, which runs in
Keystone's own environment and makes the data through Keystone's managers
(see :mod:`rally_keystone_bench.deploy.seeding`). Both sides get the same plan
with the same seed, so the same names, the same revocation events and the
same assignments.

Sizes, and where they come from:

- Revocation events: Keystone keeps an event for the token lifetime plus
  ``[revoke] expiration_buffer`` (3,600 + 1,800 s by default: 90 minutes).
  At one revocation a second (logouts, token revocations by services,
  disabled users and deleted projects together), a cloud keeps 5,400 of
  them; the plan makes 4,400 revocations (1,000 revoked tokens, 1,800
  users, 1,200 projects, 400 trusts): 4,400 events on a release that
  writes one per revoked token, 5,400 on one that writes two (30.0.0 as
  installed here), each made by the release's own code for that
  operation. Revoked tokens are a quarter of them: on 30.0.0 each writes
  an audit-chain event that every validation reads back, and 2,000 of those
  made a cache-off validation take 4 to 7 s on this busy 2-core machine,
  too slow for the gate to fill its blocks. They are dated by
  Keystone's clock set ``clock_ahead_seconds`` ahead, so that every token
  the gate issues is older than every event, as a cloud's hour-old tokens
  are older than the events of that hour (a validation only considers the
  events newer than its token).
- Catalog: tens of services (30), each with the three interfaces in two
  regions: 180 endpoints, beside bootstrap's identity endpoints.
- Assignments: the measured user (each side's admin) in 5 groups, with a
  role on 20 projects directly and each group holding a role on 4 more,
  and an inherited role on its domain (which reaches every project of it):
  41 assignments beside bootstrap's.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

# The revocation events of every kind Keystone writes, each made by the
# release's own code for the operation named. "token" is a revoked token,
# by the token provider's own revoke_token: its audit id, and on releases
# that revoke the chain too (30.0.0 as installed here) an audit-chain event
# with no user, project or audit id, which every validation then reads.
# Removing a role assignment writes no event since Keystone 12 (it
# invalidates the token cache; roles are computed again at validation);
# removing a user from a group writes a "user" event.
EVENT_KINDS = {
    "token": "a revoked token (DELETE /v3/auth/tokens): its audit id, and its chain",
    "user": "a disabled or deleted user, a changed password, a group removal",
    "project": "a deleted or disabled project",
    "trust": "a deleted trust",
}

# Seconds Keystone keeps a revocation event by default: token expiration
# (3600) plus [revoke] expiration_buffer (1800).
EVENT_RETENTION_SECONDS = 3600 + 1800
# The assumed rate of a busy cloud, revocations per second.
BUSY_CLOUD_RATE = 1.0


@dataclass(frozen=True)
class SeedPlan:
    """The data one side gets; the same plan on both sides."""

    seed: int = 20260
    events: dict[str, int] = field(
        default_factory=lambda: {
            "token": 1000,
            "user": 1800,
            "project": 1200,
            "trust": 400,
        }
    )
    clock_ahead_seconds: int = 2 * 3600
    services: int = 30
    regions: int = 2
    interfaces: int = 3
    groups: int = 5
    direct_projects: int = 20
    projects_per_group: int = 4
    inherited_domain_role: bool = True
    prefix: str = "rkb-seed-"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.events) - set(EVENT_KINDS))
        if unknown:
            raise ValueError(f"unknown revocation event kind(s): {', '.join(unknown)}")
        sizes = {**self.events, "services": self.services, "groups": self.groups}
        negative = [k for k, v in sizes.items() if v < 0]
        if negative:
            raise ValueError(f"negative size(s): {', '.join(negative)}")
        if not 1 <= self.interfaces <= 3 or self.regions < 1:
            raise ValueError("interfaces must be 1 to 3 and regions at least 1")

    @property
    def revocations(self) -> int:
        """Revocations the plan makes (a revoked token may write two events)."""
        return sum(self.events.values())

    def total_events(self, per_token: int = 1) -> int:
        """Events written when a revoked token writes PER_TOKEN of them."""
        return self.revocations + (per_token - 1) * self.events.get("token", 0)

    @property
    def endpoints(self) -> int:
        return self.services * self.regions * self.interfaces

    @property
    def projects(self) -> int:
        return self.direct_projects + self.groups * self.projects_per_group

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def describe(self) -> str:
        """One line for the gate's output and the report."""
        kinds = ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in self.events.items())
        return (
            f"{self.revocations:,} revocations ({kinds}), "
            f"{self.services} services x {self.regions} regions x {self.interfaces} "
            f"interfaces ({self.endpoints} endpoints), the admin in {self.groups} groups "
            f"with roles on {self.projects} projects"
            + (" and an inherited role on its domain" if self.inherited_domain_role else "")
        )


def from_mapping(values: dict[str, Any]) -> SeedPlan:
    """A plan from JSON-like values (what the seeding script reads)."""
    return SeedPlan(**values)


def busy_cloud_events(rate: float = BUSY_CLOUD_RATE) -> int:
    """Events a cloud revoking RATE tokens a second keeps within the retention."""
    return round(rate * EVENT_RETENTION_SECONDS)


DEFAULT = SeedPlan()
