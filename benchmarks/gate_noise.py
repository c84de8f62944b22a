"""Does a busy machine fool the gate? Gates run under an injected CPU hog.

    python benchmarks/gate_noise.py                 # the full table (< 45 min here)
    python benchmarks/gate_noise.py --aa-runs 2 --ab-runs 1 --no-quiet

Runs ``keystone-bench gate`` again and again on a small task (one
password-token and one validate workload, paired, ``tasks/gate.yaml`` sized
by ``--issue-seconds``/``--validate-seconds``, blocks of ``--block-seconds``
1 s, so that a gate of about 90 s has enough of them) while a noise injector keeps
one core busy for random stretches at random times, and prints (each gate's
whole output is kept in ``WORK/<case>.out``):

- A/A: keystone 30.0.0 on both sides, ``--aa-runs`` gates (target: at most
  1 exit 1 in 10, at most 3 inconclusive);
- A/B "waits": the candidate is keystone 30.0.0 built from its sdist with
  one change, ``time.sleep(0.15)`` at the start of
  ``keystone.token.provider.Manager.issue_token`` (target: every gate exits 1
  naming keystone.issue_token, kind "waits");
- A/B "burns CPU": the candidate has ``password_hash_rounds`` 13 against
  the baseline's 12 (target: every gate exits 1, kind "burns CPU");
- one gate of each without the noise injector, for reference.

With ``--default-gate`` every gate is the one a Keystone developer runs:
``keystone-bench gate --baseline keystone==30.0.0 --candidate ...`` and no
other option (``tasks/gate-cloud.yaml``: the sized pass, the cache-off pair,
13 workloads, its own durations and time limit), about 10 to 15 minutes a
gate here. After the A/A gates it resamples their recorded clean block
ratios (``gate_family_rate.py``'s rule: thousands of synthetic A/A gates)
and prints the family-wise false-alarm rate.

The noise injector: one process, a pure-Python busy loop, idle for U(1, 6) s
then busy for U(2, 10) s, again and again, from ``random.Random(SEED)``
(default seed 17); its stretches are logged beside each gate's result.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RELEASE = "keystone==30.0.0"
SLEEP_PATCH = (
    "        import time as _gate_noise_time  # gate_noise.py: a change that waits\n"
    "        _gate_noise_time.sleep({seconds})\n"
)
NOISE_CODE = """
import random, sys, time
rng = random.Random(int(sys.argv[1]))
log = open(sys.argv[2], "a", buffering=1)
while True:
    time.sleep(rng.uniform(1.0, 6.0))
    busy = rng.uniform(2.0, 10.0)
    start = time.time()
    log.write(f"{start:.1f} busy {busy:.1f}\\n")
    while time.time() - start < busy:
        pass
"""


@contextlib.contextmanager
def noise(seed: int, log: Path, enabled: bool = True) -> Iterator[None]:
    """One core busy for random stretches while the block runs (its own process)."""
    if not enabled:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", NOISE_CODE, str(seed), str(log)])
    try:
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def insert_sleep(provider: Path, seconds: float = 0.15) -> None:
    """keystone/token/provider.py with ``seconds`` of sleep at the start of issue_token."""
    text = provider.read_text()
    head = "    def issue_token(\n"
    at = text.index(head)
    body = text.index("):\n", at) + len("):\n")
    if text[body:].lstrip().startswith('"""'):  # after the docstring, if any
        doc_end = text.index('"""', text.index('"""', body) + 3) + 4
        body = doc_end
    patch = SLEEP_PATCH.format(seconds=seconds)
    provider.write_text(text[:body] + patch + text[body:])


