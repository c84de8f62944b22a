"""LDAP pools off against on, interleaved: one password token from each Keystone in turn.

Two local Keystones on LDAP (pools off, pools on; same workers, same kind of
directory) run side by side, and one LDAP user's project-scoped password
tokens are requested from each in turn, one at a time, N times. Interleaving
puts both under the same machine load, so their ratio holds on a shared
machine where a run of one and then the other would not. Prints p50/p90 per
token, the time for N tokens in a row, and the LDAP connections each slapd
accepted during the load.

    python benchmarks/ldap_pools_ab.py [N] [--tls] [--workers W]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import tempfile
import time
from pathlib import Path

import requests
from _machine import describe

from rally_keystone_bench.clients.auth import UserAuth
from rally_keystone_bench.clients.tokens import TokenClient
from rally_keystone_bench.deploy import directory
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone


def project_token_body(ks: LocalKeystone, user: dict, project: str) -> dict:
    return {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {
                        "name": user["name"],
                        "domain": {"name": "LDAP"},
                        "password": user["password"],
                    }
                },
            },
            "scope": {"project": {"name": project, "domain": {"name": "Default"}}},
        }
    }


def admin_session(ks: LocalKeystone) -> requests.Session:
    result = TokenClient(ks.auth_url).issue(UserAuth.from_credential(ks.admin_credentials))
    if result.token is None:
        raise SystemExit(f"the admin could not authenticate: HTTP {result.status}")
    s = requests.Session()
    s.headers["X-Auth-Token"] = result.token.value
    return s


def grant_project(ks: LocalKeystone, user_name: str) -> str:
    """A project with the member role for the LDAP user (the run's Keystone is torn down)."""
    s = admin_session(ks)
    domain = s.get(ks.auth_url + "/domains", params={"name": "LDAP"}).json()["domains"][0]
    user = s.get(ks.auth_url + "/users", params={"name": user_name, "domain_id": domain["id"]})
    user_id = user.json()["users"][0]["id"]
    project = s.post(ks.auth_url + "/projects", json={"project": {"name": "ab"}}).json()["project"]
    role = s.get(ks.auth_url + "/roles", params={"name": "member"}).json()["roles"][0]
    url = f"{ks.auth_url}/projects/{project['id']}/users/{user_id}/roles/{role['id']}"
    s.put(url).raise_for_status()
    return project["name"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int, nargs="?", default=100)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ldap-ab-", dir="/tmp"))
    root.chmod(0o755)
    sides = {}
    try:
        for name, pool in (("pools off", False), ("pools on", True)):
            dep = Deployment(
                identity="ldap", ldap_pool=pool, ldap_tls=args.tls, workers=args.workers
            )
            ks = LocalKeystone(dep, root / name.replace(" ", "-"))
            sides[name] = ks
            ks.start()
        users, bodies, sessions, times = {}, {}, {}, {}
        for name, ks in sides.items():
            users[name] = json.loads(ks.directory_users_path.read_text())["users"][0]
            project = grant_project(ks, users[name]["name"])
            bodies[name] = project_token_body(ks, users[name], project)
            sessions[name] = requests.Session()
            times[name] = []
            assert sessions[name].post(ks.auth_url + "/auth/tokens", json=bodies[name]).ok
        window = {name: [time.time(), 0.0] for name in sides}
        for _ in range(args.n):
            for name, ks in sides.items():
                t0 = time.perf_counter()
                r = sessions[name].post(ks.auth_url + "/auth/tokens", json=bodies[name])
                times[name].append(time.perf_counter() - t0)
                assert r.status_code == 201, r.status_code
        for name in sides:
            window[name][1] = time.time()
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        print(f"# {describe()}; {stamp}")
        print(
            f"# {args.n} project-scoped password tokens for one LDAP user from each Keystone,"
            f" interleaved; uWSGI {args.workers} workers, {'ldaps' if args.tls else 'ldap'}"
        )
        print(f"{'':<10} {'p50 ms':>8} {'p90 ms':>8} {'sum s':>8} {'ldap conns':>11}")
        for name, ks in sides.items():
            t = sorted(times[name])
            p50, p90 = statistics.median(t) * 1000, t[int(0.9 * len(t))] * 1000
            conns = directory.count_accepts(ks.run_dir / "ldap" / "slapd.log", *window[name])
            print(f"{name:<10} {p50:>8.1f} {p90:>8.1f} {sum(t):>8.1f} {conns:>11}")
        off, on = sum(times["pools off"]), sum(times["pools on"])
        print(f"pools on: {off / on:.2f}x the speed of pools off (sum of token times)")
    finally:
        for ks in sides.values():
            ks.stop()


if __name__ == "__main__":
    main()
