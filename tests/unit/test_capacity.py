"""The capacity search: bad input, probe verdicts, bisection on modelled targets, reports."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rally_keystone_bench import cli, shipped
from rally_keystone_bench.driver import probe_args, probers, targets
from rally_keystone_bench.report import capacity as capacity_report
from rally_keystone_bench.verbs import capacity as capacity_verb
from rally_keystone_bench.verbs import options
from rally_keystone_bench.verdicts import capacity, probe_verdict, ramps, results
from rally_keystone_bench.verdicts.capacity import Settings
from rally_keystone_bench.verdicts.capacity_search import find_capacity
from rally_keystone_bench.verdicts.probe_verdict import (
    ERRORS,
    GENERATOR,
    OK,
    SATURATED,
    SLOPE,
    Probe,
)
from rally_keystone_bench.verdicts.ramps import ramp_rates, ramp_zero, refine_rates, step_workload

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))
import synthetic  # noqa: E402

SETTINGS = Settings("validate", low=1, high=200, warmup=10, window=30, max_slope=0.01, precision=1)


# -- bad input -----------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, reason",
    [
        (
            ["--scenario", "validate", "--low", "10", "--high", "5"],
            "--low (10) is above --high (5)",
        ),
        (["--scenario", "validate", "--max-slope", "-0.01"], "--max-slope must not be negative"),
        (["--scenario", "nosuch"], "--scenario: invalid choice: 'nosuch'"),
        (
            ["--scenario", "lifecycle"],
            "capacity searches authenticate or validate, not --scenario lifecycle",
        ),
        (["--scenario", "validate", "--precision", "0"], "--precision must be above 0"),
        (
            ["--scenario", "validate", "--runner", "rps", "--ramp"],
            "--ramp runs on the pooled_rps runner, not --runner rps",
        ),
        (["--scenario", "validate", "--low", "0"], "--low must be above 0"),
        (["--scenario", "validate", "--window", "0"], "--window must be above 0"),
        (["--scenario", "validate", "--spec", "x.yaml"], "use it with --target cloud"),
        (
            ["--scenario", "validate", "--target", "mock", "--mock-workers", "0"],
            "--mock-workers must be at least 1",
        ),
    ],
)
def test_bad_input_exits_2_with_the_reason_before_any_load(argv, reason, capsys, monkeypatch):
    def no_target(*a, **k):  # pragma: no cover - reached only by a defect
        raise AssertionError("a target was prepared for bad input")

    monkeypatch.setattr(targets, "prepared_env", no_target)
    code = cli.main(["capacity", *argv, "--reports-dir", "/nonexistent/reports"])
    assert code == 2
    assert reason in capsys.readouterr().err


# -- the figures of one probe ---------------------------------------------------
def open_loop(rate: float, seconds: float, latency, fail_every: int = 0) -> list[dict]:
    """Iterations started every 1/RATE s; LATENCY(t) gives each one's duration."""
    data = []
    n = int(rate * seconds)
    for i in range(n):
        start = synthetic.T0 + i / rate
        d = latency(i / rate)
        failed = bool(fail_every) and (i + 1) % fail_every == 0
        data.append(
            {
                "duration": d,
                "timestamp": start,
                "idle_duration": 0.0,
                "error": ["InternalServerError", "injected error (HTTP 500)", ""] if failed else [],
                "output": {"additive": [], "complete": []},
                "atomic_actions": [
                    {
                        "name": "keystone.validate_token",
                        "children": [],
                        "started_at": start,
                        "finished_at": start + d,
                        **({"failed": True} if failed else {}),
                    }
                ],
            }
        )
    return data


def workload_of(data: list[dict], slope_ok: bool = True, detail: str = "slope") -> results.Workload:
    wl = synthetic.workload(data, scenario="KeystoneTokens.validate", runner_type="rps")
    wl["sla_results"]["sla"].append(
        {"criterion": "latency_slope", "success": slope_ok, "detail": detail}
    )
    return results.from_report(synthetic.report([wl]))[0]


