"""How fast can Rally drive the mock? The load generator's own ceiling.

The capacity search trusts a probe only when Rally sent the target rate;
this measures the highest rate it can send on this machine. Against one
mock token service (no service time), it runs:

* Rally: KeystoneTokens.validate under Rally's rps runner and under ours,
  pooled_rps (the capacity probe's task, tasks/capacity-probe.yaml), at a
  target far above what either can reach, with PROCESSES runner processes
  and THREADS iteration slots each;
* a plain Python loop: PROCESSES processes of THREADS threads, each thread
  a requests.Session (kept-alive connection) validating a token with
  GET /v3/auth/tokens in a loop, for the same time: the usual script, and
  the reference of the targets. It runs first and again last; the ratios
  are to the faster of the two runs, so a slow first run cannot flatter
  the others;
* the same loop on TokenClient (the client the Rally scenarios and the
  Locust engine use, with its own HTTP stack): what separates the runner's
  cost from the HTTP stack's;
* Rally again, with Dummy.dummy (no request at all) under each runner:
  the runner's own ceiling on this machine, what no scenario can exceed;
* the Locust engine (engines/locust) with 1 and 2 worker processes, PROCESSES x
  THREADS connections in all, at a target rate far above the plain loop's,
  so every request is due at once and each connection sends back to back
  until the schedule ends;
* wrk, when installed, with THREADS * PROCESSES connections (for reference:
  what the mock serves to a C client).

It prints each rate in validations per second and, at the end, its share
of the plain loop's (the faster of its two runs) and of the TokenClient
loop's, and the generator's CPU-seconds per 1,000 requests: the user+system
CPU time of the generator's own processes (the loop's processes; rally and
its runner processes; the Locust master and workers), read with getrusage
when they have ended. Rally's and Locust's figures include their start-up
(Rally's task validation and plugin loading; Locust's users and token pool),
so they are upper bounds of the per-request cost.

    python benchmarks/generator_ceiling.py [--seconds 15] [--processes 2] [--threads 4]
        [--mock-workers 2] [--runners rps,pooled_rps|none] [--locust-workers 1,2|none]

Its quickest run (the smoke test's: the loops and one Locust run, no Rally)::

    python benchmarks/generator_ceiling.py --seconds 1 --processes 1 --threads 1 \
        --mock-workers 1 --runners none --locust-workers 1
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _machine  # noqa: E402

from rally_keystone_bench.deploy.mock import MockKeystone  # noqa: E402
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec  # noqa: E402
from rally_keystone_bench.shipped import probe_task_path  # noqa: E402
from rally_keystone_bench.verdicts import results  # noqa: E402


def admin_token(ks: MockKeystone) -> str:
    import requests

    c = ks.admin_credentials
    auth = {
        "identity": {
            "methods": ["password"],
            "password": {
                "user": {
                    "name": c["username"],
                    "password": c["password"],
                    "domain": {"name": c["user_domain_name"]},
                }
            },
        },
        "scope": {"project": {"name": c["project_name"], "domain": {"name": "Default"}}},
    }
    resp = requests.post(ks.auth_url + "/auth/tokens?nocatalog", json={"auth": auth}, timeout=30)
    resp.raise_for_status()
    return resp.headers["X-Subject-Token"]


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def per_thousand(cpu: float, requests: int) -> float:
    return 1000.0 * cpu / requests if requests else float("nan")


def locust_rate(
    ks: MockKeystone, work: Path, seconds: float, workers: int, users: int, loop_rate: float
) -> dict:
    """Validations per second and generator CPU of the Locust engine with WORKERS workers."""
    from rally_keystone_bench.engines.locust import engine

    # far above the ceiling: every request is due at once and each connection
    # sends back to back until the schedule's end (what is unsent then is not sent).
    # The engine refuses a rate above its measured ceiling (HOST_CEILING_RPS)
    # unless forced: measuring that ceiling is this benchmark's job, so it forces.
    rate = max(2000.0, 4 * loop_rate)
    settings = engine.LoadSettings(
        scenario="validate",
        rate=rate,
        duration=seconds,
        workers=workers,
        users=users,
        force=True,
    )
    cpu0 = _children_cpu()
    result = engine.run_load(settings, ks.admin_credentials, work / f"locust-{workers}")
    cpu = _children_cpu() - cpu0
    wl = results.load(result.report)[0]
    ends = wl.iteration_started + wl.iteration_duration
    span = float(ends.max() - wl.iteration_started.min())
    return {
        "rate": wl.successful_iterations / span,
        "iterations": wl.iterations,
        "failed": wl.failed_iterations,
        "span": span,
        "cpu": cpu,
    }


def rally_rate(
    ks: MockKeystone,
    work: Path,
    seconds: float,
    processes: int,
    threads: int,
    loop_rate: float,
    runner: str,
) -> dict:
    """Successful KeystoneTokens.validate iterations per second under RUNNER."""
    home = RallyHome(work / "rally")
    if not (work / "rally" / "mock.spec.json").exists():
        home.create_env("mock", keystone_spec(ks.admin_credentials))
        home.check_env("mock")
    concurrency = processes * threads
    # far above the ceiling, so the runner starts iterations as fast as it can;
    # as many as the plain loop did in SECONDS, so the load lasts about that long
    target = TARGET
    args = {
        "scenario": "validate",
        "rps": target,
        "times": max(100, int(loop_rate * seconds)),
        "warmup": 0,
        "window": seconds,
        "max_concurrency": concurrency,
        "max_cpu_count": processes,
        "min_iterations": 3,
        "runner": runner,
    }
    extra = ("--task-args", json.dumps(args), "--abort-on-sla-failure")
    return _measured(home, probe_task_path(), extra, seconds, work / "ceiling.json", runner)


def _measured(
    home: RallyHome, task_file: Path, extra: tuple, seconds: float, out: Path, runner: str
) -> dict:
    """Start TASK_FILE on the mock env; its successful iterations per second of load.

    Under pooled_rps with Rally's per-iteration log lines silenced, as the
    capacity probes run it.
    """
    config = home.quiet_config() if runner == "pooled_rps" else None
    cpu0 = _children_cpu()
    proc = home.rally(
        "task", "start", str(task_file), "--env", "mock", *extra,
        check=False, timeout=seconds * 20 + 300, config=config,
    )  # fmt: skip
    cpu = _children_cpu() - cpu0
    uuid = re.search(r"Task ([0-9a-f-]{36})", proc.stdout)
    if not uuid:
        sys.exit("rally task start failed:\n" + proc.stdout[-3000:] + proc.stderr[-2000:])
    home.rally("task", "report", uuid.group(1), "--json", "--out", str(out))
    wl = results.load(out)[0]
    ends = wl.iteration_started + wl.iteration_duration
    span = float(ends.max() - wl.iteration_started.min())
    return {
        "rate": wl.successful_iterations / span,
        "iterations": wl.iterations,
        "failed": wl.failed_iterations,
        "span": span,
        "cpu": cpu,
    }


def rally_noop_rate(
    work: Path, seconds: float, processes: int, threads: int, times: int, runner: str
) -> dict:
    """Iterations per second of Dummy.dummy (sleep 0) under RUNNER."""
    home = RallyHome(work / "rally")
    task = {
        "version": 2,
        "title": "Rally's own ceiling",
        "subtasks": [
            {
                "title": "Dummy.dummy, no request",
                "scenario": {"Dummy.dummy": {"sleep": 0}},
                "runner": {
                    runner: {
                        "rps": TARGET,
                        "times": times,
                        "max_concurrency": processes * threads,
                        "max_cpu_count": processes,
                    }
                },
            }
        ],
    }
    task_file = work / "noop.json"
    task_file.write_text(json.dumps(task))
    return _measured(home, task_file, (), seconds, work / "noop-report.json", runner)


def _loop_process(
    url: str, auth_url: str, token: str, threads: int, seconds: float, queue, stack: str
) -> None:
    import resource
    import threading

    import requests

    from rally_keystone_bench.clients.tokens import Token, TokenClient

    counts = [0] * threads
    errors = [0] * threads
    start_at = time.monotonic()
    stop_at = start_at + seconds

    def work(i: int) -> None:
        if stack == "tokenclient":
            client = TokenClient(auth_url)
            client.use_auth_token(token)
            subject = Token(token)
            while time.monotonic() < stop_at:
                try:
                    client.validate(subject, include_catalog=False)
                    counts[i] += 1
                except Exception:
                    errors[i] += 1
            return
        session = requests.Session()
        headers = {"X-Auth-Token": token, "X-Subject-Token": token}
        while time.monotonic() < stop_at:
            r = session.get(url, headers=headers)
            if r.status_code == 200:
                counts[i] += 1
            else:
                errors[i] += 1

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    me = resource.getrusage(resource.RUSAGE_SELF)
    queue.put((sum(counts), sum(errors), time.monotonic() - start_at, me.ru_utime + me.ru_stime))


def loop_rate(
    ks: MockKeystone, seconds: float, processes: int, threads: int, stack: str = "requests"
) -> dict:
    """Validations per second of PROCESSES x THREADS kept-alive loops on STACK
    (requests, or tokenclient)."""
    token = admin_token(ks)
    url = ks.auth_url + "/auth/tokens?nocatalog"
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(
            target=_loop_process,
            args=(url, ks.auth_url, token, threads, seconds, queue, stack),
        )
        for _ in range(processes)
    ]
    for p in procs:
        p.start()
    got = [queue.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    ok = sum(g[0] for g in got)
    return {
        "rate": ok / max(g[2] for g in got),
        "errors": sum(g[1] for g in got),
        "requests": ok + sum(g[1] for g in got),
        "cpu": sum(g[3] for g in got),
    }


def _plain(ks: MockKeystone, a: argparse.Namespace, stack: str, name: str) -> dict:
    got = loop_rate(ks, a.seconds, a.processes, a.threads, stack)
    cpu = per_thousand(got["cpu"], got["requests"])
    errors = f" ({got['errors']} errors)" if got["errors"] else ""
    print(f"{name}: {got['rate']:.0f} validations/s, {cpu:.2f} CPU-s per 1,000 requests{errors}")
    return got


def wrk_rate(ks: MockKeystone, seconds: float, connections: int, threads: int) -> float | None:
    """wrk's requests per second against the same URL, or None without wrk."""
    wrk = shutil.which("wrk")
    if not wrk:
        return None
    token = admin_token(ks)
    proc = subprocess.run(
        [wrk, f"-t{threads}", f"-c{connections}", f"-d{int(seconds)}s",
         "-H", f"X-Auth-Token: {token}", "-H", f"X-Subject-Token: {token}",
         ks.auth_url + "/auth/tokens?nocatalog"],
        capture_output=True, text=True, timeout=seconds + 60,
    )  # fmt: skip
    m = re.search(r"Requests/sec:\s+([\d.]+)", proc.stdout)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", proc.stdout)
    if not m or bad:
        print(f"wrk: no usable rate ({proc.stdout.strip().splitlines()[-1:]})")
        return None
    return float(m.group(1))