def release_tree(work: Path, name: str, sleep: float | None = None) -> Path:
    """keystone 30.0.0's sdist unpacked as ``work/name``, with ``sleep`` seconds of sleep
    at the start of token issue when given (built once; a marker file says it is done)."""
    tree = work / name
    if (tree / ".gate-noise-patched").exists():
        return tree
    sdists = work / "sdist"
    sdists.mkdir(parents=True, exist_ok=True)
    if not list(sdists.glob("keystone-30.0.0.tar.gz")):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             RELEASE, "-d", str(sdists)],
            check=True,
        )  # fmt: skip
    (archive,) = sdists.glob("keystone-30.0.0.tar.gz")
    unpack = work / f".{name}.unpack"
    shutil.rmtree(unpack, ignore_errors=True)
    shutil.rmtree(tree, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(unpack, filter="data")
    (unpack / "keystone-30.0.0").rename(tree)
    shutil.rmtree(unpack)
    if sleep is not None:
        insert_sleep(tree / "keystone" / "token" / "provider.py", sleep)
    (tree / ".gate-noise-patched").write_text("")
    return tree


AUTH_SLEEP = "        import time; time.sleep({seconds})  # gate_noise.py: a change that waits\n"
AUTH_BODY = "        include_catalog = 'nocatalog' not in flask.request.args\n"


def sleep_in_auth(work: Path, seconds: float = 0.15) -> Path:
    """keystone 30.0.0 with ``time.sleep`` as the first line of ``AuthTokenResource.post``.

    Line 325 of keystone/api/auth.py, the tree issue 41 names: the gate's
    "where the time went" must name that line and its ``time.sleep``.
    """
    tree = release_tree(work, "keystone-30.0.0-auth-sleep150")
    auth = tree / "keystone" / "api" / "auth.py"
    text = auth.read_text()
    if "gate_noise.py: a change that waits" not in text:
        post = text.index("    def post(self):", text.index("class AuthTokenResource"))
        at = text.index(AUTH_BODY, post)
        auth.write_text(text[:at] + AUTH_SLEEP.format(seconds=seconds) + text[at:])
    return tree


def patched_tree(work: Path) -> Path:
    """keystone 30.0.0's sdist, unpacked, with 150 ms of sleep in token issue."""
    return release_tree(work, "keystone-30.0.0-sleep150", sleep=0.15)


def run_gate(label: str, baseline: str, candidate: str, options: list[str], args, work: Path):
    """One gate; returns its exit code, time, headline, kind and clean blocks."""
    reports = work / "reports" / label
    cmd = [
        shutil.which("keystone-bench", path=str(Path(sys.executable).parent)) or "keystone-bench",
        "gate",
        "--baseline", baseline, "--candidate", candidate, *options,
        "--reports-dir", str(reports),
    ]  # fmt: skip
    if not args.default_gate:
        cmd += [
            "--task", str(ROOT / "tasks" / "gate.yaml"),
            "--task-args", json.dumps({"issue_seconds": args.issue_seconds,
                                       "validate_seconds": args.validate_seconds}),
            "--max-time", str(args.max_time), "--block-seconds", str(args.block_seconds),
        ]  # fmt: skip
    started = time.monotonic()
    pipe = subprocess.PIPE
    proc = subprocess.Popen(cmd, cwd=work, stdout=pipe, stderr=pipe, text=True)
    try:
        stdout, stderr = proc.communicate()
    except KeyboardInterrupt:
        # Ctrl-C reached the gate too (one process group): let it stop its Keystones and
        # remove what it made, never kill it halfway.
        stdout, stderr = proc.communicate()
        (work / f"{label}.out").write_text(stdout + "\n--- stderr ---\n" + stderr)
        raise
    took = time.monotonic() - started
    (work / f"{label}.out").write_text(stdout + "\n--- stderr ---\n" + stderr)
    verdicts = ("REGRESSION", "no regression", "INCONCLUSIVE")
    lines = [line for line in stdout.splitlines() if line.startswith(verdicts)]
    headline = (lines or [stderr.strip()[-200:]])[0]
    kinds, clean, total = [], 0, 0
    found = sorted(reports.glob("*/gate.json"))
    if found:
        data = json.loads(found[-1].read_text())
        for a in data["actions"]:
            clean += a["clean_blocks"]
            total += a["clean_blocks"] + a["blocks_set_aside"]
            if a["regression"]:
                kinds.append(f"{a['action']}: {a['kind']}")
    return proc.returncode, took, headline, kinds, f"{clean}/{total}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aa-runs", type=int, default=10)
    parser.add_argument("--ab-runs", type=int, default=5)
    parser.add_argument("--no-quiet", action="store_true", help="skip the runs without noise")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--baseline", default=RELEASE)
    parser.add_argument("--issue-seconds", type=int, default=24)
    parser.add_argument("--validate-seconds", type=int, default=18)
    parser.add_argument("--max-time", type=float, default=90.0, help="each gate's --max-time")
    parser.add_argument(
        "--block-seconds",
        type=float,
        default=1.0,
        help="each gate's --block-seconds (default 1: a 90 s gate needs the blocks)",
    )
    parser.add_argument("--work", default=".keystone-bench/gate-noise")
    parser.add_argument(
        "--sleep-at",
        choices=["provider", "auth"],
        default="provider",
        help="where the A/B 'waits' tree sleeps: Manager.issue_token, or line 325 of "
        "keystone/api/auth.py (AuthTokenResource.post)",
    )
    parser.add_argument(
        "--default-gate",
        action="store_true",
        help="each gate with the gate's defaults (tasks/gate-cloud.yaml, no task options)",
    )
    args = parser.parse_args()
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {_machine.describe()}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"noise: one core busy U(2, 10) s after U(1, 6) s idle, random.Random({args.seed})")
    if args.default_gate:
        print("each gate: the default gate (tasks/gate-cloud.yaml), no option but the sides")
    else:
        print(
            f"each gate: issue {args.issue_seconds} s + validate {args.validate_seconds} s of "
            f"paired load, --block-seconds {args.block_seconds:g}, --max-time {args.max_time:g}"
        )
    began = time.monotonic()
    if not args.ab_runs:
        tree = None
    elif args.sleep_at == "auth":
        tree = sleep_in_auth(work)
    else:
        tree = patched_tree(work)
    rounds12 = ["--baseline-option", "password_hash_rounds=12"]
    cases = [("A/A", args.baseline, args.baseline, [], args.aa_runs, "no regression")]
    if tree is not None:
        cases += [
            ("A/B waits", args.baseline, str(tree), [], args.ab_runs, "exit 1, waits"),
            ("A/B burns CPU", args.baseline, args.baseline,
             [*rounds12, "--candidate-option", "password_hash_rounds=13"], args.ab_runs,
             "exit 1, burns CPU"),
        ]  # fmt: skip
    rows: list = []
    try:
        run_cases(cases, args, work, rows)
    except KeyboardInterrupt:
        print(f"interrupted after {len(rows)} gate(s); each gate's output is in {work}")
        return 130
    resampled(sorted((work / "reports").glob("AA-noise-*/*/gate.json")))
    print(f"total: {time.monotonic() - began:.0f} s (target < 2700 s)")
    return 0


