"""keystone_catalog: a service catalog of services x regions x interfaces endpoints."""

from __future__ import annotations

from typing import Any

from rally import consts
from rally.task import context

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.plugins.contexts import _base, _sized

INTERFACES = ("public", "internal", "admin")


@context.configure(name="keystone_catalog", platform="openstack", order=109)
class KeystoneCatalog(_sized.SizedContext):
    """Adds `services` services, each with an endpoint per region and interface.

    `regions` new regions; `interfaces` is how many of public, internal and
    admin each service gets (default 3): services x regions x interfaces
    endpoints in every token with a catalog. Cleanup deletes the services
    (and so their endpoints), then the regions.
    """

    CONFIG_SCHEMA = {
        "type": "object",
        "$schema": consts.JSON_SCHEMA,
        "properties": {
            "services": {**_sized.SIZE_SCHEMA, "description": "Services added (default 0)."},
            "regions": {"type": "integer", "minimum": 1, "description": "Regions (default 1)."},
            "interfaces": {
                "type": "integer",
                "minimum": 1,
                "maximum": 3,
                "description": "Interfaces per service and region, of public, internal, "
                "admin (default 3).",
            },
            "resource_management_workers": _base.WORKERS_SCHEMA,
        },
        "additionalProperties": False,
    }

    DEFAULT_CONFIG = {
        "services": 0,
        "regions": 1,
        "interfaces": 3,
        "resource_management_workers": _admin.DEFAULT_WORKERS,
    }

    def build(self) -> dict[str, Any]:
        prefix = self.run_prefix()
        services = self.config["services"]
        region_ids = [
            f"{prefix}region{i:02d}" for i in range(self.config["regions"] if services else 0)
        ]
        self.parallel(lambda r: self.new("regions", {"id": r}, r), region_ids, "create regions")
        names = [f"{prefix}svc{i:03d}" for i in range(services)]
        made = self.parallel(
            lambda n: self.new("services", {"name": n, "type": n, "enabled": True}, n),
            names,
            "create services",
        )
        interfaces = INTERFACES[: self.config["interfaces"]]
        endpoints = [
            {
                "service_id": s["id"],
                "region_id": r,
                "interface": i,
                "url": f"http://{s['name']}.{r}.{i}.invalid:8080/v1",
            }
            for s in made
            for r in region_ids
            for i in interfaces
        ]
        self.parallel(lambda e: self.new("endpoints", e, ""), endpoints, "create endpoints")
        return {
            "services": len(made),
            "regions": len(region_ids),
            "interfaces": len(interfaces),
            "endpoints": len(endpoints),
        }
