"""gate: paired iterations cut into blocks, /proc intervals, the verdict, side options."""

import json
import sys
from pathlib import Path

import pytest

from rally_keystone_bench import cli, procstat
from rally_keystone_bench.errors import BenchError
from rally_keystone_bench.report import gate as gate_report
from rally_keystone_bench.verbs import gate
from rally_keystone_bench.verdicts import blocks, pairing, results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import synthetic  # noqa: E402

ISSUE = "keystone.issue_token"
BASE, CAND = f"baseline.{ISSUE}", f"candidate.{ISSUE}"
T0 = synthetic.T0


def paired_run(
    n: int = 240,
    scale: float = 1.0,
    error_every: int = 0,
    seed: int = 1,
    busy: tuple[float, float] | None = None,
    cpu_scale: float = 1.0,
    median: float = 0.05,
) -> blocks.TaskRun:
    """N paired iterations (about 0.1 s each) and /proc intervals of 0.5 s over them.

    BUSY=(start, end) seconds after T0: other processes take 1.5 cores then.
    """
    data = synthetic.iterations(
        n, actions=(BASE, CAND), median=median, sigma=0.1, concurrency=1,
        scale={CAND: scale}, error_every=error_every, seed=seed,
    )  # fmt: skip
    (wl,) = results.from_report(synthetic.report([synthetic.workload(data)]))
    end = float(wl.iteration_started.max() + wl.iteration_duration.max()) - T0
    intervals = []
    t = 0.0
    while t < end + 0.5:
        other = 150 if busy and busy[0] <= t < busy[1] else 10  # ticks per 0.5 s, 2 cores
        ks = {("baseline", 11): 5, ("candidate", 21): int(round(5 * cpu_scale))}
        intervals.append(
            procstat.Interval(T0 + t, T0 + t + 0.5, other + 30, 0, {"baseline": 5,
                              "candidate": ks[("candidate", 21)], "generator": 10}, ks)
        )  # fmt: skip
        t += 0.5
    return blocks.TaskRun([wl], intervals)


def access_log(run: blocks.TaskRun) -> dict[str, list[procstat.Request]]:
    """One request per timed action, served by pid 11 (baseline) or 21 (candidate)."""
    (wl,) = run.workloads
    out = {}
    for side, pid in (("baseline", 11), ("candidate", 21)):
        a = wl.actions[f"{side}.{ISSUE}"]
        out[side] = [
            procstat.Request(float(s), float(d), pid, 201)
            for s, d in zip(a.started_at, a.duration, strict=True)
        ]
    return out


def judge(*runs: blocks.TaskRun, min_clean: int = 8, block_seconds: float = 2.0):
    settings = blocks.GateSettings(10.0, 0.01, block_seconds, min_clean, pairing.Bounds())
    return blocks.judge_runs(runs, access_log(runs[0]), settings, base_name="A", cand_name="B")


def test_pairs_match_the_two_sides_of_each_iteration():
    run = paired_run(n=50, scale=2.0)
    pairs, base, cand = blocks.pairs_of(run.workloads[0], ISSUE)
    assert len(pairs) == 50 and base == (0, 50) and cand == (0, 50)
    assert all(p.cand > p.base * 1.2 for p in pairs)


def test_the_same_release_passes_with_every_block_clean():
    res = judge(paired_run())
    (v,) = res.actions
    assert res.exit_code == 0, gate_report.format_text(res)
    assert len(v.blocks) >= 10 and v.n_clean == len(v.blocks)
    assert v.cpu is not None and not v.cpu.regression
    assert gate_report.format_text(res).startswith("no regression")


def test_a_slower_candidate_fails_naming_the_action_and_waits():
    res = judge(paired_run(scale=1.5))
    assert res.exit_code == 1
    assert res.headline().startswith("REGRESSION") and ISSUE in res.headline()
    assert res.actions[0].kind == "waits"


def test_a_candidate_whose_added_time_is_server_cpu_burns_cpu():
    # +26 ms per request, +25 ms of it the workers' CPU.
    res = judge(paired_run(scale=1.5, cpu_scale=3.0))
    assert res.exit_code == 1
    (v,) = res.actions
    assert v.kind == "burns CPU"
    assert v.kind_detail().startswith("burns CPU: +26.2 ms per request, of which +25.3 ms")


def test_a_candidate_whose_added_time_is_half_cpu_burns_cpu_and_waits():
    # +26 ms per request, +13 ms of it CPU: neither alone explains it.
    res = judge(paired_run(scale=1.5, cpu_scale=2.0))
    (v,) = res.actions
    assert v.kind == "burns CPU and waits"
    assert "of which +12.7 ms server CPU" in gate_report.format_text(res)


def test_cpu_per_request_is_measured_when_requests_outlast_a_block():
    # A busy machine: a token takes 1.5 s (3 s on the candidate), blocks are 2 s.
    res = judge(paired_run(n=40, scale=2.0, cpu_scale=5.0, median=1.5))
    (v,) = res.actions
    with_cpu = [b for b in v.blocks if b.base_cpu and b.cand_cpu]
    assert len(with_cpu) == len(v.blocks) >= 8
    assert v.kind == "burns CPU"


