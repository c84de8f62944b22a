"""summary.html and summary.json from Rally results.

``keystone-bench report RESULT.json|TASK_UUID [--out DIR]``. The HTML is one
self-contained file (inline style, inline SVG, no script, no font, no link);
summary.json holds the same numbers. Latency figures are of successful
samples; failures are counted in success % and grouped under errors.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jinja2
from markupsafe import Markup

from rally_keystone_bench import __name__ as pkg
from rally_keystone_bench import writer
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.report import svg
from rally_keystone_bench.report.flame import Flames
from rally_keystone_bench.verdicts import counters as keystone_counters
from rally_keystone_bench.verdicts import stats, trend
from rally_keystone_bench.verdicts.results import RPS_RUNNERS, TOTAL, Workload, redact
from rally_keystone_bench.version import version as tool_version

TEMPLATES = Path(__file__).parent / "templates"
FIGURES = ("min", "mean", "p50", "p90", "p95", "p99", "p99.9", "max")


def environment() -> jinja2.Environment:
    """The jinja2 environment of our templates, HTML-escaping by default."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ms"] = ms
    env.filters["sec"] = lambda v: "n/a" if v is None or not math.isfinite(v) else f"{v:.3f}"
    env.filters["pct"] = lambda v: "n/a" if v is None else f"{v:.1f}%"
    env.filters["num"] = lambda v, fmt=".2f": "n/a" if v is None else format(v, fmt)
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=1, sort_keys=True, default=str)
    return env


def ms(v: float | None) -> str:
    """Seconds as milliseconds, 2 decimals below 100 ms; n/a when unknown."""
    if v is None or not math.isfinite(v):
        return "n/a"
    ms = v * 1000.0
    return f"{ms:.1f}" if ms >= 100 else f"{ms:.2f}"


def _json_default(o: Any) -> Any:
    return o.item() if hasattr(o, "item") else str(o)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def action_summary(a: Any) -> dict[str, Any]:
    """Percentiles (seconds) of an action's successful samples, its count and success %.

    When the samples know their intended start (an open-model load), also
    ``response``: the same percentiles of the response time (intended start
    to answer), beside the service time (send to answer) of the main figures.
    """
    s = stats.summarize(a.ok_durations())
    out = {k: _clean(s[k]) for k in FIGURES}
    out["count"] = a.count
    out["succeeded"] = int(s["count"])
    out["success_percent"] = round(a.success_percent, 3)
    out["response"] = None
    if getattr(a, "has_response_time", False):
        r = stats.summarize(a.response_times())
        out["response"] = {k: _clean(r[k]) for k in FIGURES}
        lag = stats.summarize(a.send_lags())
        out["send_lag"] = {k: _clean(lag[k]) for k in ("p50", "p99", "max")}
    return out


def target_rate(wl: Workload) -> float | None:
    """The constant target rate of an rps-like runner, else None."""
    cfg = wl.runner.get("rps") if wl.runner_type in RPS_RUNNERS else None
    return float(cfg) if isinstance(cfg, int | float) else None


def achieved_rate(wl: Workload) -> float | None:
    """Iterations started per second: (starts - 1) / the span of the starts."""
    if wl.iterations < 2:
        return None
    span = float(wl.iteration_started.max() - wl.iteration_started.min())
    return (wl.iterations - 1) / span if span > 0 else None


def latency_fit(a: Any, t0: float) -> trend.LinearFit | None:
    """Least-squares line of an action's latency against seconds since ``t0``."""
    ok = ~a.failed
    x = a.started_at[ok] - t0
    if x.size < 3 or float(x.max() - x.min()) <= 0:
        return None
    return trend.ols(x, a.duration[ok])


def rps_target(wl: Workload) -> list[tuple[float, float]]:
    """An rps runner's target rate as (seconds, rate) steps; [] for other runners."""
    if wl.runner_type not in RPS_RUNNERS:
        return []
    cfg = wl.runner.get("rps")
    end = max(wl.load_duration, 1.0)
    if isinstance(cfg, int | float):
        return [(0.0, float(cfg)), (end, float(cfg))]
    if isinstance(cfg, dict) and {"start", "end", "step"} <= set(cfg):
        dur = float(cfg.get("duration", 1))
        pts, t, rate = [], 0.0, float(cfg["start"])
        while t < end:
            pts += [(t, rate), (min(t + dur, end), rate)]
            t += dur
            rate = min(rate + float(cfg["step"]), float(cfg["end"]))
        return pts
    return []