def judged(rps: float, data: list[dict], max_concurrency: int = 1000, **sla) -> Probe:
    probe = Probe(1, "search", rps, planned=len(data), max_concurrency=max_concurrency)
    return probe_verdict.judge(probe, workload_of(data, **sla), SETTINGS)


def test_a_flat_probe_at_its_rate_passes_with_its_figures():
    p = judged(40, open_loop(40, 40, lambda t: 0.020))
    assert p.verdict == OK
    assert p.sent_rate == pytest.approx(40, rel=1e-6)
    assert p.p50 == pytest.approx(0.020)
    assert p.slope == pytest.approx(0.0, abs=1e-9)
    assert p.iterations == 1600 and p.failed == 0
    assert p.peak_concurrency == 1


def test_a_failed_iteration_degrades_with_its_error():
    p = judged(40, open_loop(40, 40, lambda t: 0.020, fail_every=500))
    assert p.verdict == ERRORS
    assert p.reason == "3 of 1600 iterations failed: InternalServerError (HTTP 500)"


def test_a_failed_slope_sla_degrades_and_names_the_fitted_slope():
    p = judged(60, open_loop(60, 40, lambda t: 0.02 + 0.2 * t), slope_ok=False)
    assert p.verdict == SLOPE
    assert p.slope == pytest.approx(0.2, rel=1e-6)
    assert p.reason == "latency slope 0.2 s/s > 0.01"


def test_fewer_starts_than_95_percent_of_the_target_is_generator_limited():
    p = judged(100, open_loop(90, 40, lambda t: 0.020))
    assert p.verdict == GENERATOR
    assert p.sent_rate == pytest.approx(90, rel=1e-6)
    assert p.reason.startswith("sent 90.0 rps, 90% of the target")


def test_a_starved_generator_says_nothing_even_when_the_slope_failed():
    p = judged(60, open_loop(40, 40, lambda t: 0.02 + 0.2 * t), slope_ok=False)
    assert p.verdict == GENERATOR


def test_every_slot_in_flight_is_keystone_saturated_not_the_generator():
    # 20 slots, 1 s answers, 20 starts a second: the runner waited for Keystone
    p = judged(100, open_loop(20, 40, lambda t: 1.0), max_concurrency=20)
    assert p.peak_concurrency == 20
    assert p.verdict == SATURATED


def test_slots_seen_full_while_running_is_saturated():
    # the probe was stopped when every slot was in flight: the report alone may not show it
    probe = Probe(1, "search", 100, planned=4000, max_concurrency=500, slots_full=True)
    p = probe_verdict.judge(probe, workload_of(open_loop(60, 12, lambda t: 0.5)), SETTINGS)
    assert p.verdict == SATURATED
    assert p.stopped_early


def test_the_sent_rate_counts_starts_in_the_window_only():
    # a slow first 10 s (the warm-up) does not count against the generator
    starts = [i / 10 for i in range(100)] + [10 + i / 50 for i in range(1500)]
    assert probe_verdict.start_rate(starts, since=10) == pytest.approx(50)
    assert probe_verdict.start_rate(starts) < 45


def test_peak_in_flight_counts_overlaps_and_not_touching_ends():
    assert probe_verdict.peak_in_flight([0, 1, 2], [1, 1, 1]) == 1
    assert probe_verdict.peak_in_flight([0, 0.5, 0.6, 3], [1, 1, 1, 1]) == 3
    assert probe_verdict.peak_in_flight([], []) == 0


# -- the search on modelled targets ----------------------------------------------
class Model:
    """A target of known capacity: rates up to CAPACITY pass, above degrade (slope).

    Above GENERATOR_CEILING the generator cannot send the rate; FLAKY lists
    rates whose first probe (only) gives the wrong verdict.
    """

    def __init__(self, capacity_rps, generator_ceiling=float("inf"), flaky=()):
        self.capacity = capacity_rps
        self.ceiling = generator_ceiling
        self.flaky = set(flaky)
        self.probes: list[Probe] = []

    def __call__(self, rate: float, role: str) -> Probe:
        if rate > self.ceiling:
            verdict = GENERATOR
        else:
            verdict = OK if rate <= self.capacity else SLOPE
        if rate in self.flaky:
            self.flaky.discard(rate)
            verdict = SLOPE if verdict == OK else OK
        p = Probe(len(self.probes) + 1, role, rate, verdict=verdict, reason="modelled")
        self.probes.append(p)
        return p


