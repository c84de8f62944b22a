"""``keystone-bench mock``: a minimal, fast token service on loopback, in the foreground."""

from __future__ import annotations

import argparse
from pathlib import Path

from rally_keystone_bench import boundary, writer
from rally_keystone_bench.deploy import mock
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verbs import applicability

RULES = {"stall_every": ("stall", applicability.NONZERO)}


def main(args: argparse.Namespace) -> int:
    if args.run_dir and Path(args.run_dir).exists() and not Path(args.run_dir).is_dir():
        raise BenchError(f"--run-dir {args.run_dir} is a file, not a directory")
    tmp = None if args.run_dir else writer.temporary_directory("ks-mock-")
    run_dir = Path(args.run_dir or tmp.name).resolve()
    try:
        return mock.serve(
            run_dir,
            port=args.port,
            workers=args.workers or 1,  # None: the mock's own default
            service_time_ms=args.service_time,
            slope_ms_per_s=args.slope,
            error_rate=args.error_rate,
            announce=lambda line: print(line, flush=True),
            stall_s=args.stall,
            stall_every_s=args.stall_every,
            host=args.host,
        )
    finally:
        if tmp is not None:
            tmp.cleanup()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench mock``."""
    parser.add_argument(
        "--port",
        type=boundary.port,
        default=None,
        help="loopback port to listen on (default: a free one)",
    )
    parser.add_argument(
        "--workers", type=boundary.positive_int, default=None, help="server processes (default 1)"
    )
    parser.add_argument(
        "--service-time",
        type=boundary.non_negative,
        default=0.0,
        metavar="MS",
        help="fixed service time per request, in ms",
    )
    parser.add_argument(
        "--slope",
        type=boundary.number_in(),
        default=0.0,
        metavar="K",
        help="latency grows by K ms every second",
    )
    parser.add_argument(
        "--error-rate",
        type=boundary.fraction,
        default=0.0,
        help="fraction of token requests answered with HTTP 500",
    )
    parser.add_argument(
        "--stall",
        type=boundary.non_negative,
        default=0.0,
        metavar="SECONDS",
        help="every worker stops answering token requests for this long (needs --stall-every)",
    )
    parser.add_argument(
        "--stall-every",
        type=boundary.non_negative,
        default=0.0,
        metavar="SECONDS",
        help="seconds from one stall to the next; the first starts this long after start",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--run-dir",
        default=None,
        help="keep its files (openrc, log) in this directory (default: a temporary one)",
    )
