"""What the Locust master writes when the load ends: samples.json, locust-report.json, run.json.

- ``samples.json``: every sample of every worker, as sent;
- ``locust-report.json``: a Rally JSON report (format 1.2) of the samples
  after the warm-up (report/locust_report.py), with a ``samples_complete``
  criterion that fails when a worker was lost;
- ``run.json``: the run's settings, each worker's count of samples and of
  those received, lost workers, and what was left in Keystone (nothing,
  unless the deletion failed).
"""

from __future__ import annotations

from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.engines.locust import samples as sm
from rally_keystone_bench.engines.locust import schedule
from rally_keystone_bench.engines.locust.custom_args import steps_from
from rally_keystone_bench.report import locust_report


def write(master: Any) -> None:
    """MASTER's (a ``master.Master``) three files, into its ``--ks-out`` directory."""
    opts = master.opts
    master.out.mkdir(parents=True, exist_ok=True)
    everything = [s for node in master.workers for s in master.received.get(node, [])]
    everything.sort(key=lambda s: s[2])
    writer.write_json(master.out / "samples.json", everything, indent=None, newline=False)
    kept = everything
    if master.t0 is not None and opts.ks_warmup and not opts.ks_steps:
        begin = master.t0 + opts.ks_warmup - 0.5 / opts.ks_rate  # half a spacing: rounding
        kept = [s for s in everything if s[2] >= begin]
    reported = sum(int(d.get("count", 0)) for d in master.done.values())
    runner_cfg = runner_config(opts, len(master.workers))
    report = rally_report(master, kept, runner_cfg, reported, len(everything))
    writer.write_json(master.out / "locust-report.json", report, indent=None, newline=False)
    meta = {
        "scenario": opts.ks_scenario,
        "runner": runner_cfg,
        "t0": master.t0,
        "workers": per_worker(master),
        "lost": master.lost,
        "samples_total": len(everything),
        "samples_reported": reported,
        "samples_in_report": len(kept),
        "failed_samples": sum(1 for s in kept if s[6]),
        "left_behind": master.left_behind,
        "admin_retries": master.admin.stats.describe() if master.admin else None,
        "error": master.error,
        "interrupted": master.interrupted,
    }
    writer.write_json(master.out / "run.json", meta, indent=1)  # last: the master is done


def runner_config(opts: Any, workers: int) -> dict[str, Any]:
    """The run's settings, as the report's runner and run.json name them."""
    steps = steps_from(opts)
    return {
        "rps": opts.ks_rate if not opts.ks_steps else [[s.rate, s.seconds] for s in steps],
        "times": schedule.planned_count(steps, opts.ks_arrival),
        "workers": workers,
        "users": opts.num_users,
        "arrival": opts.ks_arrival,
        "warmup": opts.ks_warmup,
        "duration": opts.ks_duration if not opts.ks_steps else sum(s.seconds for s in steps),
        "http": opts.ks_http,
    }


def per_worker(master: Any) -> dict[str, dict[str, Any]]:
    """Each worker's counts: reported, received, its users, late sends, where it stopped."""
    return {
        node: {
            "index": i,
            "reported": master.done.get(node, {}).get("count"),
            "received": len(master.received.get(node, [])),
            "users": master.ready.get(node),
            "late_sends": master.done.get(node, {}).get("late"),
            "stopped_in_step": master.done.get(node, {}).get("stopped_in_step"),
        }
        for i, node in enumerate(master.workers)
    }


def rally_report(
    master: Any, kept: list, runner_cfg: dict[str, Any], reported: int, total: int
) -> dict[str, Any]:
    """The Rally JSON report of the KEPT samples, with the samples_complete criterion."""
    opts = master.opts
    requests = {s[0] for s in kept}
    failed_requests = {s[0] for s in kept if s[6]}
    sla = [
        locust_report.failure_rate_sla(len(failed_requests), len(requests)),
        locust_report.complete_sla(master.lost, reported, total),
    ]
    window = None
    if master.t0 is not None and kept:
        begin = master.t0 + (opts.ks_warmup if not opts.ks_steps else 0.0)
        window = (min(s[3] for s in kept), max(s[4] for s in kept))
        window = (min(window[0], begin), window[1])
    # users made, plans sent, every worker's tokens issued: the go is 1 s later
    setup = (master.setup_started, master.t0 - 1.0) if master.t0 and master.setup_started else None
    return locust_report.rally_report(
        kept,
        scenario=opts.ks_scenario,
        rally_scenario=sm.SCENARIOS[opts.ks_scenario],
        runner=runner_cfg,
        contexts={"keystone_users": {"users": opts.ks_keystone_users}},
        sla_results=sla,
        load_window=window,
        setup=setup,
    )
