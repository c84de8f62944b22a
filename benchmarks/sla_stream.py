"""10^5 and 10^6 synthetic iterations through the latency_slope SLA: time and memory.

The stream imitates Rally: 4 runner processes at 2000 rps in all (500 s of
load for 10^6), each process's results in timestamp-sorted batches of 50,
the batches interleaved out of order, and the very first iteration
delivered last. Each length is fed twice: once for the time (wall and this
process's CPU, which a busy machine moves less), once under
tracemalloc for the memory: what the SLA retains once fed (its state), and
the traced peak above the baseline while feeding (which includes the eight
batches of synthetic dicts in flight). The state must not grow with the
number of iterations. Targets: within 5 s and 20 MB for 10^6.

    python benchmarks/sla_stream.py [--iterations N [N ...]] [--rps R] [--warmup S]
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


def measure(args: argparse.Namespace, iterations: int) -> None:
    """Print the SLA's result, time and memory for a stream of ITERATIONS."""
    one = argparse.Namespace(**{**vars(args), "iterations": iterations})
    print(
        f"stream: {iterations} iterations, {args.rps:g} rps ({iterations / args.rps:g} s),"
        f" warmup {args.warmup:g} s, {PROCESSES} processes, batches of {BATCH} out of order,"
        " first iteration last"
    )
    # generating the synthetic dicts costs time too: measure it alone and subtract
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    for batch in batches(iterations, args.rps):
        for _ in batch:
            pass
    gen, gen_cpu = time.perf_counter() - start, time.process_time() - cpu

    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    sla = feed(one)
    total, total_cpu = time.perf_counter() - start, time.process_time() - cpu
    detail = sla.result()["detail"]
    del sla

    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    sla = feed(one)
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    held = sla.engine.held()

    print(f"  result: {detail}")
    print(
        f"  time: {total - gen:.2f} s in the SLA, {total_cpu - gen_cpu:.2f} CPU-s"
        f" ({total:.2f} s with generating the stream, {gen:.2f} s generating alone)"
    )
    print(
        f"  memory: retained {(current - base) / 2**20:.2f} MiB"
        f" ({held['raw']} raw warm-up points, {held['buckets']} buckets of {held['width']} s),"
        f" peak growth {(peak - base) / 2**20:.1f} MiB while feeding"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--rps", type=float, default=2000.0)
    parser.add_argument("--warmup", type=float, default=60.0)
    args = parser.parse_args()

    print(f"machine: {describe()}")
    for iterations in args.iterations:
        measure(args, iterations)
    print("targets for 10^6: 5 s in the SLA, 20 MB")


if __name__ == "__main__":
    main()