@pytest.mark.parametrize("true_capacity", [1, 7.5, 49.6, 50, 123, 199.5])
def test_bisection_finds_n_on_the_precision_grid_and_confirms_it(true_capacity):
    model = Model(true_capacity)
    out = find_capacity(SETTINGS, model, say=lambda s: None)
    assert out.status == "found" and out.exit_code == 0
    assert out.n == int(true_capacity)
    assert out.confirmed
    roles = [p.role for p in out.probes]
    assert roles[-2:] == ["confirm N", "confirm N+1"]
    assert [p.rps for p in out.probes[-2:]] == [out.n, out.n + 1]
    assert len(out.probes) <= capacity.estimated_probes(SETTINGS)
    assert capacity.estimated_probes(SETTINGS) == 10


def test_a_mock_of_50_rps_is_found_in_at_most_ten_probes():
    out = find_capacity(SETTINGS, Model(50), say=lambda s: None)
    assert out.n == 50
    assert len(out.probes) <= 10
    assert [p.rps for p in out.probes[:2]] == [101, 51]  # linear: the middle of [1, 200] first


def test_a_confirmation_that_fails_resumes_the_search_below():
    # 45 passes once by chance during the search; its confirmation fails
    out = find_capacity(SETTINGS, Model(44, flaky=[45]), say=lambda s: None)
    assert out.n == 44 and out.status == "found" and out.confirmed
    assert [p.rps for p in out.probes if p.role == "confirm N"] == [45, 44]
    assert [p.rps for p in out.probes[-2:]] == [44, 45]


def test_a_confirmation_of_n_plus_1_that_passes_resumes_the_search_above():
    # 47 fails once by chance during the search; N + 1 = 47 then passes
    out = find_capacity(SETTINGS, Model(47, flaky=[47]), say=lambda s: None)
    assert out.n == 47 and out.confirmed
    assert [(p.rps, p.role) for p in out.probes if p.role != "search"] == [
        (46, "confirm N"),
        (47, "confirm N+1"),
        (47, "confirm N"),
        (48, "confirm N+1"),
    ]


def test_repeats_that_keep_disagreeing_give_n_with_its_spread():
    out = find_capacity(SETTINGS, Model(50, flaky=[50, 51]), say=lambda s: None)
    assert out.status == "found" and out.n == 50 and out.confirmed
    assert out.spread == (49, 51)  # 50 failed once, 51 passed once
    assert out.message == "N = 50 rps (49-51 rps across repeats); 51 rps is degraded (slope)"
    assert len(out.probes) < 25


def test_generator_limited_probes_cap_the_search_and_n_is_a_lower_bound():
    model = Model(150, generator_ceiling=80)
    out = find_capacity(SETTINGS, model, say=lambda s: None)
    assert out.status == "lower bound" and out.limited_by == "generator"
    assert out.exit_code == 0
    assert out.n == 80
    assert out.message.startswith("N >= 80 rps, generator-limited at 81 rps")
    first_limited = next(p.number for p in out.probes if p.verdict == GENERATOR)
    later = [p.rps for p in out.probes if p.number > first_limited and p.role == "search"]
    assert all(r < 101 for r in later)  # nothing above the first generator-limited rate


def test_no_degradation_up_to_high_is_a_lower_bound_at_high():
    out = find_capacity(SETTINGS, Model(1000), say=lambda s: None)
    assert out.status == "lower bound" and out.limited_by == "--high"
    assert out.n == 200
    assert out.probes[-1].rps == 200 and out.probes[-1].role == "confirm N+1"


def test_even_low_degrading_exits_1():
    out = find_capacity(SETTINGS, Model(0.5), say=lambda s: None)
    assert out.status == "low degrades" and out.exit_code == 1
    assert out.n is None
    assert out.probes[-1].rps == 1 and out.probes[-1].role == "confirm N"
    assert out.message.startswith("even --low 1 rps is degraded (slope)")


