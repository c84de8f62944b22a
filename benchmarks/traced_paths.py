"""Which of the default gate's requests are traced, and their SQL counts per token path.

    python benchmarks/traced_paths.py [--seconds 18]

One local Keystone as the default gate runs each side: SQLite, memcached,
2 uWSGI workers, Keystone's bcrypt rounds, the gate's ``[auth] methods``
(totp added), tracing on. The paired scenario's own client code
(``KeystoneTokens.paired``: one client per purpose, the path's setup before
the timer) sends each workload's timed requests one after another for
SECONDS (18, as each workload of the gate's default task): issue by
password, rescope, application credential, trust and password + TOTP, then
validate a password and a trust-scoped token. It
prints, per workload, the requests it timed, those the trace store holds
for that workload (every timed request, nothing else), and their SQL
statements per request (lower median, and max); then, pooled per action
as the gate judged before it kept workloads apart, the lower median over
every workload of the action.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from rally_keystone_bench.clients.auth import UserAuth  # noqa: E402
from rally_keystone_bench.clients.pool import shared_client  # noqa: E402
from rally_keystone_bench.deploy import tracing  # noqa: E402
from rally_keystone_bench.deploy.deployment import Deployment  # noqa: E402
from rally_keystone_bench.deploy.keystone import LocalKeystone  # noqa: E402
from rally_keystone_bench.plugins.scenarios import paired  # noqa: E402
from rally_keystone_bench.verdicts import counters  # noqa: E402

METHODS = "external,password,token,oauth1,mapped,application_credential,totp"
ISSUE, VALIDATE = "keystone.issue_token", "keystone.validate_token"
TIMED = contextlib.nullcontext  # a timer: what the scenario's atomic action is to the client


def workloads(ks: LocalKeystone, seconds: float) -> list[dict]:
    """Each workload's timed requests for SECONDS: title, action, starts and durations."""
    cred = ks.admin_credentials
    auth = UserAuth.from_credential(cred)
    issuer = shared_client(cred, purpose="paired-issue", per_thread=False)
    validator = shared_client(cred, purpose="paired-validate", per_thread=False)
    spans = []
    for path in paired.PATHS:
        send = lambda p=path: paired._issue_by(issuer, auth, p, "project", True, TIMED)  # noqa: E731
        spans.append(_timed(f"Issue ({path})", ISSUE, send, seconds))
    for path in ("password", "trust"):
        validator.authorize(auth, scope="project")
        token = paired._issue_by(validator, auth, path, "project", False).token
        send = lambda t=token: validator.validate(t, include_catalog=False, timer=TIMED)  # noqa: E731
        spans.append(_timed(f"Validate ({path})", VALIDATE, send, seconds))
    return spans


def _timed(title: str, action: str, send, seconds: float) -> dict:
    started: list[float] = []
    took: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.time()
        send()
        started.append(t0)
        took.append(time.time() - t0)
    return {"title": title, "action": action, "started": started, "duration": took}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=18.0, help="per workload (default 18)")
    args = parser.parse_args()
    print(f"machine: {_machine.describe()}")
    print(f"load average before: {os.getloadavg()[0]:.2f} (other jobs may be running)")
    dep = Deployment(trace=True, cache="memcached", conf={"auth.methods": METHODS})
    with tempfile.TemporaryDirectory(prefix="traced-paths-") as tmp:
        with LocalKeystone(dep, Path(tmp) / "keystone") as ks:
            with tracing.client_environment(ks.run_dir):
                spans = workloads(ks, args.seconds)
            records = tracing.read_records(ks.run_dir)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    costs = counters.request_costs(records)
    windows = [(s["started"][0], s["started"][-1] + s["duration"][-1]) for s in spans]
    groups = counters.split_by_windows(costs, windows)
    print(f"{len(costs)} traced requests; {sum(len(s['started']) for s in spans)} timed")
    print(f"{'workload':<34} {'timed':>6} {'traced':>7} {'SQL median':>11} {'max':>5}")
    pooled: dict[str, list[int]] = {}
    for span, group in zip(spans, groups, strict=True):
        sql = [c.sql_count for c in group if c.action == span["action"]]
        pooled.setdefault(span["action"], []).extend(sql)
        median = statistics.median_low(sql) if sql else "-"
        print(
            f"{span['title']:<34} {len(span['started']):>6} {len(group):>7} "
            f"{median:>11} {max(sql, default=0):>5}"
        )
    for action, sql in pooled.items():
        print(f"pooled over its workloads: {action} lower median {statistics.median_low(sql)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