# Unreachable on a small machine: the runner starts iterations as fast as it can.
TARGET = 100_000
# Share of the plain loop's rate each runner should reach: rps, Rally's own,
# as first measured; pooled_rps, ours, the load generator's target.
RATE_TARGETS = {"rps": 0.7, "pooled_rps": 0.85}

# Rally's stock runner, and ours (rally_keystone_bench/plugins/runners/pooled_rps.py)
RUNNERS = ("rps", "pooled_rps")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--threads", type=int, default=4, help="per process")
    ap.add_argument("--mock-workers", type=int, default=2)
    ap.add_argument(
        "--runners",
        default=",".join(RUNNERS),
        help="Rally runners to measure, comma-separated, or none (default: rps,pooled_rps)",
    )
    ap.add_argument(
        "--locust-workers",
        default="1,2",
        help="Locust engine runs by worker count, comma-separated, or none (default: 1,2)",
    )
    a = ap.parse_args()
    a.runners = [r for r in a.runners.split(",") if r and r != "none"]
    unknown = sorted(set(a.runners) - set(RUNNERS))
    if unknown:
        ap.error(f"--runners: unknown {', '.join(unknown)} (choose from {', '.join(RUNNERS)})")
    try:
        a.locust_workers = [int(w) for w in a.locust_workers.split(",") if w and w != "none"]
    except ValueError:
        ap.error(f"--locust-workers {a.locust_workers}: counts, comma-separated")
    return a