def test_even_low_generator_limited_is_not_measurable():
    out = find_capacity(SETTINGS, Model(100, generator_ceiling=0.5), say=lambda s: None)
    assert out.status == "not measurable" and out.exit_code == 2


def test_probe_rates_stay_on_the_grid_and_inside_the_range():
    s = Settings("authenticate", low=3, high=20, warmup=1, window=10, max_slope=0.01, precision=2)
    model = Model(12.7)
    out = find_capacity(s, model, say=lambda s: None)
    assert out.n == 11
    for p in out.probes:
        assert 3 <= p.rps <= 20
        assert (p.rps - 3) % 2 == 0


def test_task_args_size_the_probe():
    args = probe_args.task_args(SETTINGS, 50)
    assert args["times"] == 2000
    assert args["min_iterations"] == 30
    assert args["max_concurrency"] == 250
    assert probe_args.task_args(SETTINGS, 1)["min_iterations"] == 15
    assert probe_args.task_args(SETTINGS, 1)["max_concurrency"] == 20


# -- reports -------------------------------------------------------------------------
def test_reports_hold_the_probe_table_n_and_a_chart_from_the_data(tmp_path):
    probes = []
    for i, (rate, verdict) in enumerate([(100, SLOPE), (50, OK), (75, SLOPE)], 1):
        p = Probe(i, "search", rate, verdict=verdict, reason="r", planned=10, iterations=10)
        p.sent_rate, p.p50, p.p95, p.p99 = rate * 0.99, 0.02 * i, 0.03 * i, 0.04 * i
        probes.append(p)
    out = capacity.Outcome(50, "found", None, True, "N = 50 rps; 75 rps is degraded", probes)
    j, h = capacity_report.write_reports(
        out, SETTINGS, "mock", tmp_path, "2026-01-01T00:00:00", 12.0
    )
    data = json.loads(j.read_text())
    assert data["result"]["n_rps"] == 50 and data["result"]["status"] == "found"
    assert [p["rps"] for p in data["probes"]] == [100, 50, 75]
    html = h.read_text()
    assert "N = 50 rps; 75 rps is degraded" in html
    assert html.count("<svg") == 2
    assert html.count("<circle") == 2 * 3 + 3  # p50 and p95 per probe, then sent rates
    assert "<script" not in html
    assert "probe 2: 50 rps, p95 60.0 ms, ok" in html


def test_report_draws_latency_over_time_at_n_and_at_n_plus_1(tmp_path):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "rally-keystone-tokens.json"
    probes = [
        Probe(1, "search", 60, verdict=SLOPE, planned=10, iterations=10),
        Probe(2, "confirm N", 50, verdict=OK, planned=10, iterations=10),
        Probe(3, "confirm N+1", 51, verdict=SLOPE, planned=10, iterations=10),
    ]
    probes[1].report = probes[2].report = str(fixture)
    out = capacity.Outcome(50, "found", None, True, "N = 50 rps; 51 rps is degraded", probes)
    _, h = capacity_report.write_reports(out, SETTINGS, "mock", tmp_path, "2026-01-01", 1.0)
    html = h.read_text()
    assert html.count("<svg") == 4
    assert "50 rps (confirm N): " in html and "51 rps (confirm N+1): " in html
    assert html.count("latency over time") >= 2


@pytest.mark.parametrize("runner", ["pooled_rps", "rps"])
def test_the_probe_task_runs_the_chosen_runner(runner):
    import jinja2
    import yaml

    from rally_keystone_bench.shipped import probe_task_path

    settings = capacity.Settings("validate", 1, 100, 10, 30, 0.01, 1, runner=runner)
    text = jinja2.Environment().from_string(probe_task_path().read_text())
    task = yaml.safe_load(text.render(**probe_args.task_args(settings, 40)))
    (subtask,) = task["subtasks"]
    assert subtask["runner"] == {runner: {"rps": 40, "times": 1600, "max_concurrency": 200}}
    assert subtask["sla"]["latency_slope"]["action"] == "keystone.validate_token"


