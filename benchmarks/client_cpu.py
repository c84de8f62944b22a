"""Client CPU per token validation, by HTTP stack: what one request costs the generator.

Against one mock token service (1 worker, no service time), one thread
validates the same token N times (after 200 warm-up requests) with each of:

* TokenClient, as the Rally scenarios use it: its DirectSession (urllib3);
* TokenClient on a keystoneauth1 session over requests (what it uses when a
  proxy applies, and what it used for every request before);
* a plain ``requests.Session().get`` (the usual script; it reads the
  environment for every request);
* urllib3's connection pool and http.client alone, for reference.

It prints the process's user+system CPU per request (getrusage) and the
wall time per request (which includes the mock's answer). The mock runs
in other processes: its CPU is not counted.

    python benchmarks/client_cpu.py [--requests 3000]
"""

from __future__ import annotations

import argparse
import http.client
import resource
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _machine  # noqa: E402
from generator_ceiling import admin_token  # noqa: E402

from rally_keystone_bench.clients import session as client_session  # noqa: E402
from rally_keystone_bench.clients.tokens import Token, TokenClient  # noqa: E402
from rally_keystone_bench.deploy.mock import MockKeystone  # noqa: E402

WARMUP = 200


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(call: Callable[[], object], n: int) -> tuple[float, float]:
    """(CPU us, wall us) per call of CALL, after WARMUP calls."""
    for _ in range(WARMUP):
        call()
    cpu0, wall0 = _cpu(), time.perf_counter()
    for _ in range(n):
        call()
    return 1e6 * (_cpu() - cpu0) / n, 1e6 * (time.perf_counter() - wall0) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=3000)
    a = ap.parse_args()
    if a.requests < 1:
        print("client_cpu.py: --requests must be at least 1", file=sys.stderr)
        return 2
    print(f"machine: {_machine.describe()}")
    print(f"mock: 1 worker, no service time; {a.requests} validations per stack, one thread")
    import requests
    import urllib3

    with tempfile.TemporaryDirectory(prefix="ks-client-cpu-") as tmp:
        with MockKeystone(workers=1, run_dir=Path(tmp) / "mock") as ks:
            value = admin_token(ks)
            token = Token(value)
            headers = {"X-Auth-Token": value, "X-Subject-Token": value}
            url = ks.auth_url + "/auth/tokens?nocatalog"
            parts = urllib.parse.urlsplit(url)
            path = f"{parts.path}?{parts.query}"

            direct = TokenClient(ks.auth_url)
            assert isinstance(direct.session, client_session.DirectSession)
            direct.use_auth_token(value)
            stacked = TokenClient(ks.auth_url, session=client_session.build(ks.auth_url))
            stacked.use_auth_token(value)
            plain = requests.Session()
            pool = urllib3.HTTPConnectionPool(parts.hostname, parts.port, maxsize=1)
            conn = http.client.HTTPConnection(parts.hostname, parts.port)

            def raw() -> None:
                conn.request("GET", path, headers=headers)
                conn.getresponse().read()

            stacks = [
                ("TokenClient.validate, DirectSession (urllib3)",
                 lambda: direct.validate(token, include_catalog=False)),
                ("TokenClient.validate, keystoneauth + requests",
                 lambda: stacked.validate(token, include_catalog=False)),
                ("requests.Session().get (a plain script)",
                 lambda: plain.get(url, headers=headers)),
                ("urllib3 connection pool alone",
                 lambda: pool.urlopen("GET", path, headers=headers, retries=False)),
                ("http.client alone", raw),
            ]  # fmt: skip
            for name, call in stacks:
                cpu, wall = measure(call, a.requests)
                print(f"{name:48} {cpu:6.0f} us CPU, {wall:6.0f} us wall per request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
