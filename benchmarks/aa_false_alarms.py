"""False alarms of `compare` over A/A pairs split from one real run.

Each pair is one Rally report's iterations split in two at random (a fresh
seed per pair), so any verdict other than "no significant change" is a false
alarm. Prints, per pair, whether compare would exit 1 and which actions it
found significant at alpha whatever their size. Target: at most 1 of 20
pairs flagged.

    python benchmarks/aa_false_alarms.py [RESULT.json] [--pairs 20] [--threshold 10] [--alpha 0.01]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import synthetic  # noqa: E402
from _machine import describe  # noqa: E402

from rally_keystone_bench.verdicts import compare, results  # noqa: E402

DEFAULT = ROOT / "tests" / "fixtures" / "rally-keystone-tokens.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", nargs="?", default=str(DEFAULT))
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--threshold", type=float, default=10.0)
    ap.add_argument("--alpha", type=float, default=0.01)
    args = ap.parse_args()
    rep = json.loads(Path(args.result).read_text())
    wls = results.from_report(rep, args.result)
    print(f"machine: {describe()}")
    print(f"run: {args.result}: {len(wls)} workloads, "
          f"{sum(w.iterations for w in wls)} iterations; "
          f"threshold {args.threshold:g}%, alpha {args.alpha:g}")  # fmt: skip
    flagged = 0
    tests = significant = 0
    for seed in range(1, args.pairs + 1):
        a, b = synthetic.split(rep, seed)
        res = compare.compare_workloads(
            results.from_report(a, "A"), results.from_report(b, "B"), args.threshold, args.alpha
        )
        comps = [c for w in res.workloads for c in w.actions if c.p_value == c.p_value]
        tests += len(comps)
        sig = [f"{c.name} {c.verdict}" for c in comps if c.significant]
        significant += len(sig)
        flagged += res.exit_code == 1
        print(f"pair {seed:2d}: exit {res.exit_code}; "
              f"{len(comps)} actions, significant: {', '.join(sig) or 'none'}")  # fmt: skip
    print()
    print(f"flagged (compare would exit 1): {flagged} of {args.pairs} pairs (target: at most 1)")
    print(f"significant at alpha {args.alpha:g} whatever the size: {significant} of {tests} "
          f"action comparisons (expected by chance: about {tests * args.alpha:.1f})")  # fmt: skip
    return 0 if flagged <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