def checked(args):
    """capacity's search settings from ARGS, as its door checks them (no target started)."""
    asked = options.read(capacity_verb.CapacityArgs, args)
    return capacity_verb.check_settings(asked, capacity_verb.ENGINE.settings(args))


def test_runner_is_a_capacity_option():
    args = cli.build_parser().parse_args(["capacity", "--scenario", "validate", "--runner", "rps"])
    assert checked(args).runner == "rps"
    assert not checked(args).ramp  # rps cannot step its rate
    args = cli.build_parser().parse_args(["capacity", "--scenario", "validate"])
    assert checked(args).runner == "pooled_rps"
    assert checked(args).ramp  # both engines bracket first
    args = cli.build_parser().parse_args(["capacity", "--scenario", "validate", "--no-ramp"])
    assert not checked(args).ramp


def test_the_probe_task_takes_an_ldap_domains_users_when_given_one():
    import jinja2
    import yaml

    from rally_keystone_bench.shipped import probe_task_path

    settings = capacity.Settings("authenticate", 1, 100, 10, 30, 0.01, 1)
    text = jinja2.Environment().from_string(probe_task_path().read_text())
    args = probe_args.task_args(settings, 40)
    (ldap,) = yaml.safe_load(text.render(**args, ldap_domain="LDAP"))["subtasks"]
    assert ldap["contexts"]["keystone_users"]["existing"] is True
    assert ldap["contexts"]["keystone_users"]["domain"] == "LDAP"
    (sql,) = yaml.safe_load(text.render(**probe_args.task_args(settings, 40)))["subtasks"]
    assert "existing" not in sql["contexts"]["keystone_users"]


# -- the bracketing ramps ------------------------------------------------------
RAMPED = Settings("validate", 1, 200, 10, 30, 0.01, 1, ramp=True)


class RampModel(Model):
    """Model's target, probed by ramps too: each step judged as a probe of its rate."""

    def __init__(self, capacity_rps, **kw):
        super().__init__(capacity_rps, **kw)
        self.ramps: list[list[float]] = []
        self.lucky: set[float] = set()

    def ramp(self, rates):
        self.ramps.append(list(rates))
        number = len(self.probes) + 1
        out = []
        for i, rate in enumerate(rates):
            verdict = OK if rate <= self.capacity else SLOPE
            if rate in self.lucky:
                self.lucky.discard(rate)
                verdict = OK
            out.append(Probe(number, f"ramp {i + 1}/{len(rates)}", rate, verdict=verdict))
            if verdict != OK:
                break  # the run stops in the first step that degrades
        self.probes.append(out[-1])
        return out


def test_ramp_rates_double_on_the_grid_no_wider_than_16_equal_steps_ending_at_high():
    # doubling: steps under the knee for the utilization law (issue 46); 14 rps at most,
    # the step of 16 equal ones over [1, 200], so a high N is bracketed as finely as before
    assert ramp_rates(RAMPED) == [1, 2, 4, 8, 16, 30, 44, 58, 72, 86, 100, 114, 128,
                                  142, 156, 170, 184, 198, 200]  # fmt: skip
    assert refine_rates(RAMPED, 43, 57) == [43, 45, 47, 49, 51, 53, 55]
    assert refine_rates(RAMPED, 49, 51) == []  # bisect what is left
    narrow = Settings("validate", 36, 64, 3, 8, 0.01, 4, ramp=True)
    assert ramp_rates(narrow) == [36, 40, 44, 48, 52, 56, 60, 64]


@pytest.mark.parametrize("true_capacity, ramps", [(1, 1), (7.5, 2), (50, 2), (123, 2), (199.5, 1)])
def test_two_ramps_then_bisection_find_n_in_five_runs(true_capacity, ramps):
    model = RampModel(true_capacity)
    out = find_capacity(RAMPED, model, say=lambda s: None, ramp=model.ramp)
    assert out.status == "found" and out.n == int(true_capacity) and out.confirmed
    assert [p.rps for p in out.probes[-2:]] == [out.n, out.n + 1]
    # two ramps, a probe or two inside their bracket, the two confirmations; no finer
    # ramp where the first one's bracket is a grid step or two ([1, 2), [198, 200))
    assert len(model.ramps) == ramps
    assert len(model.probes) <= capacity.estimated_probes(RAMPED) + 1
    if ramps == 2:
        assert model.ramps[1][0] == max(r for r in model.ramps[0] if r <= true_capacity)


