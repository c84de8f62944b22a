"""capacity on either engine finds the mock's known N; both engines agree on a real Keystone."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rally_keystone_bench import procstat, shipped
from rally_keystone_bench.clients.tokens import TokenClient, UserAuth
from rally_keystone_bench.driver import probe_args, task_reports
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.rally import keystone_spec
from rally_keystone_bench.engines.locust import engine
from rally_keystone_bench.verdicts import capacity, results

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # serial: it compares latencies

# the 50-rps mock (1 worker, 20 ms a request), searched in a narrow range to stay short
SEARCH = ["--scenario", "validate", "--target", "mock", "--mock-workers", "1",
          "--mock-service-time", "20", "--low", "30", "--high", "70", "--precision", "2",
          "--warmup", "3", "--window", "10"]  # fmt: skip


def search(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    """keystone-bench capacity on the mock with SEARCH: its output and capacity.json."""
    proc = subprocess.run(
        [sys.executable, "-m", "rally_keystone_bench.cli", "capacity", *SEARCH, *extra,
         "--reports-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (summary,) = Path(tmp_path).glob("*/capacity.json")
    found = json.loads(summary.read_text())
    assert found["result"]["status"] == "found", found["result"]
    return proc, found


def test_capacity_on_locust_and_on_rally_find_the_mock_n(tmp_path):
    """The 50-rps mock searched in [30, 70] at precision 2 with 3 + 10 s probes: Locust's
    N within 10 % of 50, Rally's within 10 % of Locust's and in [40, 54] rps.

    Slack: with 10 + 30 s probes on an idle machine Locust found 50 and Rally 49
    (doc/source/engines.rst), with 3 + 8 s probes at load 6.6 Rally found 50 twice
    (capacity.rst): 0 to 2 % off, against a band of two grid steps either way.

    The Rally search also carries what tests/functional/test_capacity_live.py checked
    of a search (it ran one more Rally search, of 95 s, in ``tox``'s serial part,
    until 2026-11-28): the ramp that brackets N, the confirmations, nothing passing
    past capacity, the report and the progress lines."""
    _, locust = search(tmp_path / "locust", "--engine", "locust", "--locust-workers", "2")
    n_locust = float(locust["result"]["n_rps"])
    assert n_locust == pytest.approx(50, rel=0.10)
    proc, summary = search(tmp_path / "rally", "--engine", "rally")
    n = float(summary["result"]["n_rps"])
    assert n == pytest.approx(n_locust, rel=0.10)
    # N in [40, 54] rps, nothing at 56 rps or more passes, passing probes sent >= 95 %:
    # the mock cannot serve over 50, so the band is 20 % below it and 8 % above; 95 %
    # is where the judge calls a probe generator-limited.
    assert 40 <= n <= 54, proc.stdout
    assert f"N = {n:g} rps" in proc.stdout
    probes = summary["probes"]
    # one ramp through the range brackets N (its steps judged one by one) ...
    ramp = [p for p in probes if p["number"] == 1]
    assert [p["rps"] for p in ramp[:4]] == [30, 34, 38, 42]
    assert all(p["role"] == f"ramp {i}/11" for i, p in enumerate(ramp, 1))
    assert not ramp[-1]["passed"] and probes[len(ramp)]["number"] == 2
    # ... and the search ends by confirming N and N + precision
    assert [p["role"] for p in probes[-2:]] == ["confirm N", "confirm N+1"]
    assert not any(p["passed"] for p in probes if p["rps"] >= 56)  # 12 % past capacity
    assert all(p["sent_rate"] >= 0.95 * p["rps"] for p in probes if p["passed"])
    html = next((tmp_path / "rally").glob("*/capacity.html")).read_text()
    # latency against rate, sent against target, then latency over time at N and N + 1
    assert html.count("<svg") == 4 and f"N = {n:g} rps" in html
    assert "(confirm N)" in html and "(confirm N+1)" in html
    # progress on the terminal: probe k of about M, the rate and the verdict so far
    assert "probe 1 of about " in proc.stderr
    assert "rps so far" in proc.stderr
    # 30 rps for 5 s holds 150 requests: every ramp step is judged by its slope too
    assert "70 rps, 5 s a step, after 3 s of warm-up" in proc.stderr
    # every probe sampled the machine; the mock keeps no access log for Keystone's side
    assert all(p["other_cpu"] is not None and p["steal"] is not None for p in probes)
    assert all(p["server_p95"] is None for p in probes)
    assert "n_spread_rps" in summary["result"]


def test_both_engines_measure_the_same_issue_latency(small_keystone, tmp_path):
    """Both engines at once on the 1-worker, 4-round Keystone, at 55 and 45 % of a rate
    that keeps it under half busy: the p50 of keystone.issue_token from Locust and from
    Rally's pooled_rps agree within 10 %, on the clients and in Keystone's own log.

    The rate is 5 rps, or less where this machine's Keystone is slower: a fixed
    5 rps assumed about 60 ms a token (AMD EPYC); on a fresh Intel Xeon of the same
    kind, idle, Keystone spent 180 to 196 ms on each, was 91 to 99 % busy, and the
    clients measured its queue (343 against 297 ms). calibrated_rate() times 12
    serial tokens first, on the pinned Keystone, and aims at 40 % busy.

    Slack: Keystone's own p50 moves 16 to 21 % from one block of tokens to the next
    on these machines (benchmarks/keystone_block_noise.py, the admin's token 40 at a
    time: 115.7 to 135.0 ms, idle Intel Xeon, 2026-11-28), so engines measured one
    after the other differed by up to 10 % in Keystone's own time with no difference
    in their requests (doc/source/engines.rst). Side by side, both engines' requests
    meet the same Keystone at the same moments: in ten runs on that Xeon the two
    agreed within 3.5 % in Keystone's own time and 3.9 % on the clients. At load 11
    to 18 (engines in turn) Keystone saturated and 8 of 9 runs failed.
    """
    keystone = small_keystone
    # Keystone on one core, both generators on the other, so that the
    # generators' own CPU does not slow the server they measure.
    restore = os.sched_getaffinity(0)
    cpus = sorted(restore)
    if len(cpus) < 2:
        pytest.skip("needs two cores: one for Keystone, one for the load generator")
    for pid in keystone_pids(keystone):
        os.sched_setaffinity(pid, {cpus[-1]})
    os.sched_setaffinity(0, set(cpus[:-1]))  # inherited by Locust and Rally
    try:
        measure_both(keystone, tmp_path, calibrated_rate(keystone))
    finally:
        os.sched_setaffinity(0, restore)
        for pid in keystone_pids(keystone):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(pid, restore)


def keystone_pids(keystone) -> set[int]:
    """Every process of the Keystone: its servers and all below them (uWSGI's workers)."""
    return procstat.tree_pids(keystone.pids.values())


def server_p50(access_log: Path, start: float, end: float) -> float | None:
    """Keystone's own p50 time for a token issue between two wall-clock times (s)."""
    spent = []
    for line in access_log.read_text().splitlines():
        f = line.split()  # epoch ms, method, path, status, server microseconds, pid
        if len(f) >= 5 and f[1] == "POST" and f[2].startswith("/v3/auth/tokens"):
            if start * 1000 <= float(f[0]) <= end * 1000:
                spent.append(int(f[4]) / 1e6)
    return float(np.median(spent)) if spent else None


def server_busy(access_log: Path, start: float, end: float) -> float:
    """The share of START..END Keystone spent serving requests (1.0: saturated, it queued)."""
    spent = 0
    for line in access_log.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and start * 1000 <= float(f[0]) <= end * 1000:
            spent += int(f[4])
    return spent / 1e6 / (end - start)


BUSY_AIM = 0.4  # the share of Keystone's core the load may take: no queue to speak of
MAX_RATE = 5.0  # rps: enough samples in 30 s where Keystone is fast


def calibrated_rate(keystone, tokens: int = 12) -> float:
    """The rate that keeps KEYSTONE about BUSY_AIM busy: 12 serial password tokens
    (the admin's, with the catalog), timed by Keystone's own access log."""
    client = TokenClient(keystone.auth_url)
    auth = UserAuth.from_credential(keystone.admin_credentials)
    client.issue(auth)  # the connection, and the admin's first token of the day
    start = time.time()
    for _ in range(tokens):
        client.issue(auth)
    spent = server_p50(keystone.access_log_path, start, time.time())
    assert spent, "no token request in Keystone's access log"
    rate = min(MAX_RATE, round(BUSY_AIM / spent, 1))
    print(f"Keystone's own p50 for a serial token: {spent * 1000:.1f} ms; rate {rate:g} rps")
    return rate


RALLY_LEAD = 30.0  # s: Rally's window runs this much longer, for Locust's setup to fit in it
SHARE = {"locust": 0.55, "rally": 0.45}  # of the rate: unequal, so that the two never lock in step
QUEUED_S = 0.010  # s from a client's send to Keystone's start: beyond it, the request waited
MATCH_S = 0.015  # s between a request's answer on the client and its line's end


def measure_both(keystone, tmp_path: Path, rate: float) -> None:
    """Rally and Locust at once, at 45 and 55 % of RATE, compared over the time both timed.

    Rally starts first; once its first iteration is done Locust starts, and
    its timed window (about SECONDS) falls inside Rally's, which lasts
    RALLY_LEAD seconds longer. Only the requests sent inside both windows
    count. Keystone's access log does not say who sent a request: each of
    its token lines is given to the client request that got its answer
    within MATCH_S of the line's end (one uWSGI worker ends one request at
    a time, a service time apart).

    Two constant schedules at one rate lock in step: in a first try at 2.5
    rps each, every Rally request came just after a Locust one and waited
    for it (client p50 161.9 ms on Rally, 108.4 on Locust; Keystone's own
    102.3 and 107.3). At 45 and 55 % the two drift past each other every
    few seconds, and a request that found Keystone busy with the other
    engine's (it started more than QUEUED_S after its send) is left out on
    both sides: what is compared is a request that met an idle Keystone.
    """
    seconds = max(60.0, round(300 / rate))  # about 100 requests an engine that did not wait
    rates = {name: round(rate * share, 2) for name, share in SHARE.items()}
    from rally_keystone_bench.driver.rally import RallyHome

    home = RallyHome(tmp_path / "rally")
    home.create_env("both", keystone_spec(keystone.admin_credentials))
    cap = capacity.Settings(
        scenario="authenticate", low=rates["rally"], high=rates["rally"], warmup=5,
        window=seconds + RALLY_LEAD, max_slope=1e6, precision=1, abort_on_sla_failure=False,
    )  # fmt: skip
    rally_started = threading.Event()
    rally: dict[str, object] = {}

    def watch(run, line):
        if run.counts.started or run.counts.done:
            rally_started.set()

    def run_rally():
        try:
            rally["run"] = rally_task.start_task(
                home, "both", shipped.probe_task_path(), probe_args.task_args(cap, rates["rally"]),
                tmp_path / "rally.log", config=home.quiet_config(), watch=watch,
            )  # fmt: skip
        except BaseException as exc:  # raised again in the test's thread
            rally["error"] = exc
        finally:
            rally_started.set()

    thread = threading.Thread(target=run_rally)
    thread.start()
    try:
        assert rally_started.wait(300), "Rally's load did not start within 5 minutes"
        if "error" in rally:
            raise rally["error"]
        assert not rally, f"Rally ended before its load: {tmp_path / 'rally.log'}"
        settings = engine.LoadSettings(
            scenario="authenticate", rate=rates["locust"], duration=seconds, warmup=5, workers=1
        )
        locust = engine.run_load(settings, keystone.admin_credentials, tmp_path / "locust")
    finally:
        thread.join()
    if "error" in rally:
        raise rally["error"]
    run = rally["run"]
    assert run.uuid and task_reports.json_report(home, run.uuid, tmp_path / "rally.json")
    sent = {"locust": _issues(locust.report), "rally": _issues(tmp_path / "rally.json")}
    lo = max(float(s.min()) for s, _ in sent.values())
    hi = min(float((s + d).max()) for s, d in sent.values())
    assert hi - lo >= 0.75 * seconds, f"the engines timed together for {hi - lo:.0f} s only"
    kept = {name: _inside(*sd, lo, hi) for name, sd in sent.items()}
    matched = match_server_times(keystone.access_log_path, kept)
    idle = {}
    for name, (s, _) in kept.items():
        m = matched[name]
        assert len(m) >= 0.9 * len(s), (
            f"{name}: only {len(m)} of its {len(s)} requests found in Keystone's log"
        )
        idle[name] = [(d, spent) for wait, spent, d in m if wait <= QUEUED_S]
        assert len(idle[name]) >= 0.5 * len(m), (
            f"{name}: {len(m) - len(idle[name])} of {len(m)} requests waited for Keystone"
        )
    client_p50 = {name: float(np.median([d for d, _ in xs])) for name, xs in idle.items()}
    server_p50s = {name: float(np.median([sp for _, sp in xs])) for name, xs in idle.items()}
    ms = {name: f"{v * 1000:.1f} ms" for name, v in client_p50.items()}
    server_ms = {name: f"{v * 1000:.1f} ms" for name, v in server_p50s.items()}
    seen = (
        f"side by side for {hi - lo:.0f} s, Locust at {rates['locust']:g} rps, Rally at "
        f"{rates['rally']:g}: p50 locust {ms['locust']}, rally {ms['rally']} "
        f"(of {len(idle['locust'])} and {len(idle['rally'])} requests that met an idle "
        f"Keystone, of {len(matched['locust'])} and {len(matched['rally'])}); Keystone's own "
        f"p50 (access log) for Locust's {server_ms['locust']}, for Rally's {server_ms['rally']}; "
        f"Keystone busy {server_busy(keystone.access_log_path, lo, hi):.0%}"
    )
    print(seen)
    assert client_p50["locust"] == pytest.approx(client_p50["rally"], rel=0.10), seen
    assert server_p50s["locust"] == pytest.approx(server_p50s["rally"], rel=0.10), seen


def _issues(report: Path) -> tuple[np.ndarray, np.ndarray]:
    """The sends (epoch s) and durations of the report's successful token issues."""
    (wl,) = results.load(report)
    issue = wl.actions["keystone.issue_token"]
    return issue.started_at[~issue.failed], issue.duration[~issue.failed]


def _inside(started, duration, lo: float, hi: float):
    keep = (started >= lo) & (started + duration <= hi)
    return started[keep], duration[keep]


def match_server_times(access_log: Path, kept) -> dict[str, list[tuple[float, float, float]]]:
    """(wait before Keystone started it, Keystone's own time, the client's) of each
    kept request found in Keystone's access log, by engine."""
    answers = sorted(
        (float(s + d), float(s), float(d), name) for name, (ss, dd) in kept.items()
        for s, d in zip(ss, dd, strict=True)
    )  # fmt: skip
    times = np.array([a[0] for a in answers])
    out: dict[str, list[tuple[float, float, float]]] = {name: [] for name in kept}
    for line in access_log.read_text().splitlines():
        f = line.split()  # epoch ms at the start, method, path, status, microseconds, pid
        if len(f) < 5 or f[1] != "POST" or not f[2].startswith("/v3/auth/tokens"):
            continue
        began, spent = float(f[0]) / 1000, int(f[4]) / 1e6
        i = int(np.searchsorted(times, began + spent))
        near = [j for j in (i - 1, i) if 0 <= j < len(times)]
        near = [j for j in near if abs(times[j] - began - spent) <= MATCH_S]
        if len(near) == 1:
            _, sent, duration, name = answers[near[0]]
            out[name].append((began - sent, spent, duration))
    return out
