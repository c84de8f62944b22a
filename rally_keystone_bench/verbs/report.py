"""``keystone-bench report RESULT.json|TASK_UUID [--out DIR]``: summary.html and .json.

A Locust report not built yet (``DIR/locust-report.json`` beside the
``samples.json`` and ``run.json`` of a master started by hand) is built
first, as ``load`` builds it after its master.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rally_keystone_bench.driver import reports
from rally_keystone_bench.engines.locust import engine as locust_engine
from rally_keystone_bench.report import render
from rally_keystone_bench.report.render import ms


def main(args: argparse.Namespace) -> int:
    result, out = args.result, args.out  # the verb's options
    locust_engine.ensure_report(Path(result))
    workloads = reports.load_any(result)
    out_dir = out or render.default_out_dir(result)
    html = render.write_summary(workloads, out_dir, result).html
    print(f"{html}")
    print(f"{html.with_name('summary.json')}")
    for wl in workloads:
        parts = []
        for n in [n for n in wl.actions if n != "total"] or ["total"]:
            f = render.action_summary(wl.actions[n])
            text = (
                f"{n} p50 {ms(f['p50'])} ms, p95 {ms(f['p95'])} ms, p99 {ms(f['p99'])} ms, "
                f"{f['success_percent']:.1f}% ok"
            )
            if f["response"]:
                r = f["response"]
                text = (
                    f"{n} service time p50 {ms(f['p50'])} ms, p99 {ms(f['p99'])} ms; "
                    f"response time p50 {ms(r['p50'])} ms, p99 {ms(r['p99'])} ms; "
                    f"{f['success_percent']:.1f}% ok"
                )
            parts.append(text)
        print(f"{wl.label()}: {wl.throughput:.1f} it/s; {'; '.join(parts)}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench report``."""
    parser.add_argument(
        "result",
        metavar="RESULT.json|TASK_UUID",
        help="a Rally JSON report (rally task report --json) or a task UUID in Rally's database",
    )
    parser.add_argument("--out", default=None, help="output directory")
