"""Setup time of keystone_users against Rally's stock `users` context, and of a reused run.

Starts one local Keystone (upstream bcrypt rounds unless told otherwise),
then runs the same tiny workload (Dummy.dummy, 1 iteration) with:

  1. keystone_tenants + keystone_users, TENANTS x USERS;
  2. rally-openstack's `users` context, same sizes, same workers;
  3. keystone_users with `reuse: TAG` (first run: creates and keeps);
  4. the same again (second run: finds and reuses).

Setup time is what Rally's JSON report records for the contexts (setup
finished_at - started_at, summed over keystone_tenants and keystone_users).
Targets: ours no slower than Rally's; the reused run's setup within 10 % of
the first run's (read: at most a tenth of it). The tag is deleted at the end
and Keystone's user and project lists are checked to be as they were.

    python benchmarks/context_setup.py [--tenants 4] [--users 25] [--workers 20]
        [--password-hash-rounds R] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe  # noqa: E402

from rally_keystone_bench.clients.admin import AdminClient  # noqa: E402
from rally_keystone_bench.deploy.deployment import Deployment  # noqa: E402
from rally_keystone_bench.deploy.keystone import LocalKeystone  # noqa: E402
from rally_keystone_bench.driver.rally import UUID_RE, RallyHome, keystone_spec  # noqa: E402
from rally_keystone_bench.verbs import cleanup  # noqa: E402


def setup_seconds(rh: RallyHome, work: Path, contexts: dict, label: str) -> float:
    task = {
        "version": 2,
        "title": label,
        "subtasks": [
            {
                "title": label,
                "workloads": [
                    {
                        "scenario": {"Dummy.dummy": {"sleep": 0}},
                        "runner": {"constant": {"times": 1, "concurrency": 1}},
                        "contexts": contexts,
                    }
                ],
            }
        ],
    }
    path = work / f"{label}.json"
    path.write_text(json.dumps(task))
    proc = rh.rally("task", "start", "--env", "ks", str(path), check=False, timeout=3600)
    uuid = UUID_RE.search(proc.stdout + proc.stderr).group(0)
    out = work / f"{label}-report.json"
    rh.rally("task", "report", uuid, "--json", "--out", str(out))
    wl = json.loads(out.read_text())["tasks"][0]["subtasks"][0]["workloads"][0]
    total = 0.0
    for ctx in wl["contexts_results"]:
        for phase in ("setup", "cleanup"):
            if ctx[phase]["error"]:
                raise SystemExit(
                    f"{label}: {ctx['plugin_name']} {phase} failed: {ctx[phase]['error']}"
                )
        total += ctx["setup"]["finished_at"] - ctx["setup"]["started_at"]
    return total


def inventory(admin: AdminClient) -> set:
    out = set()
    for kind in ("users", "projects"):
        _, body = admin.request("GET", f"/{kind}", f"list {kind}")
        out |= {(kind, r["id"], r["name"]) for r in body[kind]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", type=int, default=4)
    ap.add_argument("--users", type=int, default=25, help="users per tenant")
    ap.add_argument("--workers", type=int, default=20, help="resource_management_workers")
    ap.add_argument("--password-hash-rounds", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rkb-context-setup-"))
    os.environ["KEYSTONE_BENCH_REUSE_DIR"] = str(work / "reuse")
    rounds = args.password_hash_rounds
    dep = Deployment(workers=2, password_hash_rounds=rounds)
    print(f"machine: {describe()}")
    print(
        f"keystone: {dep.describe()}, bcrypt rounds {rounds or 'upstream default (12)'}; "
        f"{args.tenants} tenants x {args.users} users, {args.workers} workers"
    )
    with LocalKeystone(dep, work / "keystone") as ks:
        admin = AdminClient(ks.admin_credentials)
        rh = RallyHome(work / "rally")
        rh.create_env("ks", keystone_spec(ks.admin_credentials))
        before = inventory(admin)
        ours_cfg = {
            "keystone_tenants": {
                "tenants": args.tenants,
                "resource_management_workers": args.workers,
            },
            "keystone_users": {
                "users_per_tenant": args.users,
                "resource_management_workers": args.workers,
            },
        }
        rally_cfg = {
            "users": {
                "tenants": args.tenants,
                "users_per_tenant": args.users,
                "resource_management_workers": args.workers,
            }
        }
        ours, stock = [], []
        for i in range(args.repeat):
            ours.append(setup_seconds(rh, work, ours_cfg, f"keystone_users-{i}"))
            stock.append(setup_seconds(rh, work, rally_cfg, f"rally-users-{i}"))
        tag = f"bench{int(time.time())}"
        reuse_cfg = json.loads(json.dumps(ours_cfg))
        reuse_cfg["keystone_users"]["reuse"] = tag
        first = setup_seconds(rh, work, reuse_cfg, "reuse-first")
        second = setup_seconds(rh, work, reuse_cfg, "reuse-second")
        deleted = cleanup.main(argparse.Namespace(reuse=tag, spec=None, run_dir=str(ks.run_dir)))
        left = inventory(admin) - before

    best_ours, best_stock = min(ours), min(stock)
    runs = {
        name: " ".join(f"{s:.2f}" for s in values)
        for name, values in (("ours", ours), ("stock", stock))
    }
    print(f"{'context':<34} {'setup s (each run)':<24} best")
    print(f"{'keystone_tenants+keystone_users':<34} {runs['ours']:<24} {best_ours:.2f}")
    print(f"{'users (rally-openstack)':<34} {runs['stock']:<24} {best_stock:.2f}")
    print(f"{'keystone_users reuse, first run':<34} {first:<24.2f} {first:.2f}")
    print(f"{'keystone_users reuse, second run':<34} {second:<24.2f} {second:.2f}")
    ratio = best_ours / best_stock
    verdict = "met" if ratio <= 1.0 else "MISSED"
    print(f"ours / Rally's: {ratio:.2f}x  (target <= 1.00: {verdict})")
    share = second / first
    verdict = "met" if share <= 0.10 else "MISSED"
    print(f"reused / first setup: {share * 100:.1f} %  (target <= 10 %: {verdict})")
    ours_left = sum(1 for _, _, name in left if name.startswith("rkb-"))
    print(
        f"left behind in Keystone: {ours_left} by our contexts (cleanup --reuse exit {deleted}), "
        f"{len(left) - ours_left} by others (Rally's users context names them c_rally_*)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
