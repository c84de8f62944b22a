"""``keystone-bench mock``: a minimal, fast token service on loopback, in the foreground."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from rally_keystone_bench import boundary, writer
from rally_keystone_bench.deploy import mock
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.verbs import groups, options

# The mock's processes, service time and stalls: the options capacity and load
# give --target mock, here unprefixed.
MOCK = groups.Mock(0.0, "fixed service time per request, in ms", stall=True, serve=True)
RULES = groups.rules(MOCK)


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """The mock verb's own options (the mock's: the Mock group's settings)."""

    port: int | None  # None: a free one
    slope: float  # ms per second
    error_rate: float
    host: str
    run_dir: str | None  # None: a temporary directory


def main(args: argparse.Namespace) -> int:
    settings, mocked = options.read(ServeSettings, args), MOCK.settings(args)
    if settings.run_dir and Path(settings.run_dir).exists() and not Path(settings.run_dir).is_dir():
        raise BenchError(f"--run-dir {settings.run_dir} is a file, not a directory")
    tmp = None if settings.run_dir else writer.temporary_directory("ks-mock-")
    run_dir = Path(settings.run_dir or tmp.name).resolve()
    try:
        return mock.serve(
            run_dir,
            port=settings.port,
            workers=mocked.workers,
            service_time_ms=mocked.service_time_ms,
            slope_ms_per_s=settings.slope,
            error_rate=settings.error_rate,
            announce=lambda line: print(line, flush=True),
            stall_s=mocked.stall_s,
            stall_every_s=mocked.stall_every_s,
            host=settings.host,
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
    MOCK.add_service(parser)
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
    MOCK.add_stall(parser)
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--run-dir",
        default=None,
        help="keep its files (openrc, log) in this directory (default: a temporary one)",
    )
