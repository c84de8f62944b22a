"""Does the uWSGI hook (sized 500s, SQLite BEGIN IMMEDIATE) slow Keystone down?

Starts two local Keystones side by side, one with the hook and one without
(the config before it), and issues password tokens at concurrency 4 in
alternating rounds, so both see the same machine load. Prints the mean and
median client-side latency of each and the machine.

    python benchmarks/uwsgi_hook_ab.py [ROUNDS] [PER_ROUND]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe  # noqa: E402

from rally_keystone_bench.deploy import servers  # noqa: E402
from rally_keystone_bench.deploy.deployment import Deployment  # noqa: E402
from rally_keystone_bench.deploy.keystone import LocalKeystone  # noqa: E402


def _uwsgi_config_without_hook(site: servers.Site) -> str:
    lines = _uwsgi_config(site).splitlines()
    return "\n".join(x for x in lines if not x.startswith(("pythonpath =", "import =")))


_uwsgi_config = servers.uwsgi_config


class WithoutHook(LocalKeystone):
    """The config before the hook: uWSGI serves keystone.wsgi.api directly."""

    def _start_server(self) -> None:
        servers.uwsgi_config = _uwsgi_config_without_hook
        try:
            super()._start_server()
        finally:
            servers.uwsgi_config = _uwsgi_config


def _token(ks: LocalKeystone, password: str) -> float:
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {"name": "admin", "domain": {"name": "Default"}, "password": password}
                },
            },
            "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}},
        }
    }
    req = urllib.request.Request(
        ks.auth_url + "/auth/tokens?nocatalog",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    started = time.perf_counter()
    with urllib.request.urlopen(req, timeout=60) as resp:
        resp.read()
        assert resp.status == 201
    return time.perf_counter() - started


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    per_round = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    base = tempfile.mkdtemp(prefix="uwsgi-hook-ab-")
    keystones = {
        "hook": LocalKeystone(Deployment(), f"{base}/hook"),
        "no-hook": WithoutHook(Deployment(), f"{base}/no-hook"),
    }
    times: dict[str, list[float]] = {name: [] for name in keystones}
    try:
        for ks in keystones.values():
            ks.start()
        with ThreadPoolExecutor(4) as pool:
            for _ in range(rounds):
                for name, ks in keystones.items():
                    pw = ks.admin_password
                    times[name] += pool.map(lambda _i, k=ks, p=pw: _token(k, p), range(per_round))
    finally:
        for ks in keystones.values():
            ks.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"machine: {describe()}")
    print(f"load average now: {os.getloadavg()[0]:.1f}")
    for name, values in times.items():
        print(
            f"{name:8s} tokens={len(values)} mean={statistics.mean(values) * 1000:.0f} ms "
            f"median={statistics.median(values) * 1000:.0f} ms max={max(values) * 1000:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
