"""``keystone-bench matrix``: one task on several local Keystone deployments.

    keystone-bench matrix --deployments deployments/workers.yaml \\
        --task tasks/authenticate-concurrency.yaml --task-args '{"concurrencies": [4]}'

The deployment file maps a name to Deployment fields::

    uwsgi-1w: {workers: 1}
    apache-4p: {server: apache, workers: 4}

Every deployment in turn is started, runs the task (``--repeat`` times) and
is stopped; then one table compares them, shaped like seed 000's study: a
row per deployment and runner setting with min, avg, max, p90, p95, success,
count and throughput, written as matrix.html and matrix.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rally_keystone_bench.errors import BenchError

if TYPE_CHECKING:
    from rally_keystone_bench.deploy.keystone import Deployment
    from rally_keystone_bench.results import Workload

RUNS_DIR = ".keystone-bench/runs"


def deployment_from_mapping(values: Mapping[str, Any], where: str) -> Deployment:
    """A Deployment from KEY: VALUE pairs; BenchError naming an unknown key or bad value."""
    from rally_keystone_bench.deploy.keystone import Deployment

    fields = {f.name: f for f in dataclasses.fields(Deployment)}
    dep = Deployment()
    for key, value in values.items():
        name = str(key).replace("-", "_")
        if name not in fields:
            known = ", ".join(sorted(fields))
            raise BenchError(f"{where}: unknown key {key!r} (known: {known})")
        default = getattr(dep, name)
        if isinstance(default, int) or name in ("password_hash_rounds", "port"):
            try:
                value = int(value)
            except (TypeError, ValueError):
                raise BenchError(f"{where}: {key} must be an integer, not {value!r}") from None
        elif value is not None:
            value = str(value)
        setattr(dep, name, value)
    return dep


def parse_option(text: str, where: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a pair."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise BenchError(f"{where}: {text!r} is not KEY=VALUE")
    return key.strip(), value.strip()


def load_deployments(path: str) -> dict[str, Deployment]:
    """The named deployments of a YAML file, each validated; BenchError on bad input."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise BenchError(f"deployment file {p} does not exist")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise BenchError(f"{p} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise BenchError(f"{p} must map deployment names to their settings")
    out = {}
    for name, values in data.items():
        if values is None:
            values = {}
        if not isinstance(values, dict):
            raise BenchError(f"{p}: deployment {name!r} must be a mapping of settings")
        dep = deployment_from_mapping(values, f"{p}: deployment {name!r}")
        try:
            dep.validate()
        except BenchError as exc:
            raise BenchError(f"{p}: deployment {name!r}: {exc}") from None
        out[str(name)] = dep
    return out


def runner_setting(wl: Workload) -> str:
    """``concurrency 4`` or the runner's text."""
    from rally_keystone_bench.results import RPS_RUNNERS

    if wl.runner_type == "constant" and "concurrency" in wl.runner:
        return f"concurrency {wl.runner['concurrency']}"
    if wl.runner_type in RPS_RUNNERS and "rps" in wl.runner:
        return f"rps {wl.runner['rps']}"
    return wl.runner_text()


def build_table(results: Sequence[tuple[str, Sequence[Workload]]]) -> list[dict[str, Any]]:
    """Rows of the study table: per deployment, workload and action.

    RESULTS is [(deployment name, workloads)], repeated runs of one
    deployment appear as separate entries named ``name (run k)``.
    """
    from rally_keystone_bench.report.render import setting_table

    rows = []
    for name, workloads in results:
        labelled = []
        for wl in workloads:
            setting = runner_setting(wl)
            labelled.append((f"{name}, {setting}", wl))
        for row, wl in _rows_with_workloads(setting_table(labelled), labelled):
            row["deployment"] = name
            row["scenario"] = wl.scenario
            row["setting"] = runner_setting(wl)
            rows.append(row)
    return rows


