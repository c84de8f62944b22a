"""200,000 iterations through `keystone-bench report` and `keystone-bench compare`.

Builds two Rally JSON reports (format 1.2, indent 4, as `rally task report
--json` writes them) of N iterations each, one keystone.issue_token per
iteration, the candidate 5 % slower. Each command runs as its own process;
its wall time and peak resident memory (from wait4) are printed. Targets:
each within 10 s and 1 GB.

    python benchmarks/report_scale.py [--iterations N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
import synthetic  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import describe  # noqa: E402


def measure(cmd: list[str]) -> tuple[int, float, float]:
    """Exit code, wall seconds and peak RSS (MB) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    sys.stdout.write(
        "    | " + out.decode(errors="replace").strip().replace("\n", "\n    | ") + "\n"
    )
    return proc.returncode, wall, usage.ru_maxrss / 1024.0


def build(path: Path, n: int, seed: int, scale: float) -> float:
    t0 = time.perf_counter()
    data = synthetic.iterations(
        n, concurrency=8, seed=seed, scale={"keystone.issue_token": scale}, error_every=1000
    )
    synthetic.write(
        str(path),
        synthetic.report([synthetic.workload(data, runner={"times": n, "concurrency": 8})]),
    )
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=200_000)
    ap.add_argument("--keep", default=None, help="keep the reports and outputs in DIR")
    ap.add_argument("--build-one", nargs=4, metavar=("PATH", "N", "SEED", "SCALE"),
                    help=argparse.SUPPRESS)  # fmt: skip
    args = ap.parse_args()
    if args.build_one:
        path, n, seed, scale = args.build_one
        print(f"{build(Path(path), int(n), int(seed), float(scale)):.1f}")
        return 0
    tool = shutil.which("keystone-bench") or str(Path(sys.executable).parent / "keystone-bench")
    work = Path(args.keep or tempfile.mkdtemp(prefix="kb-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {describe()}")
    base, cand = work / "base.json", work / "cand.json"
    for path, seed, scale in ((base, 1, 1.0), (cand, 2, 1.05)):
        # Built in a child process: a forked child starts with its parent's peak
        # RSS, so this process must stay small for wait4 to measure the commands.
        secs = subprocess.run(
            [sys.executable, __file__, "--build-one", str(path), str(args.iterations),
             str(seed), str(scale)],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        print(f"built {path.name}: {args.iterations} iterations, "
              f"{path.stat().st_size / 1e6:.0f} MB, {secs} s")  # fmt: skip
    rows = []
    rc, wall, rss = measure([tool, "report", str(base), "--out", str(work / "report")])
    rows.append(("report", rc, wall, rss))
    html = work / "report" / "summary.html"
    print(f"    summary.html: {html.stat().st_size / 1e3:.0f} kB")
    rc, wall, rss = measure(
        [tool, "compare", str(base), str(cand), "--json", str(work / "compare.json"),
         "--html", str(work / "compare.html"), "--junit", str(work / "compare.xml")]
    )  # fmt: skip
    rows.append(("compare", rc, wall, rss))
    print()
    print(f"{'command':<10}{'exit':>5}{'time (s)':>10}{'peak RSS (MB)':>15}  target: 10 s, 1024 MB")
    ok = True
    for name, rc, wall, rss in rows:
        within = wall <= 10 and rss <= 1024
        ok &= within
        print(f"{name:<10}{rc:>5}{wall:>10.2f}{rss:>15.0f}  {'within' if within else 'OVER'}")
    if not args.keep:
        shutil.rmtree(work)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