def test_blocks_while_other_load_starts_or_stops_are_set_aside():
    res = judge(paired_run(busy=(5.0, 9.2)))
    (v,) = res.actions
    aside = [b for b in v.blocks if b.set_aside]
    # The load starts within one block and stops within another.
    assert len(aside) == 2 and all("swung" in b.set_aside for b in aside)
    assert res.exit_code == 0


def test_too_few_clean_blocks_is_inconclusive_exit_3():
    res = judge(paired_run(n=60, scale=2.0), min_clean=8)
    assert res.exit_code == 3
    assert res.headline().startswith("INCONCLUSIVE")


def test_more_runs_add_blocks():
    one = judge(paired_run(n=60), min_clean=5)
    two = judge(paired_run(n=60), paired_run(n=60, seed=2), min_clean=5)
    assert len(two.actions[0].blocks) > len(one.actions[0].blocks)
    assert two.rounds == 2


@pytest.mark.parametrize("error_every", [2, 1])
def test_a_failing_candidate_never_passes(error_every):
    # The candidate's action is the iteration's last: every k-th one fails.
    res = judge(paired_run(error_every=error_every))
    assert res.exit_code == 1, gate_report.format_text(res)
    assert "fail" in res.headline()
    assert res.actions[0].kind == "fails"


def test_side_options_reach_the_deployment():
    dep = gate.side_deployment("keystone==30.0.0", ["password_hash_rounds=12"], "--c")
    assert dep.keystone == "keystone==30.0.0"
    assert dep.password_hash_rounds == 12


def test_unknown_side_option_is_refused_by_name():
    with pytest.raises(BenchError, match="colour"):
        gate.side_deployment("keystone", ["colour=blue"], "--candidate-option")


def test_option_without_equals_is_refused():
    with pytest.raises(BenchError, match="KEY=VALUE"):
        gate.side_deployment("keystone", ["workers"], "--candidate-option")


def test_cli_parses_the_gate_command_line():
    args = cli.build_parser().parse_args(
        ["gate", "--baseline", "keystone==30.0.0", "--candidate", "../keystone",
         "--candidate-option", "password_hash_rounds=12", "--max-time", "300"]
    )  # fmt: skip
    assert args.task == "tasks/gate-cloud.yaml"  # the quick task: --task tasks/gate.yaml
    assert args.rounds == 1 and args.threshold == 10.0 and args.max_time == 300.0
    assert args.candidate_option == ["password_hash_rounds=12"]
    assert args.baseline_option == []


@pytest.mark.parametrize(
    "flag,value", [("--rounds", "0"), ("--block-seconds", "0.1"), ("--max-time", "0"),
                   ("--min-clean-blocks", "2"), ("--alpha", "2"), ("--min-clean-blocks", "6")]
)  # fmt: skip
def test_bad_options_exit_2_before_anything_starts(capsys, flag, value):
    rc = cli.main(["gate", "--baseline", "keystone", "--candidate", "keystone", flag, value])
    assert rc == 2
    assert flag in capsys.readouterr().err


def test_reports_are_written_with_every_block(tmp_path):
    res = judge(paired_run(scale=1.5, busy=(5.0, 9.2)))
    paths = {k: tmp_path / f"gate.{k}" for k in ("JSON", "HTML", "JUnit")}
    gate_report.write_outputs(res, paths)
    data = json.loads(paths["JSON"].read_text())
    assert data["exit_code"] == 1 and data["actions"][0]["kind"] == "waits"
    html = paths["HTML"].read_text()
    assert "REGRESSION" in html and "swung" in html and "kind: waits" in html
    assert 'failures="1"' in paths["JUnit"].read_text()
    assert "Keystone's evidence" not in html  # nothing traced or profiled: no section


def test_the_page_shows_keystones_evidence_when_there_is_some(tmp_path):
    from rally_keystone_bench.report import counters as report_counters
    from rally_keystone_bench.verdicts import profiles

    res = judge(paired_run(scale=1.5))
    frames = ("AuthTokenResource.post (keystone/api/auth.py:450)", "sleep (time:0)")
    before, after = {frames: 1}, {frames: 151}
    went = profiles.diff(before, after, ({profiles.ANY: 10}, {profiles.ANY: 10}), rate=100)
    shown = report_counters.evidence_html([], {}, went, "baseline")
    paths = {k: tmp_path / f"gate.{k}" for k in ("JSON", "HTML", "JUnit")}
    gate_report.write_outputs(res, paths, shown)
    html = paths["HTML"].read_text()
    assert html.index("Keystone's evidence") < html.index("<h2>keystone.")
    assert "self time per request Keystone served, candidate - baseline" in html
    assert html.count('class="after"') == len(went) >= 1