def run_cases(cases: list, args, work: Path, rows: list) -> None:
    """Each case's gates, noisy (and one quiet unless --no-quiet), a line each into ROWS."""
    rng = random.Random(args.seed)
    for name, base, cand, opts, runs, want in cases:
        plan = [(True, i) for i in range(runs)]
        if not args.no_quiet:
            plan.append((False, runs))
        for noisy, i in plan:
            label = f"{name.replace('/', '').replace(' ', '-')}-{'noise' if noisy else 'quiet'}-{i}"
            with noise(rng.randrange(1 << 30), work / f"{label}.noise.log", noisy):
                rc, took, headline, kinds, clean = run_gate(label, base, cand, opts, args, work)
            rows.append((name, noisy, rc, took, clean, kinds, headline))
            print(
                f"  {name:<14} {'noise' if noisy else 'quiet':<5} exit {rc}  {took:5.0f} s  "
                f"clean {clean:>7}  {'; '.join(kinds) or '-'}  | {headline[:110]}",
                flush=True,
            )
        done = [r for r in rows if r[0] == name and r[1]]
        codes = [r[2] for r in done]
        print(
            f"{name}: {len(done)} gates under noise: {codes.count(0)} exit 0, "
            f"{codes.count(1)} exit 1, {codes.count(3)} inconclusive (exit 3), "
            f"{len(codes) - codes.count(0) - codes.count(1) - codes.count(3)} other; "
            f"target: {want}",
            flush=True,
        )


def resampled(reports: list[Path], gates: int = 5000) -> None:
    """The gate's rule on the A/A gates' recorded block ratios, resampled (gate_family_rate.py)."""
    if not reports:
        return
    import numpy as np
    from gate_family_rate import one_gate, recorded

    ratios, needed, alpha, thr = recorded([str(p) for p in reports])
    if not ratios:
        print("resampled: no clean block ratio recorded")
        return
    rng = np.random.default_rng(1)
    family = naive = 0
    for _ in range(gates):
        fam, one = one_gate(ratios, needed, alpha, thr, rng)
        family, naive = family + fam, naive + one
    print(
        f"resampled from {len(reports)} A/A gate(s), {len(ratios)} workloads, {needed} blocks "
        f"each: {gates} synthetic gates, family-wise false alarms {family} "
        f"({100 * family / gates:.2f} %; target at most 1 %); each test alone at alpha: "
        f"{naive} ({100 * naive / gates:.2f} %)"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
