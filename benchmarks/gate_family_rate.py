"""The gate's family-wise false-alarm rate, from A/A gates' recorded block ratios, resampled.

Each GATE.json is the report of a gate whose two sides ran the same code
(``keystone-bench gate --baseline keystone==30.0.0 --candidate
keystone==30.0.0``). Its clean blocks' latency ratios are what the machine
does to two identical Keystones. A synthetic A/A gate draws, for every
workload, as many blocks as the gate needed (with replacement, from that
workload's recorded ratios) and applies the gate's decision rule: the
signed-rank test per workload, Holm's correction over the family, the
threshold. The share of synthetic gates that say REGRESSION is the rule's
family-wise false-alarm rate on this machine's real noise; beside it, the
same draws judged per test at alpha with no correction (the old rule).

    python benchmarks/gate_family_rate.py /tmp/aa/gates/*/gate.json [--gates 2000]
    python benchmarks/gate_family_rate.py --synthetic --gates 200   # smallest: no input

``--synthetic`` draws lognormal A/A ratios (sigma 0.08, and a per-workload
bias of up to +/-3 %) for 11 workloads: the rule checked without a run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe  # noqa: E402

from rally_keystone_bench.verdicts import family, family_verdict, pairing  # noqa: E402


def recorded(paths: list[str]) -> tuple[dict[str, list[float]], int, float, float]:
    """Workload -> clean block ratios pooled over the gates; blocks needed, alpha, threshold."""
    ratios: dict[str, list[float]] = {}
    needed, alpha, threshold = 8, 0.01, 10.0
    for path in paths:
        doc = json.loads(Path(path).read_text())
        alpha, threshold = doc["alpha"], doc["threshold_percent"]
        needed = max(needed, (doc.get("family") or {}).get("blocks_needed", 8))
        for a in doc["actions"]:
            key = f"{a['workload']}: {a['action']}"
            ratios.setdefault(key, []).extend(r for r in a["block_ratios"] if r)
    return {k: v for k, v in ratios.items() if v}, needed, alpha, threshold


def synthetic(workloads: int, seed: int) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    return {
        f"workload {i}": list(np.exp(rng.uniform(-0.03, 0.03) + rng.normal(0, 0.08, 200)))
        for i in range(workloads)
    }


def one_gate(ratios: dict[str, list[float]], n: int, alpha: float, thr: float, rng) -> tuple:
    """(the family's verdict is a regression, any single test at alpha would have convicted)."""
    verdicts, naive = [], False
    for key, pool in ratios.items():
        drawn = list(rng.choice(pool, size=n, replace=True))
        ones = [1.0] * n
        j = pairing.judge_ratios("latency", drawn, ones, drawn, thr, alpha)
        naive |= j.regression
        blocks = []
        verdicts.append(pairing.ActionVerdict(key, "latency", blocks, j, None, None))
    family_verdict.judge_family(verdicts, alpha, thr)
    return any(v.regression for v in verdicts), naive


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gate_json", nargs="*")
    ap.add_argument("--gates", type=int, default=2000, help="synthetic A/A gates to draw")
    ap.add_argument("--synthetic", action="store_true", help="no input: lognormal A/A ratios")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.synthetic:
        ratios, alpha, thr = synthetic(11, args.seed), 0.01, 10.0
        needed = family.blocks_needed(alpha, len(ratios))
        source = "synthetic lognormal A/A ratios (sigma 0.08, bias up to 3 %)"
    elif args.gate_json:
        ratios, needed, alpha, thr = recorded(args.gate_json)
        source = f"{len(args.gate_json)} A/A gate report(s)"
    else:
        ap.error("give A/A gate.json files, or --synthetic")
    print(f"machine: {describe()}")
    print(f"source: {source}: {len(ratios)} workloads, "
          f"{sum(len(v) for v in ratios.values())} clean block ratios")  # fmt: skip
    print(f"rule: threshold {thr:g}%, alpha {alpha:g}, Holm over {len(ratios)} tests, "
          f"{needed} blocks a workload")  # fmt: skip
    rng = np.random.default_rng(args.seed)
    family_alarms = naive_alarms = 0
    for _ in range(args.gates):
        fam, naive = one_gate(ratios, needed, alpha, thr, rng)
        family_alarms += fam
        naive_alarms += naive
    print(f"synthetic A/A gates: {args.gates}")
    print(f"family-wise false alarms (the gate's rule): {family_alarms} "
          f"({100 * family_alarms / args.gates:.2f} %; target at most 1 %)")  # fmt: skip
    print(f"without the correction (each test at alpha alone): {naive_alarms} "
          f"({100 * naive_alarms / args.gates:.2f} %)")  # fmt: skip
    return 0 if family_alarms <= 0.01 * args.gates else 1


if __name__ == "__main__":
    sys.exit(main())
