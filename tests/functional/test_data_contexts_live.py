"""The data-size contexts under the real rally CLI and a real Keystone.

A test-only scenario writes Keystone's full inventory while the contexts'
data exists; it is compared with the inventory before the task (exactly
what each context says it makes) and after (everything gone again, but the
revocation events, which no API deletes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver.rally import UUID_RE, RallyHome, keystone_spec

pytestmark = pytest.mark.functional

PLUGINS = Path(__file__).parent / "plugins"
ROUNDS = 4

USERS = {
    "keystone_tenants": {"tenants": 2, "resource_management_workers": 4},
    "keystone_users": {"users_per_tenant": 2, "resource_management_workers": 4},
}


@pytest.fixture(scope="module")
def ks(tmp_path_factory):
    keystone = LocalKeystone(
        Deployment(workers=2, password_hash_rounds=ROUNDS), tmp_path_factory.mktemp("ks")
    )
    keystone.start()
    try:
        yield keystone
    finally:
        keystone.stop()


@pytest.fixture(scope="module")
def rh(ks, tmp_path_factory):
    home = RallyHome(tmp_path_factory.mktemp("rally"))
    home.create_env("ks", keystone_spec(ks.admin_credentials))
    home.check_env("ks")
    return home


def take_inventory(ks) -> dict[str, set[str]]:
    import sys

    sys.path.insert(0, str(PLUGINS))
    try:
        from ktb_inventory import inventory
    finally:
        sys.path.remove(str(PLUGINS))
    creds = dict(ks.admin_credentials)
    return {k: set(v) for k, v in inventory(creds["auth_url"], creds).items()}


def run_inventory_task(rh, tmp_path: Path, contexts: dict) -> tuple[dict[str, set[str]], str]:
    """Run KtbTest.inventory once under CONTEXTS; (the inventory it took, rally's output)."""
    during = tmp_path / "during.json"
    task = {
        "version": 2,
        "title": "data contexts",
        "subtasks": [
            {
                "title": "inventory",
                "workloads": [
                    {
                        "scenario": {"KtbTest.inventory": {"path": str(during)}},
                        "runner": {"constant": {"times": 1, "concurrency": 1}},
                        "contexts": contexts,
                    }
                ],
            }
        ],
    }
    path = tmp_path / "task.json"
    path.write_text(json.dumps(task))
    proc = rh.rally(
        "--plugin-paths",
        str(PLUGINS),
        "task",
        "start",
        "--env",
        "ks",
        str(path),
        check=False,
        timeout=600,
    )
    output = proc.stdout + proc.stderr
    uuid = UUID_RE.search(output).group(0)
    report = tmp_path / "report.json"
    rh.rally("task", "report", uuid, "--json", "--out", str(report))
    wl = json.loads(report.read_text())["tasks"][0]["subtasks"][0]["workloads"][0]
    errors = [c for c in wl["contexts_results"] if c["setup"]["error"] or c["cleanup"]["error"]]
    assert not errors, json.dumps(errors)[:2000]
    assert during.exists(), output[-3000:]
    return {k: set(v) for k, v in json.loads(during.read_text()).items()}, output


def added(during: dict[str, set[str]], before: dict[str, set[str]]) -> dict[str, int]:
    return {k: len(during[k] - before[k]) for k in during if during[k] - before[k]}


def audit_events(events: set[str]) -> int:
    """Events by a token's audit id or chain: the kind revocation_events makes (Rally's
    task validation, with its temporary user and project, makes others)."""
    return sum(1 for e in map(json.loads, events) if e.get("audit_id") or e.get("audit_chain_id"))


def test_each_context_makes_exactly_what_it_says_and_removes_it(ks, rh, tmp_path):
    before = take_inventory(ks)
    contexts = {
        **USERS,
        "keystone_project_tree": {"depth": 3},
        "keystone_roles": {"roles_per_user": 2, "resource_management_workers": 4},
        "keystone_groups": {"groups_per_user": 2, "roles_per_group": 1},
        "keystone_catalog": {"services": 2, "regions": 2, "interfaces": 2},
        "revocation_events": {"events": 30, "resource_management_workers": 4},
    }
    during, output = run_inventory_task(rh, tmp_path, contexts)
    assert added(during, before) == {
        "projects": 2 + 2,  # the chain above the users' projects, and theirs
        "users": 4,
        "roles": 2 + 1,
        "groups": 2,
        "services": 2,
        "regions": 2,
        "endpoints": 2 * 2 * 2,
        # member on their project, 2 direct each, 1 per group on each project
        "role_assignments": 4 + 4 * 2 + 2 * 2,
        "memberships": 2 * 4,
        "revocation_events": added(during, before)["revocation_events"],
    }
    created = audit_events(during["revocation_events"] - before["revocation_events"])
    assert 30 <= created <= 31  # Keystone 30 writes two per revoked token
    assert f"revocation_events: events 30, created {created}, tokens revoked" in output
    # the users' projects hang below the chain's last project, at depth 3
    new = {p.split(":")[0]: p.split(":")[1] for p in during["projects"] - before["projects"]}

    def depth(pid: str) -> int:
        return 1 + depth(new[pid]) if new[pid] in new else 1

    assert sorted(depth(p) for p in new) == [1, 2, 3, 3]
    assert "keystone_catalog: services 2, regions 2, interfaces 2, endpoints 8" in output

    after = take_inventory(ks)
    events = after.pop("revocation_events")
    during_events = during.pop("revocation_events")
    before.pop("revocation_events")
    assert after == before
    # no API deletes an event: they stay, and deleting groups writes more
    assert during_events <= events


def test_revocation_events_reuse_counts_the_events_already_there(ks, rh, tmp_path):
    have = len(take_inventory(ks)["revocation_events"])
    contexts = {"revocation_events": {"events": have, "reuse": True}}
    during, output = run_inventory_task(rh, tmp_path, contexts)
    assert f"revocation_events: events {have}, created 0, tokens revoked 0" in output
