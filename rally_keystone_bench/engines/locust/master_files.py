"""What the Locust master writes when the load ends: the raw material, samples.json and run.json.

- ``samples.json``: every sample of every worker, as sent (in order of
  intended start);
- ``run.json``: the run's settings, each worker's count of samples and of
  those received, lost workers, what was left in Keystone (nothing, unless
  the deletion failed), and what the report needs that only the master
  knows: the warm-up cut, the start of the load's window, the span of the
  setup (users made, plans sent, tokens issued).

The Rally JSON report (``locust-report.json``) is not the master's: the
load host builds it from these two files after the master exits
(``engine.py``, with report/locust_report.py). run.json is written last:
when it exists, the master is done.
"""

from __future__ import annotations

from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.engines.locust import schedule
from rally_keystone_bench.engines.locust.custom_args import steps_from


def write(master: Any) -> None:
    """MASTER's (a ``master.Master``) two files, into its ``--ks-out`` directory."""
    opts = master.opts
    master.out.mkdir(parents=True, exist_ok=True)
    everything = [s for node in master.workers for s in master.received.get(node, [])]
    everything.sort(key=lambda s: s[2])
    writer.write_json(master.out / "samples.json", everything, indent=None, newline=False)
    kept, cut = everything, None
    if master.t0 is not None and opts.ks_warmup and not opts.ks_steps:
        cut = master.t0 + opts.ks_warmup - 0.5 / opts.ks_rate  # half a spacing: rounding
        kept = [s for s in everything if s[2] >= cut]
    reported = sum(int(d.get("count", 0)) for d in master.done.values())
    meta = {
        "scenario": opts.ks_scenario,
        "runner": runner_config(opts, len(master.workers)),
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
        **report_inputs(master, cut),
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


def report_inputs(master: Any, cut: float | None) -> dict[str, Any]:
    """What the report needs that only the master knows (report/locust_report.from_run).

    ``warmup_cut``: the first intended start the report keeps (CUT; None: every
    sample); ``load_start``: the start of the load's window, after the warm-up
    (None when the load never started); ``setup``: [start, end] of making the
    users, sending the plans and issuing every worker's tokens (the go is 1 s
    later), or None; ``keystone_users``: the users made, as the report's context.
    """
    opts, t0 = master.opts, master.t0
    start = t0 + (opts.ks_warmup if not opts.ks_steps else 0.0) if t0 is not None else None
    setup = [master.setup_started, t0 - 1.0] if t0 and master.setup_started else None
    return {
        "keystone_users": opts.ks_keystone_users,
        "warmup_cut": cut,
        "load_start": start,
        "setup": setup,
    }
