"""The rules of an A/B verdict (compare, gate) and Keystone's own cost counters (run's
and gate's tracing and profiling)."""

from __future__ import annotations

import argparse
import dataclasses

from rally_keystone_bench import boundary
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verbs.groups.base import OptionGroup


@dataclasses.dataclass(frozen=True)
class VerdictRulesSettings:
    alpha: float  # family-wise error rate
    max_failure_increase: float  # percentage points


class VerdictRules(OptionGroup):
    """--alpha and --max-failure-increase: the rules of an A/B verdict (compare, gate)."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--alpha",
            type=boundary.fraction,
            default=0.01,
            help="family-wise error rate of the verdicts: a change counts when its "
            "corrected p-value is below this (default 0.01)",
        )
        parser.add_argument(
            "--max-failure-increase",
            type=boundary.number_in(0, 100),
            default=0.0,
            metavar="POINTS",
            help="failures may rise by this many percentage points when significant "
            "(default 0: any significant increase fails)",
        )

    def settings(self, args: argparse.Namespace) -> VerdictRulesSettings:
        return VerdictRulesSettings(args.alpha, args.max_failure_increase)


@dataclasses.dataclass(frozen=True)
class TracingSettings:
    trace: bool  # OSprofiler traces: SQL statements per request
    profile: bool  # py-spy samples of the server
    trace_rate: float = 1.0  # run: fraction of requests traced
    max_sql_increase: int = 0  # gate: SQL statements per request the candidate may add

    def checked_rate(self) -> float:
        """run's --trace-rate; BenchError on a bad one (checked once the tasks are)."""
        if not 0.0 <= self.trace_rate <= 1.0:
            raise BenchError(f"--trace-rate must be 0-1, not {self.trace_rate:g}")
        return self.trace_rate


_RUN_HELP = {
    "trace": "a local Keystone traces the requests our clients sign (OSprofiler, SQL "
    "statements): SQL statements and DB time per request in the summary (default on)",
    "profile": "sample a local Keystone's server processes with py-spy during each task: "
    "a flame graph in the summary (default on)",
}
_GATE_HELP = {
    "trace": "trace every paired request on both sides (OSprofiler) and judge SQL "
    "statements per request first (default on)",
    "profile": "sample both sides' servers with py-spy and say where the added time went "
    "(default on)",
}


class Tracing(OptionGroup):
    """run's Keystone cost counters (doc/source/counters.rst): --trace, --profile,
    --observe and --trace-rate (which applies under --trace on)."""

    applies = {"trace_rate": ("trace", ("on",))}

    def add(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--trace", choices=("on", "off"), default="on", help=_RUN_HELP["trace"])
        parser.add_argument(
            "--profile", choices=("on", "off"), default="on", help=_RUN_HELP["profile"]
        )
        _add_run_options(parser)

    def settings(self, args: argparse.Namespace) -> TracingSettings:
        """The counters asked; --observe off turns tracing and profiling off."""
        observed = args.observe == "on"
        return TracingSettings(
            observed and args.trace == "on", observed and args.profile == "on", args.trace_rate
        )


class Counters(OptionGroup):
    """gate's Keystone cost counters: --trace, --max-sql-increase (the verdict on SQL
    statements per request) and --profile."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--trace", choices=("on", "off"), default="on", help=_GATE_HELP["trace"]
        )
        parser.add_argument(
            "--max-sql-increase",
            type=int,
            default=0,
            metavar="N",
            help="SQL statements per request (median) the candidate may add before the "
            "gate fails (default 0: any increase fails)",
        )
        parser.add_argument(
            "--profile", choices=("on", "off"), default="on", help=_GATE_HELP["profile"]
        )

    def settings(self, args: argparse.Namespace) -> TracingSettings:
        """The counters asked; BenchError for a --max-sql-increase below 0."""
        if args.max_sql_increase < 0:
            raise BenchError(f"--max-sql-increase must be 0 or more, not {args.max_sql_increase}")
        return TracingSettings(
            args.trace == "on", args.profile == "on", max_sql_increase=args.max_sql_increase
        )


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--observe",
        choices=("on", "off"),
        default="on",
        help="off: neither tracing nor profiling (--trace off --profile off), for latencies "
        "free of their cost (tracing every request: about 3 %% of the median latency, "
        "doc/source/counters.rst; py-spy's CPU is printed after each task)",
    )
    parser.add_argument(
        "--trace-rate",
        type=float,
        default=1.0,
        metavar="FRACTION",
        help="fraction of each client's requests traced, spread evenly per kind of request "
        "(default 1: all; costs about 3 %% of latency, see doc/source/counters.rst)",
    )