def test_a_ramp_that_never_degrades_leaves_n_a_lower_bound_at_high():
    model = RampModel(1000)
    out = find_capacity(RAMPED, model, say=lambda s: None, ramp=model.ramp)
    assert out.status == "lower bound" and out.n == 200
    assert len(model.ramps) == 1  # nothing to refine


def test_a_ramp_step_wrongly_passed_costs_probes_not_a_wrong_n():
    # the first ramp's step at 58 rps passes by chance: its bracket is [58, 72]
    model = RampModel(50)
    model.lucky = {58}
    out = find_capacity(RAMPED, model, say=lambda s: None, ramp=model.ramp)
    assert out.n == 50 and out.status == "found" and out.confirmed
    assert [p.rps for p in out.probes[-2:]] == [50, 51]


def ramp_workload(rates_seconds, service, fail_at=None) -> results.Workload:
    """Iterations of a ramp through RATES_SECONDS; SERVICE(rate) is each one's duration."""
    data, t = [], 0.0
    for rate, seconds in rates_seconds:
        for i in range(int(rate * seconds)):
            start = synthetic.T0 + t + i / rate
            d = service(rate, i / rate)
            failed = fail_at is not None and abs(start - synthetic.T0 - fail_at) < 1e-9
            data.append(
                {
                    "duration": d,
                    "timestamp": start,
                    "intended_start": start,
                    "idle_duration": 0.0,
                    "error": ["InternalServerError", "boom (HTTP 500)", ""] if failed else [],
                    "output": {"additive": [], "complete": []},
                    "atomic_actions": [
                        {
                            "name": "keystone.validate_token",
                            "children": [],
                            "started_at": start,
                            "finished_at": start + d,
                            **({"failed": True} if failed else {}),
                        }
                    ],
                }
            )
        t += seconds
    wl = synthetic.workload(data, scenario="KeystoneTokens.validate", runner_type="pooled_rps")
    return results.from_report(synthetic.report([wl]))[0]


def test_each_step_of_a_ramp_is_judged_on_its_own_iterations():
    steps = [(10, 15), (20, 5), (40, 5)]  # 10 s of warm-up in the first step
    # flat at 10 and 20 rps; at 40 rps the latency grows 0.1 s every second
    wl = ramp_workload(steps, lambda rate, t: 0.02 + (0.1 * (t % 5) if rate == 40 else 0))
    zero = ramp_zero(wl)
    assert zero == synthetic.T0
    s = RAMPED
    verdicts = []
    for (rate, _), (lo, hi) in zip(steps, [(10, 15), (15, 20), (20, 25)], strict=True):
        part = step_workload(wl, zero + lo - 0.5 / rate, zero + hi - 0.5 / rate)
        assert part.iterations == rate * 5  # its own, none of the neighbours'
        probe = Probe(1, "ramp", rate, planned=rate * 5, max_concurrency=s.ramp_slots(rate))
        probe_verdict.judge(probe, part, Settings("validate", 1, 200, 0, 30, 0.01, 1))
        verdicts.append(probe.verdict)
        assert probe.sent_rate == pytest.approx(rate)
    assert verdicts == [OK, OK, SLOPE]


def test_a_failure_in_a_step_degrades_that_step_only():
    wl = ramp_workload([(10, 10), (20, 5)], lambda rate, t: 0.02, fail_at=12.0)
    zero = ramp_zero(wl)
    first = step_workload(wl, zero - 0.05, zero + 10 - 0.05)
    second = step_workload(wl, zero + 10 - 0.025, zero + 15 - 0.025)
    assert (first.failed_iterations, second.failed_iterations) == (0, 1)
    assert first.errors == [] and second.errors[0].status == 500