def main() -> int:
    a = parse_args()
    print(f"machine: {_machine.describe()}")
    print(
        f"mock: {a.mock_workers} worker(s), no service time; generators: {a.processes} "
        f"processes x {a.threads} threads, {a.seconds:g} s each"
    )
    with tempfile.TemporaryDirectory(prefix="ks-ceiling-") as tmp:
        work = Path(tmp)
        with MockKeystone(workers=a.mock_workers, run_dir=work / "mock") as ks:
            plains = [_plain(ks, a, "requests", "plain Python keep-alive loop (requests)")]
            client = _plain(ks, a, "tokenclient", "the same loop on TokenClient")
            # sizes the Rally runs (iterations) and the Locust target rate
            fastest = max(plains[0]["rate"], client["rate"])
            rallies = {}
            for runner in a.runners:
                t0 = time.monotonic()
                rally = rally_rate(ks, work, a.seconds, a.processes, a.threads, fastest, runner)
                rallies[runner] = rally
                print(
                    f"Rally {runner} runner, KeystoneTokens.validate: {rally['rate']:.0f} "
                    f"iterations/s ({rally['iterations']} iterations, {rally['failed']} failed, "
                    f"{rally['span']:.1f} s of load; {time.monotonic() - t0:.0f} s with Rally's "
                    "start-up and report), "
                    f"{per_thousand(rally['cpu'], rally['iterations']):.2f} CPU-s per 1,000"
                )
                noop = rally_noop_rate(
                    work, a.seconds, a.processes, a.threads, rally["iterations"], runner
                )
                print(
                    f"  Rally {runner} runner, Dummy.dummy (no request): {noop['rate']:.0f} "
                    f"iterations/s: the runner's own ceiling on this machine"
                )
            locusts = {}
            for workers in a.locust_workers:
                got = locust_rate(ks, work, a.seconds, workers, a.processes * a.threads, fastest)
                locusts[workers] = got
                print(
                    f"Locust engine, {workers} worker(s), {a.processes * a.threads} connections: "
                    f"{got['rate']:.0f} validations/s ({got['iterations']} requests, "
                    f"{got['failed']} failed, {got['span']:.1f} s), "
                    f"{per_thousand(got['cpu'], got['iterations']):.2f} CPU-s per 1,000 "
                    "(master and workers)"
                )
            plains.append(_plain(ks, a, "requests", "plain Python keep-alive loop, again"))
            w = wrk_rate(ks, a.seconds, a.processes * a.threads, a.processes)
            if w is None:
                print("wrk: not installed (apt-get install wrk), skipped")
            else:
                print(f"wrk ({a.processes} threads, {a.processes * a.threads} connections): "
                      f"{w:.0f} requests/s, for reference")  # fmt: skip

    # The verdicts, against the faster plain loop run (the harder reference)
    plain = max(plains, key=lambda p: p["rate"])
    plain_cpu = per_thousand(plain["cpu"], plain["requests"])
    client_cpu = per_thousand(client["cpu"], client["requests"])
    print(
        f"against the faster plain loop ({plain['rate']:.0f} validations/s, "
        f"{plain_cpu:.2f} CPU-s per 1,000; TokenClient loop {client['rate']:.0f}/s, "
        f"{client_cpu:.2f} CPU-s per 1,000):"
    )
    for runner, rally in rallies.items():
        ratio = rally["rate"] / plain["rate"] if plain["rate"] else float("nan")
        own = rally["rate"] / client["rate"] if client["rate"] else float("nan")
        # Rally's own runner is measured for reference; ours has the target.
        goal = RATE_TARGETS[runner]
        verdict = "meets" if ratio >= goal else "below"
        cpu = per_thousand(rally["cpu"], rally["iterations"])
        print(
            f"  Rally {runner}: {ratio:.2f} of the plain loop's rate ({verdict} the {goal:g} "
            f"target), {own:.2f} of the TokenClient loop's; CPU per request "
            f"{cpu / plain_cpu:.2f}x the plain loop's, "
            f"{cpu / client_cpu:.2f}x the TokenClient loop's"
        )
    for workers, got in locusts.items():
        ratio = got["rate"] / plain["rate"] if plain["rate"] else float("nan")
        cpu = per_thousand(got["cpu"], got["iterations"])
        verdict = "meets" if cpu / plain_cpu <= 1.3 else "above"
        print(
            f"  Locust engine, {workers} worker(s): {ratio:.2f} of the plain loop's rate; CPU per "
            f"request {cpu / plain_cpu:.2f}x the plain loop's ({verdict} the 1.3x target), "
            f"{cpu / client_cpu:.2f}x the TokenClient loop's"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
