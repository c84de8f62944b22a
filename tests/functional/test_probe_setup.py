"""A validate probe on a real Keystone sends no token issue of its own during the load.

Keystone's access log holds every request with its start time: the
``POST /v3/auth/tokens`` a capacity probe of ``KeystoneTokens.validate``
sends must all start before its first iteration (the contexts' setup), none
in the warm-up and none in the judged window. A token issue costs Keystone
a bcrypt check; one inside the window slows the validations it judges.

The probes of one search share a reuse tag: the second probe's setup issues
none of the pool's tokens again (token_pool's reuse), and, with the admin as
the env's user (rallyenv.admin_user_spec, as capacity's env has it), it makes
no project or user at all: not even Rally's task validation's.
"""

from __future__ import annotations

import json
import secrets
import stat
import time
from pathlib import Path

import pytest

from rally_keystone_bench import procstat, shipped
from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.driver import probe_args, task_reports
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.rally import RallyHome, admin_user_spec, keystone_spec
from rally_keystone_bench.plugins.contexts import reuse
from rally_keystone_bench.verdicts import capacity, results

pytestmark = pytest.mark.functional

RATE, WARMUP, WINDOW = 20.0, 3.0, 8.0


def token_issues(access_log: Path, start: float, end: float, uri="/v3/auth/tokens") -> int:
    """POSTs to URI (token issues) whose request started in [START, END) (epoch seconds)."""
    count = 0
    for line in access_log.read_text().splitlines():
        f = line.split()  # epoch ms, method, uri, status, server microseconds, pid
        if len(f) >= 6 and f[1] == "POST" and f[2].split("?")[0] == uri:
            if start <= int(f[0]) / 1000.0 < end:
                count += 1
    return count


def test_a_validate_probe_issues_no_token_during_its_load(small_keystone, tmp_path):
    keystone = small_keystone
    home = RallyHome(tmp_path / "rally")
    home.create_env("probe", keystone_spec(keystone.admin_credentials))
    settings = capacity.Settings(
        scenario="validate", low=RATE, high=RATE, warmup=WARMUP, window=WINDOW,
        max_slope=1e6, precision=1, abort_on_sla_failure=False,
    )  # fmt: skip
    args = probe_args.task_args(settings, RATE)
    assert args["runner"] == "pooled_rps"
    run = rally_task.start_task(
        home, "probe", shipped.probe_task_path(), args,
        tmp_path / "rally.log", config=home.quiet_config(),
    )  # fmt: skip
    report = tmp_path / "probe.json"
    assert run.uuid and task_reports.json_report(home, run.uuid, report)
    (wl,) = results.load(report)
    assert wl.iterations == int(RATE * (WARMUP + WINDOW)), wl.iterations

    first = float(wl.iteration_started.min())
    ends = wl.iteration_started + wl.iteration_duration
    window = (first + WARMUP, float(ends.max()))
    log = keystone.access_log_path
    validations = [
        r for r in procstat.read_access_log(log) if window[0] <= r.start < window[1]
    ]  # fmt: skip
    in_window = token_issues(log, *window)
    in_warmup = token_issues(log, first, window[0])
    seen = (
        f"{len(validations)} requests in the judged window, of which {in_window} token "
        f"issues; {in_warmup} token issues in the warm-up"
    )
    print(seen)
    assert len(validations) >= 10, seen  # the log and the report share one clock
    assert in_window == 0, seen
    assert in_warmup == 0, seen


def test_the_second_probe_of_a_search_issues_none_of_the_pools_tokens(small_keystone, tmp_path):
    keystone = small_keystone
    home = RallyHome(tmp_path / "rally")
    home.create_env("probe", admin_user_spec(keystone.admin_credentials))
    rate, warmup, window = 10.0, 1.0, 3.0
    settings = capacity.Settings(
        scenario="validate", low=rate, high=rate, warmup=warmup, window=window,
        max_slope=1e6, precision=1, abort_on_sla_failure=False,
    )  # fmt: skip
    tag = f"ft-pool-{secrets.token_hex(4)}"  # as keystone-bench capacity names one per search
    args = probe_args.task_args(settings, rate, tag)
    pooled = 4 * 8  # the probe task's users, and tokens per user
    auth_url = keystone.admin_credentials["auth_url"]
    seen, issues, logs, made = [], [], [], []
    try:
        for k in (1, 2):
            log = tmp_path / f"probe-{k}.rally.log"
            begun = time.time()
            run = rally_task.start_task(
                home, "probe", shipped.probe_task_path(), args, log, config=home.quiet_config()
            )
            report = tmp_path / f"probe-{k}.json"
            assert run.uuid and task_reports.json_report(home, run.uuid, report)
            (wl,) = results.load(report)
            assert wl.iterations == int(rate * (warmup + window)), wl.iterations
            assert wl.failed_iterations == 0, log.read_text()[-2000:]  # kept tokens accepted
            first = float(wl.iteration_started.min())
            issues.append(token_issues(keystone.access_log_path, begun, first))
            made.append([token_issues(keystone.access_log_path, begun, time.time(), uri)
                         for uri in ("/v3/projects", "/v3/users")])  # fmt: skip
            seen.append(f"probe {k}: {issues[-1]} token issues before its load, setup "
                        f"{wl.setup_duration:.2f} s")  # fmt: skip
            logs.append(log.read_text())
        print("; ".join(seen))
        assert f"({pooled} issued, 0 kept by reuse tag {tag})" in logs[0], seen
        assert f"(0 issued, {pooled} kept by reuse tag {tag})" in logs[1], seen
        # the pool, less the one sign-in keystone_users' check of reused users makes
        assert issues[0] - issues[1] >= pooled - 1, seen
        # the search's projects and users were made once, by the first probe
        assert made[0][0] >= 1 and made[0][1] >= 4, (made, seen)
        assert made[1] == [0, 0], (made, seen)  # not even by Rally's validation
        path = reuse.tokens_path(tag, auth_url, home.environ())
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        kept = json.loads(path.read_text())["users"]
        values = [t["value"] for entry in kept.values() for t in entry["tokens"]]
        assert len(values) == pooled
        assert not any(v in text for v in values for text in logs)  # in no log line
    finally:
        reuse.delete_tag(AdminClient(keystone.admin_credentials), tag)
        gone = reuse.forget(tag, auth_url, home.environ())
    assert {p.name for p in gone} == {
        reuse.state_path(tag, auth_url).name,
        reuse.tokens_path(tag, auth_url).name,
    }
