"""``keystone-bench mock``: a minimal, fast token service on loopback, in the foreground."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rally_keystone_bench.deploy import mock
from rally_keystone_bench.errors import BenchError


def main(args: argparse.Namespace) -> int:
    if args.run_dir and Path(args.run_dir).exists() and not Path(args.run_dir).is_dir():
        raise BenchError(f"--run-dir {args.run_dir} is a file, not a directory")
    tmp = None if args.run_dir else tempfile.TemporaryDirectory(prefix="ks-mock-")
    run_dir = Path(args.run_dir or tmp.name).resolve()
    try:
        return mock.serve(
            run_dir,
            port=args.port,
            workers=args.workers,
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
