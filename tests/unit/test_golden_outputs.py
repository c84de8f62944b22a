"""Every output of run, compare, gate, capacity and matrix, rendered from recorded inputs.

The golden files under tests/fixtures/golden were recorded from the code
before the package was restructured (issue 23); a move that changes one
byte a user reads fails here. Inputs: the recorded Rally report
(rally-keystone-tokens.json), and seeded synthetic reports where the
recorded run has no such workload (the gate's paired iterations).
The golden files of ``load`` (both engines) are checked in
test_load_golden.py, with this module's ``check``; history's in
test_history_golden.py.

Record again, after a deliberate change of output only:
``KEYSTONE_BENCH_RECORD_GOLDEN=1 pytest tests/unit/test_golden_outputs.py``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from pathlib import Path

import pytest

from rally_keystone_bench import cli, procstat
from rally_keystone_bench.report import capacity as capacity_report
from rally_keystone_bench.report import gate as gate_report
from rally_keystone_bench.report import matrix as matrix_report
from rally_keystone_bench.verbs import matrix
from rally_keystone_bench.verdicts import (
    blocks,
    capacity,
    capacity_search,
    pairing,
    results,
    rounds,
)
from rally_keystone_bench.verdicts.capacity import Settings
from rally_keystone_bench.verdicts.probe_verdict import GENERATOR, OK, SLOPE, Probe
from rally_keystone_bench.version import version as tool_version

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = FIXTURES / "rally-keystone-tokens.json"
GOLDEN = FIXTURES / "golden"
STAMP_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
# A float printed with all its digits (json's repr): numpy's sums may differ in
# the last one or two from one CPU to another (AVX-512 on one, AVX2 on the
# next), so both sides are compared at 10 significant digits.
LONG_FLOAT_RE = re.compile(r"-?\d+\.\d{11,}(?:e-?\d+)?")
# What the reports say of the machine: the recording one's, wherever the test runs.
RECORDED_MACHINE = {"arch": "x86_64", "cores": 2, "cpu": "AMD EPYC"}
RECORD = os.environ.get("KEYSTONE_BENCH_RECORD_GOLDEN") == "1"

sys.path.insert(0, str(FIXTURES))
import synthetic  # noqa: E402


def last_digits_apart(text: str) -> str:
    return LONG_FLOAT_RE.sub(lambda m: f"{float(m.group()):.10g}", text)


def check(name: str, text: str, tmp_path: Path) -> None:
    text = text.replace(str(tmp_path), "<tmp>").replace(str(REAL), "<fixture>")
    text = STAMP_RE.sub("<now>", text)
    text = text.replace(f'"tool_version": "{tool_version()}"', '"tool_version": "<version>"')
    path = GOLDEN / name
    if RECORD:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden file {name}: record it (see the module docstring)"
    expected = last_digits_apart(path.read_text())
    assert last_digits_apart(text) == expected, f"{name} differs from its golden file"


def check_files(paths: dict[str, Path], prefix: str, tmp_path: Path) -> None:
    for path in paths.values():
        check(f"{prefix}.{path.name}", path.read_text(), tmp_path)


def test_run_report(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["report", str(REAL), "--out", str(out)]) == 0
    check("run.stdout", capsys.readouterr().out, tmp_path)
    check_files({n: out / n for n in ("summary.html", "summary.json")}, "run", tmp_path)


@pytest.mark.parametrize("candidate", ["same", "slower"])
def test_compare(tmp_path, capsys, candidate):
    cand = REAL
    if candidate == "slower":
        slow = synthetic.slow_down(json.loads(REAL.read_text()), "keystone.issue_token", 1.5)
        cand = Path(synthetic.write(str(tmp_path / "slower.json"), slow))
    paths = {k: tmp_path / f"compare.{k}" for k in ("json", "html", "xml")}
    argv = ["compare", str(REAL), str(cand), "--json", str(paths["json"])]
    argv += ["--html", str(paths["html"]), "--junit", str(paths["xml"])]
    code = cli.main(argv)
    assert code == (0 if candidate == "same" else 1)
    check(f"compare-{candidate}.stdout", capsys.readouterr().out, tmp_path)
    check_files(paths, f"compare-{candidate}", tmp_path)


ISSUE = "keystone.issue_token"


def paired_run(scale: float, busy: tuple[float, float], error_every: int) -> blocks.TaskRun:
    actions = (f"baseline.{ISSUE}", f"candidate.{ISSUE}")
    data = synthetic.iterations(
        240, actions=actions, median=0.05, sigma=0.1, concurrency=1,
        scale={actions[1]: scale}, error_every=error_every, seed=3,
    )  # fmt: skip
    report = synthetic.report(
        [synthetic.workload(data)], task_uuid="0" * 8 + "-0000-0000-0000-" + "0" * 12
    )
    (wl,) = results.from_report(report)
    end = float(wl.iteration_started.max() + wl.iteration_duration.max()) - synthetic.T0
    intervals, t = [], 0.0
    while t < end + 0.5:
        other = 150 if busy[0] <= t < busy[1] else 10
        ks = {("baseline", 11): 5, ("candidate", 21): 7}
        shares = {"baseline": 5, "candidate": 7, "generator": 10}
        t0 = synthetic.T0 + t
        intervals.append(procstat.Interval(t0, t0 + 0.5, other + 30, 0, shares, ks))
        t += 0.5
    return blocks.TaskRun([wl], intervals)


def access_log(run: blocks.TaskRun) -> dict[str, list[procstat.Request]]:
    (wl,) = run.workloads
    out = {}
    for side, pid in (("baseline", 11), ("candidate", 21)):
        a = wl.actions[f"{side}.{ISSUE}"]
        out[side] = [
            procstat.Request(float(s), float(d), pid, 201)
            for s, d in zip(a.started_at, a.duration, strict=True)
        ]
    return out


@pytest.mark.parametrize("case", ["pass", "slower", "fails"])
def test_gate(tmp_path, case):
    scale, error_every = {"pass": (1.0, 0), "slower": (1.5, 0), "fails": (1.0, 7)}[case]
    run = paired_run(scale, (5.0, 9.2), error_every)
    settings = blocks.GateSettings(10.0, 0.01, 2.0, 8, pairing.Bounds())
    res = blocks.judge_runs([run], access_log(run), settings, base_name="A", cand_name="B")
    check(f"gate-{case}.txt", gate_report.format_text(res) + "\n", tmp_path)
    paths = {k: tmp_path / f"gate.{k.lower()}" for k in ("JSON", "HTML", "JUnit")}
    gate_report.write_outputs(res, paths)
    check_files(paths, f"gate-{case}", tmp_path)


def test_capacity(tmp_path, monkeypatch):
    monkeypatch.setattr(capacity_report, "machine", lambda: dict(RECORDED_MACHINE))
    settings = Settings(
        "validate", low=1, high=200, warmup=10, window=30, max_slope=0.01, precision=1
    )
    probes = []
    for i, (rate, verdict) in enumerate([(100, SLOPE), (50, OK), (75, GENERATOR)], 1):
        p = Probe(i, "search", rate, verdict=verdict, reason="r", planned=10, iterations=10)
        p.sent_rate, p.p50, p.p95, p.p99 = rate * 0.99, 0.02 * i, 0.03 * i, 0.04 * i
        p.setup, p.elapsed = 1.5 * i, 40.0 + i
        probes.append(p)
    for role, rate, verdict in (("confirm N", 50, OK), ("confirm N+1", 51, SLOPE)):
        p = Probe(len(probes) + 1, role, rate, verdict=verdict, planned=10, iterations=10)
        p.report = str(REAL)
        probes.append(p)
    said: list[str] = []
    out = capacity.Outcome(50, "found", None, True, "N = 50 rps; 51 rps is degraded", probes)
    j, h = capacity_report.write_reports(out, settings, "mock", tmp_path, "2026-01-01", 12.0)
    check_files({"json": j, "html": h}, "capacity", tmp_path)

    def model(rate: float, role: str) -> Probe:
        verdict = OK if rate <= 37 else SLOPE
        return Probe(len(said) + 1, role, rate, verdict=verdict, reason="modelled")

    found = capacity_search.find_capacity(settings, model, say=said.append)
    check(
        "capacity-search.txt",
        "\n".join([*said, *(f"{p.role} {p.rps} {p.verdict}" for p in found.probes), found.message])
        + "\n",
        tmp_path,
    )


def test_matrix(tmp_path):
    wls = results.load(REAL)
    slower = results.from_report(
        synthetic.slow_down(copy.deepcopy(json.loads(REAL.read_text())), ISSUE, 1.2), "slower"
    )
    labelled = [("ks-a (run 1)", wls), ("ks-b (run 1)", slower), ("ks-a (run 2)", slower)]
    rows = matrix.build_table(labelled)
    html, js = matrix_report.write_report(rows, tmp_path, "tasks/x.yaml", {"ks-a": "keystone"})
    check_files({"html": html, "json": js}, "matrix", tmp_path)
    text = (
        matrix_report.format_table(rows)
        + "\n"
        + matrix_report.format_rounds(rounds.across_rounds(rows))
    )
    check("matrix.txt", text + "\n", tmp_path)
