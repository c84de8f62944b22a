"""A validate probe on a real Keystone sends no token issue of its own during the load.

Keystone's access log holds every request with its start time: the
``POST /v3/auth/tokens`` a capacity probe of ``KeystoneTokens.validate``
sends must all start before its first iteration (the contexts' setup), none
in the warm-up and none in the judged window. A token issue costs Keystone
a bcrypt check; one inside the window slows the validations it judges.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rally_keystone_bench import procstat, shipped
from rally_keystone_bench.driver import probe_args, task_reports
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec
from rally_keystone_bench.verdicts import capacity, results

pytestmark = pytest.mark.functional

RATE, WARMUP, WINDOW = 20.0, 3.0, 8.0


def token_issues(access_log: Path, start: float, end: float) -> int:
    """POST /v3/auth/tokens whose request started in [START, END) (epoch seconds)."""
    count = 0
    for line in access_log.read_text().splitlines():
        f = line.split()  # epoch ms, method, uri, status, server microseconds, pid
        if len(f) >= 6 and f[1] == "POST" and f[2].split("?")[0] == "/v3/auth/tokens":
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