@pytest.mark.parametrize(
    "rate, seconds, verdict",
    [(4, 5, OK), (6, 5, SLOPE), (4, 8, SLOPE)],  # 20 requests: the slope is not judged
)
def test_a_ramp_step_too_short_for_the_slope_is_judged_on_errors_and_saturation(
    rate, seconds, verdict
):
    # latency rising 0.02 s every second: twice the --max-slope of 0.01
    wl = ramp_workload([(rate, seconds)], lambda rate, t: 0.05 + 0.02 * t)
    probe = Probe(1, "ramp 1/3", rate, planned=rate * seconds, max_concurrency=20)
    ramps.judge_step(probe, wl, RAMPED)
    assert probe.verdict == verdict
    if verdict == OK:
        assert "slope 0.02 s/s not judged on 20 requests (fewer than 30)" in probe.reason
    failing = ramp_workload([(rate, seconds)], lambda rate, t: 0.05 + 0.02 * t, fail_at=1.0)
    probe = Probe(1, "ramp 1/3", rate, planned=rate * seconds, max_concurrency=20)
    assert ramps.judge_step(probe, failing, RAMPED).verdict == ERRORS  # errors still count


def test_the_ramp_task_runs_pooled_rps_through_the_steps_without_a_slope_sla():
    import jinja2
    import yaml

    text = jinja2.Environment().from_string(shipped.probe_task_path().read_text())
    args = probe_args.ramp_task_args(RAMPED, [1, 15, 29])
    (subtask,) = yaml.safe_load(text.render(**args))["subtasks"]
    runner = subtask["runner"]["pooled_rps"]
    # every step 5 s (the first one after the warm-up): a low one is not held longer
    assert runner["rps"] == {"steps": [[1, 15.0], [15, 5.0], [29, 5.0]]}
    assert runner["times"] == 15 + 75 + 145 and runner["max_concurrency"] == 145
    assert set(subtask["sla"]) == {"failure_rate"}


def test_the_watcher_holds_a_ramp_to_each_steps_rate_and_slots():
    task_args = probe_args.ramp_task_args(RAMPED, [10, 20])
    w = probers.ProbeWatcher(
        task_args, True, print, 1, task_args["times"],
        steps=RAMPED.ramp_steps([10, 20]), slots_for=RAMPED.ramp_slots,
    )  # fmt: skip
    assert [w.rate_at(t) for t in (0, 14.9, 15, 19.9, 25)] == [10, 10, 20, 20, 20]
    assert w.due_by(15) == 150 and w.due_by(17.5) == 200 and w.due_by(100) == 250
    w.first = 0.0
    # at 10 rps, 20 in flight hold 2 s of answers: the ramp stops; 19 do not
    assert w.reason_to_stop(rally_counts(150, 130), 14) == probers.SLOTS_FULL
    assert w.reason_to_stop(rally_counts(150, 131), 14) is None
    # at 20 rps the slots are 40, and 150 started by 16 s is on schedule
    assert w.reason_to_stop(rally_counts(150, 125), 16) is None
    # by 19 s 230 were due: 150 is behind
    assert "behind 20 rps" in w.reason_to_stop(rally_counts(150, 150), 19)
    assert w.reason_to_stop(rally_counts(150, 150, failed=1), 16) == "an iteration failed"


def rally_counts(started: int, done: int, failed: int = 0):
    from rally_keystone_bench.driver import task as rally_task

    return rally_task.Counts(started=started, done=done, failed=failed)


def test_a_range_of_two_grid_steps_is_bisected_without_a_ramp():
    narrow = Settings("validate", 70, 80, 3, 8, 0.01, 10, ramp=True)
    model = RampModel(100)
    out = find_capacity(narrow, model, say=lambda s: None, ramp=model.ramp)
    assert model.ramps == [] and out.n == 80