def chart_actions(wl: Workload) -> list[str]:
    """Actions that get charts: the atomic ones, or the iteration when there are none."""
    names = [n for n in wl.actions if n != TOTAL]
    return names or [TOTAL]


def distinguishing_names(workloads: Sequence[Workload]) -> list[str]:
    """Each workload's scenario with the arguments (else the runner settings) that tell
    it from the others of the same scenario: ``KeystoneTokens.validate (method HEAD)``;
    the scenario alone when it runs once or nothing tells its runs apart."""
    names = []
    for wl in workloads:
        same = [w for w in workloads if w.scenario == wl.scenario]
        words: list[str] = []
        for part in ("args", "runner"):
            dicts = [redact(getattr(w, part)) or {} for w in same]
            mine = redact(getattr(wl, part)) or {}
            keys = sorted({k for d in dicts for k in d})
            differ = [
                k for k in keys if len({json.dumps(d.get(k), sort_keys=True) for d in dicts}) > 1
            ]
            words = [f"{k} {json.dumps(mine[k]).strip(chr(34))}" for k in differ if k in mine]
            if words:
                break
        names.append(f"{wl.scenario} ({', '.join(words)})" if words else wl.scenario)
    return names


def workload_summary(wl: Workload, index: int) -> dict[str, Any]:
    """Every number the report shows for one workload, for summary.json."""
    t0 = float(wl.iteration_started.min()) if wl.iterations else 0.0
    actions = {}
    for name, a in wl.actions.items():
        entry = action_summary(a)
        fit = latency_fit(a, t0)
        entry["slope"] = (
            None
            if fit is None
            else {
                "seconds_per_second": fit.slope,
                "ci95": list(fit.slope_ci),
                "points": fit.n,
            }
        )
        actions[name] = entry

    achieved = None
    if wl.runner_type in RPS_RUNNERS:
        achieved = achieved_rate(wl)
    return {
        "index": index,
        "task_uuid": wl.task_uuid,
        "env_name": wl.env_name,
        "subtask": wl.subtask,
        "scenario": wl.scenario,
        "args": redact(wl.args),
        "runner_type": wl.runner_type,
        "runner": redact(wl.runner),
        "contexts": redact(wl.contexts),
        "description": wl.description,
        "iterations": wl.iterations,
        "failed_iterations": wl.failed_iterations,
        "load_duration": wl.load_duration,
        "full_duration": wl.full_duration,
        "throughput": wl.throughput,
        "rps_achieved": achieved,
        "rps_target": target_rate(wl),
        "pass_sla": wl.pass_sla,
        "sla": redact(wl.sla),
        "actions": actions,
        "errors": [
            {"type": e.type, "http_status": e.status, "count": e.count, "example": e.example}
            for e in wl.errors
        ],
    }


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = json.dumps(value, sort_keys=True, default=str)


def settings_of(wl: Workload) -> dict[str, str]:
    """The workload's settings as dotted paths: runner.concurrency, args.scope, ..."""
    out: dict[str, str] = {}
    _flatten("args", wl.args, out)
    _flatten("runner", {"type": wl.runner_type, **wl.runner}, out)
    _flatten("contexts", wl.contexts, out)
    out["deployment"] = json.dumps(wl.env_name)
    return out


