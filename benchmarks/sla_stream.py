"""One million synthetic iterations through the latency_slope SLA: time and memory.

The stream imitates Rally: 4 runner processes at 2000 rps in all (500 s of
load), each process's results in timestamp-sorted batches of 50, the batches
interleaved out of order, and the very first iteration delivered last. It is
fed twice: once for the time, once under tracemalloc for the memory (the
traced peak above the baseline while the SLA lives, which includes the one
batch of synthetic dicts in flight). Targets: within 5 s and 20 MB.

    python benchmarks/sla_stream.py [--iterations N] [--rps R] [--warmup S]
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe  # noqa: E402

from rally_keystone_bench.plugins.sla.latency_slope import LatencySlope  # noqa: E402

T0 = 1_700_000_000.0
BATCH = 50
PROCESSES = 4


def batches(iterations: int, rps: float, seed: int = 5) -> Iterator[list[dict]]:
    """Sorted batches per process, interleaved at random; the first iteration comes last."""
    rng = random.Random(seed)
    per_proc = [0] * PROCESSES
    first = None
    pending: list[list[dict]] = []
    i = 0
    while i < iterations:
        proc = rng.randrange(PROCESSES)
        batch = []
        for _ in range(BATCH):
            if i >= iterations:
                break
            k = per_proc[proc] * PROCESSES + proc
            per_proc[proc] += 1
            i += 1
            ts = T0 + k / rps
            it = {
                "timestamp": ts,
                "duration": 0.020 + 0.0005 * (k / rps) + rng.gauss(0.0, 0.004),
                "idle_duration": 0.0,
                "error": [] if rng.random() > 0.001 else ["HttpError", "500", ""],
                "output": {"additive": [], "complete": []},
                "atomic_actions": [],
            }
            if k == 0:
                first = it
            else:
                batch.append(it)
        if batch:
            pending.append(batch)
        if len(pending) >= 8:
            rng.shuffle(pending)
            yield from pending
            pending = []
    rng.shuffle(pending)
    yield from pending
    if first is not None:
        yield [first]


def feed(args: argparse.Namespace) -> LatencySlope:
    sla = LatencySlope({"warmup": args.warmup})
    for batch in batches(args.iterations, args.rps):
        for it in batch:
            sla.add_iteration(it)
    sla.result()
    return sla


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1_000_000)
    parser.add_argument("--rps", type=float, default=2000.0)
    parser.add_argument("--warmup", type=float, default=60.0)
    args = parser.parse_args()

    print(f"machine: {describe()}")
    print(
        f"stream: {args.iterations} iterations, {args.rps:g} rps"
        f" ({args.iterations / args.rps:g} s),"
        f" warmup {args.warmup:g} s, {PROCESSES} processes, batches of {BATCH} out of order,"
        " first iteration last"
    )

    # generating the synthetic dicts costs time too: measure it alone and subtract
    gc.collect()
    start = time.perf_counter()
    for batch in batches(args.iterations, args.rps):
        for _ in batch:
            pass
    gen = time.perf_counter() - start

    gc.collect()
    start = time.perf_counter()
    sla = feed(args)
    total = time.perf_counter() - start
    detail = sla.result()["detail"]

    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    sla2 = feed(args)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    zone = sum(a.nbytes for a in sla2.engine._zone_x) + sum(a.nbytes for a in sla2.engine._zone_y)

    print(f"result: {detail}")
    print(
        f"time: {total - gen:.2f} s in the SLA ({total:.2f} s with generating the stream,"
        f" {gen:.2f} s generating alone); target 5 s"
    )
    print(
        f"memory: peak growth {(peak - base) / 2**20:.1f} MB,"
        f" retained {(current - base) / 2**20:.1f} MB"
        f" ({len(sla2.engine._seconds)} seconds, {zone / 2**20:.1f} MB raw warm-up points);"
        " target 20 MB"
    )


if __name__ == "__main__":
    main()
