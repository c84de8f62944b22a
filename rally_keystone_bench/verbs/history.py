"""The ``keystone-bench history`` verb: the runs a store holds, their series, the change
points in each, history.html, and OpenMetrics or InfluxDB exports.

``keystone-bench history --history STORE`` lists the runs; ``--series`` prints
each matching series run by run; ``--changes`` finds change points (E-divisive
means, a permutation test); ``--html FILE`` draws them; ``--export`` writes
what a dashboard reads, from the store or (``--from-report DIR``) from a
report's summary.json files.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rally_keystone_bench import boundary
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.history import records
from rally_keystone_bench.history.store import ENV_VAR, Store
from rally_keystone_bench.report import history as history_report
from rally_keystone_bench.verbs import options, recording
from rally_keystone_bench.verdicts import series as history_series
from rally_keystone_bench.verdicts.changepoints import ChangePointSettings


@dataclasses.dataclass(frozen=True)
class Filters:
    """The --workload, --action, --deployment and --machine given (None: any)."""

    workload: str | None
    action: str | None
    deployment: str | None
    machine: str | None


@dataclasses.dataclass(frozen=True)
class HistorySettings:
    """The options of ``history``, as given (the door of main)."""

    history: str | None  # the store (None: $KEYSTONE_BENCH_HISTORY)
    workload: str | None
    action: str | None
    deployment: str | None
    machine: str | None
    metric: str
    series: bool
    across_deployments: bool
    changes: bool
    html: str | None
    alpha: float
    permutations: int
    min_change: float  # percent
    export: str | None  # openmetrics or influx
    out: str | None
    push: str | None
    from_report: str | None

    @property
    def filters(self) -> Filters:
        return Filters(self.workload, self.action, self.deployment, self.machine)

    @property
    def store(self) -> str | None:
        """The store's URL: --history, else the environment's."""
        return options.history_url(self.history)


FILTERS = tuple(f.name for f in dataclasses.fields(Filters))  # each a --NAME TEXT option


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench history``."""
    options.add_history_option(parser)
    for name in FILTERS:
        parser.add_argument(
            f"--{name}",
            default=None,
            metavar="TEXT",
            help=f"only series whose {name} contains TEXT",
        )
    parser.add_argument(
        "--metric",
        choices=history_series.METRICS,
        default="p50",
        help="what a series holds (default p50: the median service time)",
    )
    parser.add_argument("--series", action="store_true", help="print each series run by run")
    parser.add_argument(
        "--across-deployments",
        action="store_true",
        help="one series over every deployment line: an experiment that changes a setting "
        "(--password-hash-rounds, --set) finds its change point where the setting changed",
    )
    parser.add_argument(
        "--changes", action="store_true", help="find the change points of each series"
    )
    parser.add_argument("--html", default=None, metavar="FILE", help="draw the series into FILE")
    parser.add_argument(
        "--alpha",
        type=boundary.fraction,
        default=ChangePointSettings.alpha,
        help="the permutation test's level (default %(default)s)",
    )
    parser.add_argument(
        "--permutations",
        type=boundary.number_in(19, 100000, int),
        default=ChangePointSettings.permutations,
        metavar="N",
        help="shuffles per significance test (default %(default)s)",
    )
    parser.add_argument(
        "--min-change",
        type=boundary.number_in(0, 1000),
        default=0.0,
        metavar="PERCENT",
        help="report only change points that move the mean this much (default 0)",
    )
    parser.add_argument(
        "--export", choices=("openmetrics", "influx"), default=None, help="write an export"
    )
    parser.add_argument(
        "--out", default=None, metavar="FILE", help="the export's file (default stdout)"
    )
    parser.add_argument(
        "--push", default=None, metavar="URL", help="push the OpenMetrics export to a Pushgateway"
    )
    parser.add_argument(
        "--from-report",
        default=None,
        metavar="DIR",
        help="export a report's summary.json files (a run's reports folder) instead of the store",
    )