def one_setting_groups(workloads: Sequence[Workload]) -> list[dict[str, Any]]:
    """Groups of 2+ workloads of one scenario that differ in exactly one setting.

    ``runner.times`` is not a setting here: a study often runs more
    iterations at a higher concurrency.
    """
    ignored = {"runner.times"}
    by_scenario: dict[str, list[Workload]] = {}
    for wl in workloads:
        by_scenario.setdefault(wl.scenario, []).append(wl)
    groups = []
    for scenario, wls in by_scenario.items():
        if len(wls) < 2:
            continue
        settings = [settings_of(w) for w in wls]
        keys = sorted(set().union(*settings) - ignored)
        for key in keys:
            buckets: dict[tuple, list[tuple[Any, Workload]]] = {}
            for w, s in zip(wls, settings, strict=True):
                rest = tuple(sorted((k, v) for k, v in s.items() if k != key and k not in ignored))
                value = json.loads(s[key]) if key in s else None
                buckets.setdefault(rest, []).append((value, w))
            for members in buckets.values():
                values = [json.dumps(v, sort_keys=True) for v, _ in members]
                if len(members) < 2 or len(set(values)) != len(values):
                    continue
                members.sort(key=lambda m: (not isinstance(m[0], int | float), str(m[0])))
                if all(isinstance(v, int | float) for v, _ in members):
                    members.sort(key=lambda m: m[0])
                groups.append(
                    {
                        "scenario": scenario,
                        "setting": key,
                        "rows": setting_table([(_label(v), w) for v, w in members]),
                    }
                )
    return groups


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def setting_table(
    rows: Sequence[tuple[str, Workload]], actions: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Rows shaped like the Rally study: per label and action, min, avg, max,
    p90, p95 (seconds), success %, count, and the workload's throughput.

    ``rows`` are (label, workload), e.g. ("uwsgi-4w, concurrency 16", wl);
    ``actions`` defaults to ``total`` and every atomic action of each workload.
    """
    out = []
    for label, wl in rows:
        names = list(actions) if actions else [TOTAL, *(n for n in wl.actions if n != TOTAL)]
        for name in names:
            a = wl.actions.get(name)
            if a is None:
                continue
            s = stats.summarize(a.ok_durations())
            out.append(
                {
                    "label": label,
                    "action": name,
                    "min": _clean(s["min"]),
                    "avg": _clean(s["mean"]),
                    "max": _clean(s["max"]),
                    "p90": _clean(s["p90"]),
                    "p95": _clean(s["p95"]),
                    "success_percent": round(a.success_percent, 3),
                    "count": a.count,
                    "throughput": wl.throughput,
                }
            )
    return out


def build_summary(
    workloads: Sequence[Workload],
    source: str,
    counters: Sequence[Mapping] | None = None,
    keystone: Mapping[str, Any] | None = None,
    machine: Any = None,
) -> dict[str, Any]:
    """The content of summary.json; COUNTERS: per workload, action -> counters.as_dict().

    KEYSTONE: what the traced Keystone said of the whole load
    (``db_connections_checked_out`` when it ended). MACHINE: how busy the
    machine was during the load (verdicts.machine.MachineState), when sampled.
    """
    summary = {
        "generated_by": f"{pkg} report",
        "tool_version": tool_version(),
        "generated_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": source,
        "units": {"latency": "seconds", "throughput": "successful iterations per second"},
        "workloads": [workload_summary(w, i) for i, w in enumerate(workloads)],
        "setting_tables": one_setting_groups(workloads),
    }
    for entry, name in zip(summary["workloads"], distinguishing_names(workloads), strict=True):
        entry["name"] = name
    for entry, found in zip(summary["workloads"], counters or (), strict=False):
        entry["counters"] = {name: _with_top(c) for name, c in found.items()}
    if keystone:
        summary["keystone"] = dict(keystone)
    if machine is not None:
        summary["machine"] = machine.as_dict()
    return summary


def _with_top(counters: Mapping[str, Any]) -> dict[str, Any]:
    """COUNTERS plus ``top``: the five most frequent statement labels per request."""
    by_label: dict[str, float] = {}
    for shape, n in (counters.get("statements") or {}).items():
        name = keystone_counters.label(shape)
        by_label[name] = by_label.get(name, 0.0) + n
    top = sorted(by_label.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return {**counters, "top": top}


def charts(wl: Workload) -> list[dict[str, str]]:
    """The inline SVG charts of one workload."""
    t0 = float(wl.iteration_started.min()) if wl.iterations else 0.0
    out = []
    for name in chart_actions(wl):
        a = wl.actions[name]
        ok = ~a.failed
        fit = latency_fit(a, t0)
        out.append(
            {
                "title": f"{name}: latency over time",
                "svg": svg.latency_over_time(
                    a.started_at[ok], a.duration[ok], fit, f"{name} latency over time", t0
                ),
            }
        )
        out.append(
            {
                "title": f"{name}: latency by percentile",
                "svg": svg.percentiles(a.duration[ok], f"{name} latency by percentile"),
            }
        )

    if wl.runner_type in RPS_RUNNERS:
        out.append(
            {
                "title": f"{wl.runner_type} runner: target against achieved rate",
                "svg": svg.rate_over_time(
                    wl.iteration_started, t0, rps_target(wl), "target and achieved rate"
                ),
            }
        )
    return out


def render_html(
    workloads: Sequence[Workload], summary: dict[str, Any], flames: Flames | None = None
) -> str:
    """summary.html as a string; FLAMES: Keystone's flame graphs, inline (a workload's in
    its own section; one of the whole task at the end when they carry no time)."""
    per = list(flames.per_workload) if flames else []
    views = []
    for i, (wl, s) in enumerate(zip(workloads, summary["workloads"], strict=True)):
        flame = per[i] if i < len(per) else None
        views.append(
            {
                "s": s,
                "charts": [{"title": c["title"], "svg": Markup(c["svg"])} for c in charts(wl)],
                "flame": flame,
                "flame_svg": Markup(flame.svg) if flame and flame.svg else None,
            }
        )
    return (
        environment()
        .get_template("summary.html.j2")
        .render(
            summary=summary,
            views=views,
            figures=FIGURES,
            flames=flames,
            flame_svg=Markup(flames.whole) if flames and flames.whole else None,
        )
    )


def _with_profile(summary: dict[str, Any], flames: Flames | None, profile: Mapping | None) -> None:
    """summary.json's record of the profile: the task's, and each workload's samples."""
    if profile:
        summary["profile"] = dict(profile)
    for entry, f in zip(summary["workloads"], flames.per_workload if flames else (), strict=False):
        entry["profile"] = {
            "samples": f.samples,
            "window_seconds": round(f.seconds, 3),
            "requests_served": dict(f.requests_served),
        }