@pytest.mark.parametrize("engine", ["locust", "rally"])
def test_workers_off_the_local_target_is_refused_not_ignored(engine, capsys):
    # capacity's --workers is the local Keystone's; `load --workers` is Locust's.
    # A Locust user typing --workers 2 against the mock must not get 1 worker silently.
    argv = ["capacity", "--scenario", "validate", "--engine", engine, "--workers", "2",
            "--target", "mock"]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--target local" in err
    assert ("--locust-workers K" in err) == (engine == "locust")
    args = cli.build_parser().parse_args(argv[:-2] + ["--target", "local"])
    assert checked(args).engine == engine


def _scripted_ramp(model, second, first):
    """Ramps with FIRST's steps, then SECOND's (rate -> (verdict, slope))."""
    ramps = []

    def ramp(rates):
        ramps.append(list(rates))
        number = len(model.probes) + 1
        verdicts = first if len(ramps) == 1 else second
        out = []
        for i, rate in enumerate(rates):
            if rate not in verdicts:
                break
            verdict, slope = verdicts[rate]
            role = f"ramp {i + 1}/{len(rates)}"
            out.append(Probe(number, role, rate, verdict=verdict, slope=slope))
        model.probes.append(out[-1])
        return out

    return ramp


def test_a_ramp_step_marginally_degraded_by_its_slope_does_not_bound_n_below_a_harder_failure():
    # 2026-11-28: 7 rps was degraded (slope 0.0155 s/s) in the finer ramp, 9 and 11
    # saturated, while whole probes at 7 passed and 8 saturated. Bounded at 7, the
    # search spent 8 probes. The first ramp now doubles (1, 2, 4, 8, 16): the same
    # figures at its 8 and 16 rps, bracketed up to 16, leave whole probes to decide.
    said = []
    model = Model(7)
    first = {1: (OK, 0.0), 2: (OK, 0.0), 4: (OK, 0.0), 8: (SLOPE, 0.0155),
             16: (SATURATED, 0.25)}  # fmt: skip
    second = {4: (OK, 0.0), 6: (OK, 0.0), 8: (SATURATED, 0.08)}
    ramp = _scripted_ramp(model, second, first)
    out = find_capacity(RAMPED, model, say=said.append, ramp=ramp)
    assert out.status == "found" and out.n == 7 and out.confirmed
    assert [(p.role, p.rps) for p in out.probes if not p.role.startswith("ramp")] == [
        ("search", 7), ("confirm N", 7), ("confirm N+1", 8),
    ]  # fmt: skip
    assert "ramp: N in [4, 16) rps" in said and "ramp: N in [6, 8) rps" in said
    assert any("8 rps was degraded (slope) only, by a slope under 2 times" in s for s in said)


def test_a_ramp_step_clearly_degraded_by_its_slope_still_bounds_n():
    # 2026-11-28: validations at 25 a second gave 0.071 and 0.090 s/s in the ramp,
    # and whole probes at 25 degraded too: bracketing past it cost a probe each time.
    # (The finer ramp's rates follow the doubling first one's bracket, [16, 30).)
    said = []
    model = Model(23)
    second = {16: (OK, 0.0), 18: (OK, 0.0), 20: (OK, 0.0), 22: (OK, 0.0),
              24: (SLOPE, 0.0897), 26: (SATURATED, 0.175)}  # fmt: skip
    first = {r: (OK, 0.0) for r in (1, 2, 4, 8, 16)} | {30: (SATURATED, 0.32)}
    ramp = _scripted_ramp(model, second, first)
    out = find_capacity(RAMPED, model, say=said.append, ramp=ramp)
    assert out.n == 23 and out.confirmed
    assert "ramp: N in [22, 24) rps" in said
    assert [(p.role, p.rps) for p in out.probes if not p.role.startswith("ramp")] == [
        ("search", 23), ("confirm N", 23), ("confirm N+1", 24),
    ]  # fmt: skip


def test_a_slope_step_with_no_harder_failure_after_it_still_bounds_n():
    model = RampModel(50)  # its ramps stop at the first degraded step, by slope
    out = find_capacity(RAMPED, model, say=lambda s: None, ramp=model.ramp)
    assert out.n == 50 and out.confirmed
    assert len(model.probes) <= capacity.estimated_probes(RAMPED) + 1