def _check(settings: HistorySettings) -> None:
    if settings.push and settings.export != "openmetrics":
        raise BenchError("--push sends the OpenMetrics export: add --export openmetrics")
    if settings.push and not settings.push.startswith(("http://", "https://")):
        raise BenchError(f"--push {settings.push}: not an http(s):// URL")
    if settings.from_report:
        if not settings.export:
            raise BenchError("--from-report is an export's source: add --export")
        if not Path(settings.from_report).is_dir():
            raise BenchError(f"--from-report {settings.from_report}: no such directory")
    elif not settings.store:
        raise BenchError(f"no store: give --history STORE or set {ENV_VAR}")
    if settings.alpha <= 0:
        raise BenchError("--alpha 0: no p-value is below it, so no change could be found")
    if 1 / (settings.permutations + 1) > settings.alpha:  # no series could ever be significant
        need = math.ceil(1 / settings.alpha) - 1
        raise BenchError(
            f"--permutations {settings.permutations} cannot reach --alpha {settings.alpha:g} "
            f"(the smallest p-value is 1/{settings.permutations + 1}): give at least {need}"
        )
    for path in (settings.html, settings.out):
        if path and not Path(path).resolve().parent.is_dir():
            raise BenchError(f"{path}: no directory {Path(path).resolve().parent}")


def _runs_from_report(directory: Path) -> list[dict[str, Any]]:
    """A report's summaries as one run shaped like the store's (run id 0)."""
    rows = records.rows_from_summaries(recording.summaries_under(directory, "report"))
    if not rows:
        raise BenchError(f"--from-report {directory}: no summary.json below it")
    record = records.build_record(
        "report", records.Keystone(spec="unknown"), None, {}, rows, str(directory)
    )
    columns = record.columns()
    columns["recorded_at"] = records.now()
    return [{"id": 0, **columns, "rows": [r.columns() | {"counters": r.counters} for r in rows]}]


def _export(settings: HistorySettings, runs: list[dict[str, Any]]) -> None:
    text = (
        history_report.openmetrics(runs)
        if settings.export == "openmetrics"
        else history_report.influx(runs)
    )
    if settings.out:
        print(f"{settings.export}: {history_report.save_export(Path(settings.out), text)}")
    elif not settings.push:
        sys.stdout.write(text)
    if settings.push:
        push(settings.push, text)
        print(f"pushed to {settings.push}")


def push(url: str, text: str) -> None:
    """PUT TEXT to a Pushgateway (URL: its /metrics/job/NAME path); BenchError when refused."""
    request = urllib.request.Request(
        url,
        data=text.encode(),
        method="PUT",
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        raise BenchError(f"--push {url}: the Pushgateway answered {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise BenchError(f"--push {url}: {getattr(exc, 'reason', exc)}") from None


def _analysed(settings: HistorySettings, runs: list[dict[str, Any]]) -> list[tuple]:
    rules = ChangePointSettings(
        alpha=settings.alpha,
        permutations=settings.permutations,
        min_change=settings.min_change / 100,
    )
    by_id = {r["id"]: r for r in runs}
    out = []
    for s in history_series.build_series(runs, settings.metric, settings.across_deployments):
        if not _matches(settings.filters, settings.across_deployments, s):
            continue
        found = history_series.change_points(s, by_id, rules, records.commits_between)
        out.append((s, found))
    return out


def _matches(filters: Filters, across_deployments: bool, s: history_series.Series) -> bool:
    """A series matches when every filter given is a substring of its field.

    Across deployments a series has no single deployment line: that filter was
    applied to the runs already (Store.runs)."""
    names = [n for n in FILTERS if not (n == "deployment" and across_deployments)]
    given = dataclasses.asdict(filters)
    return all(not given[n] or given[n] in getattr(s, n) for n in names)


def main(args: argparse.Namespace) -> int:
    settings = options.read(HistorySettings, args)
    _check(settings)
    if settings.from_report:
        _export(settings, _runs_from_report(Path(settings.from_report)))
        return 0
    url = settings.store
    assert url is not None
    if not url.startswith(("postgresql://", "postgres://")) and Path(url).is_dir():
        raise BenchError(f"--history {url}: is a directory, not a store file")
    if not url.startswith(("postgresql://", "postgres://")) and not Path(url).is_file():
        raise BenchError(f"--history {url}: no such store (a run with --history creates it)")
    with Store.open(url) as store:
        where = store.where
        runs = store.runs(**dataclasses.asdict(settings.filters))
    if settings.export:
        _export(settings, runs)
        return 0
    if not (settings.series or settings.changes or settings.html):
        print(history_report.format_runs(runs))
        return 0
    analysed = _analysed(settings, runs)
    if settings.series:
        for s, found in analysed:
            print(history_report.format_series(s, found))
    if settings.changes or settings.series:
        print(history_report.format_change_points(analysed))
    if settings.html:
        print(f"history: {history_report.write_html(Path(settings.html), analysed, runs, where)}")
    return 0