def _rows_with_workloads(rows: list[dict[str, Any]], labelled: list[tuple[str, Workload]]):
    by_label = dict(labelled)
    for row in rows:
        yield row, by_label[row["label"]]


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The table as text, seconds as in the study (min avg max p90 p95)."""

    def sec(v: float | None) -> str:
        return "n/a" if v is None or not math.isfinite(v) else f"{v:.3f}"

    head = (
        f"{'deployment':<16} {'setting':<15} {'action':<20} {'min':>7} {'avg':>7} {'max':>7}"
        f" {'p90':>7} {'p95':>7} {'success':>8} {'count':>6} {'it/s':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['deployment']:<16} {r['setting']:<15} {r['action']:<20} {sec(r['min']):>7}"
            f" {sec(r['avg']):>7} {sec(r['max']):>7} {sec(r['p90']):>7} {sec(r['p95']):>7}"
            f" {r['success_percent']:>7.1f}% {r['count']:>6} {r['throughput']:>7.2f}"
        )
    return "\n".join(lines)


def render_html(
    rows: Sequence[dict[str, Any]],
    title: str,
    deployments: dict[str, str],
    errors: dict[str, str] | None = None,
) -> str:
    """A self-contained HTML page of the table, and of the runs that failed."""
    from html import escape

    def sec(v: float | None) -> str:
        return "n/a" if v is None or not math.isfinite(v) else f"{v:.3f}"

    cols = ("deployment", "setting", "action", "min", "avg", "max", "p90", "p95")
    out = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{escape(title)}</title>",
        "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
        "td,th{border:1px solid #bbb;padding:2px 8px;white-space:nowrap}"
        "td.n{text-align:right}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        "<h2>Deployments</h2><ul>",
        *(f"<li><b>{escape(k)}</b>: {escape(v)}</li>" for k, v in deployments.items()),
        "</ul><h2>Results (seconds; throughput in successful iterations/s)</h2>",
        "<table><tr>",
        *(f"<th>{c}</th>" for c in (*cols, "success", "count", "throughput")),
        "</tr>",
    ]
    for r in rows:
        cells = [escape(str(r[c])) for c in cols[:3]] + [sec(r[c]) for c in cols[3:]]
        cells += [f"{r['success_percent']:.1f}%", str(r["count"]), f"{r['throughput']:.2f}"]
        out.append(
            "<tr>"
            + "".join(
                f"<td class='n'>{c}</td>" if i >= 3 else f"<td>{c}</td>"
                for i, c in enumerate(cells)
            )
            + "</tr>"
        )
    out.append("</table>")
    if errors:
        out.append("<h2>Failed (no results)</h2><ul>")
        out += [f"<li><b>{escape(k)}</b>: {escape(v)}</li>" for k, v in errors.items()]
        out.append("</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_report(
    rows: Sequence[dict[str, Any]],
    out_dir: Path,
    task: str,
    deployments: dict[str, str],
    errors: dict[str, str] | None = None,
) -> tuple[Path, Path]:
    title = f"keystone-bench matrix: {task}"
    html, js = out_dir / "matrix.html", out_dir / "matrix.json"
    html.write_text(render_html(rows, title, deployments, errors or {}), encoding="utf-8")
    doc = {
        "task": task,
        "units": {"latency": "seconds", "throughput": "successful iterations per second"},
        "deployments": deployments,
        "rows": list(rows),
        "failed": dict(errors or {}),
    }
    js.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return html, js


def main(args: argparse.Namespace) -> int:
    from rally_keystone_bench import runner

    # Every input is checked (load_deployments validates each deployment), and
    # every environment built, before any load.
    deployments = load_deployments(args.deployments)
    task = runner.resolve_tasks([args.task])[0]
    task_args = runner.parse_task_args(args.task_args)
    if args.repeat < 1:
        raise BenchError(f"--repeat must be at least 1, not {args.repeat}")
    stamp = runner.utc_stamp()
    run_root = Path(RUNS_DIR) / f"matrix-{stamp}"
    runner.build_envs(deployments, run_root)
    out_dir = (Path(args.reports_dir) / stamp).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    described = {name: dep.describe() for name, dep in deployments.items()}

    results: list[tuple[str, list]] = []
    errors: dict[str, str] = {}
    failed = False
    n = len(deployments)

    def report() -> tuple[tuple[Path, Path], list[dict[str, Any]]]:
        rows = build_table(results)
        return write_report(rows, out_dir, str(task), described, errors), rows

    with runner.sigterm_as_interrupt():
        try:
            for i, (name, dep) in enumerate(deployments.items(), 1):
                runner.progress(f"deployment {i} of {n}: {name} ({dep.describe()})")
                for k in range(1, args.repeat + 1):
                    label = name if args.repeat == 1 else f"{name} (run {k})"
                    sub = f"{name}" if args.repeat == 1 else f"{name}-run{k}"
                    run_dir = run_root / sub
                    run_dir.mkdir(parents=True, exist_ok=True)
                    dest = out_dir / sub
                    try:
                        with runner.prepared_env(run_dir, deployment=dep) as (home, env):
                            outcome = runner.run_task(home, env, task, task_args, dest)
                        if not outcome.workloads:
                            raise BenchError(
                                f"rally task start exited {outcome.rally_exit} "
                                f"without results; see {dest}"
                            )
                    except BenchError as exc:
                        # The other deployments still run; this one is named at the end.
                        errors[label] = str(exc)
                        runner.progress(f"deployment {label} failed: {exc}")
                        continue
                    failed = failed or not outcome.sla_passed
                    results.append((label, outcome.workloads))
        except KeyboardInterrupt:
            if results:
                (html, _), _ = report()
                runner.progress(f"interrupted; the table of what ran: {html}")
            raise
    (html, js), rows = report()
    print(format_table(rows))
    print(f"matrix HTML: {html}")
    print(f"matrix JSON: {js}")
    print(f"reports: {out_dir}")
    if errors:
        names = ", ".join(errors)
        raise BenchError(
            f"{len(errors)} of {n * args.repeat} deployment runs failed ({names}); "
            f"the reasons are in {js}"
        )
    return 1 if failed else 0