def render_files(
    workloads: Sequence[Workload],
    source: str,
    counters: Sequence[Mapping] | None = None,
    flames: Flames | None = None,
    keystone: Mapping[str, Any] | None = None,
    machine: Any = None,
    profile: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """{"summary.html": ..., "summary.json": ...} for these workloads.

    PROFILE: what summary.json keeps of the task's py-spy samples (the
    requests Keystone served while they were taken, which compare divides by).
    """
    if not workloads:
        raise BenchError(f"{source}: the report holds no workload")
    summary = build_summary(workloads, source, counters, keystone, machine)
    _with_profile(summary, flames, profile)
    return {
        "summary.html": render_html(workloads, summary, flames),
        "summary.json": json.dumps(summary, indent=2, default=_json_default) + "\n",
    }


class WrittenSummary(NamedTuple):
    html: Path  # summary.html
    doc: dict[str, Any]  # summary.json's document, as written: what the results store takes


def write_summary(
    workloads: Sequence[Workload],
    out_dir: str | os.PathLike,
    source: str,
    counters: Sequence[Mapping] | None = None,
    flames: Flames | None = None,
    keystone: Mapping[str, Any] | None = None,
    machine: Any = None,
    profile: Mapping[str, Any] | None = None,
) -> WrittenSummary:
    """Write summary.html and summary.json into ``out_dir``, once: the HTML's path and the
    JSON's document (decoded from the text written, so that it equals the file)."""
    files = render_files(workloads, source, counters, flames, keystone, machine, profile)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            writer.write_text(out / name, text)
    except OSError as e:
        raise BenchError(f"{out}: cannot write the report: {e.strerror or e}") from None
    return WrittenSummary(out / "summary.html", json.loads(files["summary.json"]))


def default_out_dir(result: str) -> str:
    """Beside the result file, or reports/TASK_UUID for a task in Rally's database."""
    if os.path.exists(result):
        return os.path.dirname(os.path.abspath(result))
    return os.path.join("reports", result)
