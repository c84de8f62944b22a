"""revocation_events: N revocation events in Keystone before the load starts."""

from __future__ import annotations

from typing import Any

from rally import consts
from rally.common import logging
from rally.task import context

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.clients import revocations
from rally_keystone_bench.plugins.contexts import _base, _sized

LOG = logging.getLogger(__name__)


@context.configure(name="revocation_events", platform="openstack", order=116)
class RevocationEvents(_sized.SizedContext):
    """Makes `events` revocation events by revoking tokens, in parallel.

    It runs after token_pool (order 116), so the pool's tokens are older than
    every event: each validation of a pooled token then has all N events to
    consider, as a cloud's hour-old tokens do (Keystone bug 2081082 lived
    there). One revoked token writes one event (two on Keystone 30, whose
    count may then pass `events` by one). With `reuse: true`, events
    already in Keystone count towards N.
    Keystone has no API that deletes an event: they stay until they expire
    (token expiration + [revoke] expiration_buffer), and cleanup says so.
    """

    CONFIG_SCHEMA = {
        "type": "object",
        "$schema": consts.JSON_SCHEMA,
        "properties": {
            "events": {
                **_sized.SIZE_SCHEMA,
                "description": "Revocation events wanted (default 0).",
            },
            "reuse": {
                "type": "boolean",
                "description": "Count the events already in Keystone towards `events`.",
            },
            "resource_management_workers": _base.WORKERS_SCHEMA,
        },
        "additionalProperties": False,
    }

    DEFAULT_CONFIG = {
        "events": 0,
        "reuse": False,
        "resource_management_workers": _admin.DEFAULT_WORKERS,
    }

    def build(self) -> dict[str, Any]:
        assert self.admin is not None
        admin = self.admin
        wanted = self.config["events"]
        before = revocations.count_events(admin)
        missing = max(0, wanted - before) if self.config["reuse"] else wanted
        revoked, per_token = 0, 0
        if missing:
            # Keystone 30 writes two events per revoked token (its audit id and
            # its chain), older releases one: one probe says which.
            revocations.revoke_one(admin)
            revoked, per_token = 1, max(1, revocations.count_events(admin) - before)
            more = -(-(missing - per_token) // per_token)  # ceil, never negative
            self.parallel(lambda _: revocations.revoke_one(admin), range(more), "revoke tokens")
            revoked += max(0, more)
        after = revocations.count_events(admin)
        return {
            "events": wanted,
            "created": after - before,
            "tokens_revoked": revoked,
            "events_per_token": per_token,
            "events_in_keystone": after,
        }

    def cleanup(self) -> None:
        self.untrack()
        made = (self.bench().get("data", {}).get(self.get_name()) or {}).get("created")
        if made:
            LOG.info(
                f"revocation_events: the {made} events made stay in Keystone until they "
                "expire (no API deletes them)"
            )
