"""The capacity search that walks from the knee Keystone's busy time predicts (issue 46).

The prediction is checked on probe evidence recorded on this project's
test machines (doc/source/capacity.rst, the issue); the search on a
modelled Keystone whose workers follow the utilization law, and on one
whose capacity falls as the load rises, where the prediction misses and
the search must fall back to bisection and say so.
"""

from __future__ import annotations

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.driver import probers, targets
from rally_keystone_bench.verdicts import capacity, capacity_search, knee
from rally_keystone_bench.verdicts.capacity import Settings
from rally_keystone_bench.verdicts.probe_verdict import OK, SATURATED, SLOPE, Probe

SEARCH = Settings("validate", 1, 200, 10, 30, 0.01, 1, ramp=True, predict=True)


def evidence(rows) -> list[Probe]:
    """Probes of (rate, verdict, workers' busy share) rows, as capacity.json records them."""
    return [
        Probe(i + 1, "ramp", rate, verdict=verdict, sent_rate=rate, server_busy=busy)
        for i, (rate, verdict, busy) in enumerate(rows)
    ]


# -- the prediction on recorded evidence -------------------------------------------
def test_password_tokens_recorded_on_two_workers_predict_from_the_busiest_probe():
    # doc/source/capacity.rst, the idle Intel Xeon: authenticate, N = 7 confirmed
    probes = evidence(
        [
            (1, OK, 0.14), (15, SATURATED, 1.01), (29, SATURATED, 1.02),
            (3, OK, 0.42), (5, OK, 0.70), (7, SLOPE, 1.00), (6, OK, 0.87),
        ]
    )  # fmt: skip
    p = knee.predict(probes, SEARCH)
    assert p is not None
    assert p.saturation == pytest.approx(6.9, abs=0.1)  # 6 rps, 87 % busy
    assert p.n == 6  # N at or below the bound: the walk then confirms 7 above it
    assert [rate for rate, _ in p.evidence] == [1, 3, 5, 6]  # the degraded steps say nothing
    assert "from the busiest, they saturate near 6.9 rps" in p.describe()


def test_validations_recorded_in_the_issue_predict_from_the_busier_of_two_probes():
    # issue 46, the idle 2-core EPYC: 15 rps with the workers 64 % busy, 19 rps 78 %
    p = knee.predict(evidence([(15, OK, 0.64), (19, OK, 0.78)]), SEARCH)
    assert p is not None and p.saturation == pytest.approx(24.4, abs=0.1)
    assert p.n == 24


def test_a_request_cheaper_at_higher_rates_is_predicted_from_the_step_nearest_the_knee():
    # the idle Xeon, validate on PostgreSQL (2026-11-29): the ramp's steps cost 131, 119,
    # 115 and 105.7 ms of worker time a validation at 2, 4, 8 and 16 rps; the search
    # found N = 20. Their median said 17; the 16-rps step alone says 18.9.
    steps = [(rate, OK, rate * ms / 1000 / 2) for rate, ms in ((2, 131), (4, 119), (8, 115))]
    p = knee.predict(evidence([*steps, (16, OK, 16 * 0.1057 / 2)]), SEARCH)
    assert p.saturation == pytest.approx(18.9, abs=0.05) and p.n == 18


def test_no_prediction_without_a_passing_probe_busy_enough_to_time():
    assert knee.predict(evidence([(1, OK, 0.02), (14, SLOPE, 0.9)]), SEARCH) is None
    assert knee.predict(evidence([(1, OK, None)]), SEARCH) is None
    # on the grid and inside the range
    narrow = Settings("validate", 10, 20, 10, 30, 0.01, 4, ramp=True, predict=True)
    assert knee.predict(evidence([(10, OK, 0.5)]), narrow).n == 18  # 20 rps bound -> 18
    assert knee.predict(evidence([(1, OK, 0.01 * 1.0 + 0.1)]), narrow).n == 10


# -- the search on modelled Keystones -----------------------------------------------
class LawModel:
    """A Keystone of WORKERS workers spending DEMAND(rate) seconds a request: its workers
    are rate * demand / workers busy; a rate degrades once they would be busier than
    FULL. With a constant demand the prediction is right; a demand that grows with the
    load is a capacity that changes with it, and the prediction made at low rates misses.
    """

    def __init__(self, demand, workers=2, full=0.97, plan=None):
        self.demand, self.workers, self.full = demand, workers, full
        self.probes: list[Probe] = []
        self.ramps: list[list[float]] = []
        self.plan = plan
        self.count = 0
        self.said_about: list[tuple[int, int]] = []  # (probe k, "of about" M) as printed

    def busy(self, rate):
        return rate * self.demand(rate) / self.workers

    def judged(self, number, role, rate):
        busy = self.busy(rate)
        verdict = OK if busy <= self.full else (SATURATED if busy > 1.1 else SLOPE)
        return Probe(
            number, role, rate, verdict=verdict, sent_rate=rate, server_busy=min(busy, 1.0)
        )

    def _count(self):
        self.count += 1
        if self.plan is not None:
            self.said_about.append((self.count, self.plan.about))

    def __call__(self, rate, role):
        self._count()
        p = self.judged(self.count, role, rate)
        self.probes.append(p)
        return p

    def ramp(self, rates):
        self._count()
        self.ramps.append(list(rates))
        out = []
        for i, rate in enumerate(rates):
            out.append(self.judged(self.count, f"ramp {i + 1}/{len(rates)}", rate))
            if not out[-1].passed:
                break
        self.probes.append(out[-1])
        return out


def search(model, settings=SEARCH):
    said: list[str] = []
    plan = capacity.Plan(capacity.estimated_probes(settings))
    model.plan = plan
    out = capacity_search.find_capacity(
        settings, model, say=said.append, ramp=model.ramp, plan=plan
    )
    return out, said, plan


def test_a_right_prediction_confirms_n_with_one_ramp_and_two_whole_probes():
    model = LawModel(lambda rate: 0.08)  # 2 workers, 80 ms: saturated at 25 rps
    out, said, plan = search(model)
    assert out.status == "found" and out.confirmed and out.n == 24
    whole = [(p.role, p.rps, p.verdict) for p in out.probes if not p.role.startswith("ramp")]
    assert whole == [("predicted N", 25, SLOPE), ("confirm N", 24, OK)]
    assert len(model.ramps) == 1 and model.count == 3 == plan.about
    assert not plan.reasons and not any(line.startswith("plan:") for line in said)
    assert out.message == "N = 24 rps; 25 rps is degraded (slope)"
    assert out.prediction.startswith("predicted 25 rps (saturation near 25.0 rps): N found")
    assert out.prediction_held == "held"
    assert any(line.startswith("predicted: Keystone's workers were") for line in said)


def test_a_prediction_one_step_low_walks_up_and_confirms_there():
    model = LawModel(lambda rate: 0.08, full=1.0)  # 25 rps passes: N is the bound itself
    out, _, _ = search(model)
    assert out.n == 25 and out.confirmed
    whole = [(p.role, p.rps) for p in out.probes if not p.role.startswith("ramp")]
    assert whole == [("predicted N", 25), ("confirm N+1", 26)]


def test_a_capacity_that_falls_with_the_load_is_found_by_the_walk_down_from_the_prediction():
    # 80 ms a request up to 16 rps (the ramp's 16-rps step predicts 25 rps), then
    # contention: each request costs more the more arrive; it degrades above 17 rps
    def demand(rate):
        return 0.08 if rate <= 16 else 0.08 + 0.03 * (rate - 16)

    model = LawModel(demand)
    out, said, plan = search(model)
    true_n = max(r for r in range(1, 40) if model.busy(r) <= model.full)
    assert true_n == 17
    assert out.status == "found" and out.n == true_n and out.confirmed
    walked = [p.rps for p in out.probes if not p.role.startswith("ramp")]
    assert walked == [25, 24, 22, 18, 17]  # down one step, twice as far, then the ramp's pass + 1
    assert [line for line in said if line.startswith("walk:")] == [
        "walk: 25 rps degraded: the walk goes on down to 24 rps",
        "walk: 25 to 24 rps degraded: the walk goes on down to 22 rps",
        "walk: 25 to 22 rps degraded: the walk goes on down to 18 rps",
        "walk: 25 to 18 rps degraded: the walk goes on down to 17 rps",
    ]
    # N and N + 1 are the walk's own whole probes: no bisection, no confirmation again
    assert not any("missed" in line for line in said)
    assert out.prediction == (
        "predicted 25 rps (saturation near 25.0 rps): N found 8 rps below it by 5 whole "
        "probes from there"
    )
    assert out.prediction_held == "walked"
    # the plan grew, each time with a reason said, and never lagged the probe count
    grown = [line for line in said if line.startswith("plan: about")]
    assert grown == [
        f"plan: about {k + 1} probes now: the walk's probe {k} (10 whole probes at most)"
        for k in (3, 4, 5)
    ]
    assert all(k <= about for k, about in model.said_about)
    assert plan.about == model.count == 6


class Worn(LawModel):
    """A Keystone whose whole probes cost WEAR times more with every probe run before them
    (a capacity that falls under sustained load: a table or a cache that grows): no two
    probes see the same Keystone, and no prediction holds."""

    def __init__(self, demand, wear):
        super().__init__(demand)
        self.wear = wear

    def judged(self, number, role, rate):
        if role.startswith("ramp"):
            return super().judged(number, role, rate)
        busy = self.busy(rate) * (1 + self.wear * (number - 1))
        verdict = OK if busy <= self.full else (SATURATED if busy > 1.1 else SLOPE)
        return Probe(
            number, role, rate, verdict=verdict, sent_rate=rate, server_busy=min(busy, 1.0)
        )


def test_a_walk_that_does_not_find_the_edge_says_the_prediction_missed_and_bisects():
    model = Worn(lambda rate: 0.08, 0.15)  # the ramp predicts 25 rps; whole probes wear it
    out, said, plan = search(model)
    walked = [(p.rps, p.passed) for p in out.probes if not p.role.startswith("ramp")]
    assert len(walked) > capacity.WALK_PROBES
    assert walked[: capacity.WALK_PROBES] == [
        (25, False), (24, False), (22, False), (18, False), (17, False), (16, False),
        (9, True), (13, False), (12, False), (11, False),
    ]  # fmt: skip
    assert [line for line in said if line.startswith("the prediction missed")] == [
        "the prediction missed (9 rps passed and 11 rps degraded, still apart after 10 "
        "probes from 25 rps): bisecting [9, 11) rps as without one"
    ]
    assert out.prediction.endswith(
        "missed (9 rps passed and 11 rps degraded, still apart), found by bisection"
    )
    # the bisection's answer (9 failed its confirmation: the search resumed below it),
    # confirmed by N and N + 1 probed last
    assert out.status == "found" and out.confirmed and out.n == 8
    assert [(p.role, p.rps, p.passed) for p in out.probes[-2:]] == [
        ("confirm N", 8, True), ("confirm N+1", 9, False),
    ]  # fmt: skip
    assert "the prediction missed: bisection and two confirmations" in plan.reasons
    assert out.prediction_held == "missed"
    assert all(k <= about for k, about in model.said_about) and plan.about >= model.count


class RampHarsh(LawModel):
    """A Keystone whose requests cost FACTOR times more in the ramp's short steps than in
    whole probes (seen: 75-87 ms a validation in the steps, 66-79 ms in whole probes at
    23-29 rps, on the idle EPYC of 2026-11-29): the ramp predicts N too low."""

    def __init__(self, demand, factor):
        super().__init__(demand)
        self.factor = factor

    def judged(self, number, role, rate):
        if not role.startswith("ramp"):
            return super().judged(number, role, rate)
        busy = self.busy(rate) * self.factor
        verdict = OK if busy <= self.full else (SATURATED if busy > 1.1 else SLOPE)
        return Probe(
            number, role, rate, verdict=verdict, sent_rate=rate, server_busy=min(busy, 1.0)
        )


def test_a_prediction_far_too_low_climbs_in_one_jump_from_the_first_whole_probe():
    # 70 ms a request on 2 workers, 28.6 rps at saturation; the ramp's steps cost 1.3
    # times that: its 16-rps step (73 % busy) predicts 22.0 rps
    model = RampHarsh(lambda rate: 0.07, 1.3)
    out, said, plan = search(model)
    true_n = max(r for r in range(1, 60) if model.busy(r) <= model.full)
    assert true_n == 27 and out.n == true_n and out.confirmed
    whole = [(p.role, p.rps, p.verdict) for p in out.probes if not p.role.startswith("ramp")]
    assert whole == [
        ("predicted N", 21, OK),  # 74 % busy: saturation near 28.6
        ("predicted N", 28, SLOPE),
        ("confirm N", 27, OK),
    ]
    assert (
        "walk: 21 rps passed; Keystone's workers now put saturation near 28.6 rps: "
        "the walk probes 28 rps"
    ) in said
    assert out.prediction == (
        "predicted 21 rps (saturation near 22.0 rps): N found 6 rps above it by 3 whole "
        "probes from there"
    )
    assert plan.about == model.count == 4


def test_a_capacity_that_rises_past_the_prediction_walks_up_in_jumps():
    # requests get cheaper under load (batched commits, warm caches): 40 rps passes
    model = LawModel(lambda rate: 0.08 if rate <= 15 else 0.05)
    out, said, _ = search(model)
    assert out.n == 38 and out.confirmed  # 2 workers at 50 ms, 97 % busy
    assert "N found by" in out.prediction and not any("missed" in line for line in said)


class Cheapening(LawModel):
    """Validations that cost less the faster they come, as on the EPYC of 2026-11-30 (153
    ms of worker time at 8 rps, 80-98 ms at 20-22): the workers' busy share at each rate
    r that passes puts saturation one request a second above it (r / (r + 1) busy), and
    whole probes pass up to CAPACITY. The ramp's 16-rps step predicts 16."""

    def __init__(self, capacity_rps):
        super().__init__(lambda rate: 0.1)
        self.capacity_rps = capacity_rps

    def judged(self, number, role, rate):
        if role.startswith("ramp") and rate < 30:
            return Probe(number, role, rate, verdict=OK, sent_rate=rate, server_busy=rate / 16.5)
        ok = rate <= self.capacity_rps
        busy = rate / (rate + 1) if ok else 1.0
        return Probe(
            number, role, rate, verdict=OK if ok else SLOPE, sent_rate=rate, server_busy=busy
        )


def test_a_prediction_that_keeps_saying_one_step_more_is_outrun_by_growing_steps():
    model = Cheapening(22)
    out, said, plan = search(model)
    assert out.status == "found" and out.confirmed and out.n == 22
    whole = [(p.rps, p.passed) for p in out.probes if not p.role.startswith("ramp")]
    # one step after each of the first three passes, then two, then four; then between
    # 21 and 25
    assert whole == [
        (16, True), (17, True), (18, True), (19, True), (21, True), (25, False), (23, False),
        (22, True),
    ]  # fmt: skip
    assert "walk: 18 rps passed: the walk goes on up to 19 rps" in said
    assert "walk: 19 rps passed, its fourth pass in a row: the walk goes on up to 21 rps" in said
    assert "walk: 21 rps passed, its fifth pass in a row: the walk goes on up to 25 rps" in said
    assert "walk: 21 rps passed and 25 rps degraded; the walk probes the middle 23 rps" in said
    assert not any("missed" in line for line in said)
    assert out.prediction.endswith("N found 6 rps above it by 8 whole probes from there")
    assert plan.about == model.count == 9
    # one step a probe would have taken 16 to 23: the same 8; from 9 above the prediction
    # on, the growing steps take fewer (the walk's probes grow with the log of the distance)
    far = Cheapening(29)
    out, _, _ = search(far)
    assert out.n == 29 and far.count - 1 == 8 < 29 + 2 - 16


def test_without_keystone_side_figures_the_search_says_so_and_runs_as_before():
    class Blind(LawModel):
        def judged(self, number, role, rate):
            p = super().judged(number, role, rate)
            p.server_busy = None
            return p

    out, said, plan = search(Blind(lambda rate: 0.08))
    assert out.n == 24 and out.confirmed and out.prediction is None
    assert "no prediction: Keystone's busy time was not measured (no access log)" in said
    assert plan.reasons[0].startswith("no prediction: a finer ramp")


def test_the_plan_of_a_predicted_search_is_the_ramp_and_two_probes():
    assert capacity.estimated_probes(SEARCH) == 3
    assert capacity.estimated_probes(Settings("validate", 1, 200, 10, 30, 0.01, 1, ramp=True)) == 5
    plan = capacity.Plan(3)
    assert plan.grow(3, "nothing") is None and plan.about == 3
    assert plan.grow(5, "a reason") == "plan: about 5 probes now: a reason"
    assert plan.grow(4, "smaller") is None and plan.about == 5 and plan.reasons == ["a reason"]


# -- the interval, in order -----------------------------------------------------------
def test_the_interval_reads_ok_then_degraded_even_when_a_lower_rate_failed_once():
    # issue 46: a ramp step at 21 rps "degraded (slope)" while 23, 25 and 27 passed
    probes = evidence([(15, OK, 0.6), (21, SLOPE, 0.8), (23, OK, 0.9), (25, OK, 0.9)])
    probes += evidence([(27, OK, 0.95), (29, SATURATED, 1.0)])
    assert capacity.interval(probes) == (27, 29, [21])
    assert probers.so_far(probes) == (
        "N in [27, 29) rps so far (21 rps did not pass once, below it)"
    )
    assert probers.so_far(probes[:1]) == "N >= 15 rps so far"
    assert probers.so_far(evidence([(9, SLOPE, 1.0)])) == "N < 9 rps so far"
    ok, degraded, _ = capacity.interval(probes)
    assert ok < degraded


# -- the option ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, reason",
    [
        (["--target", "mock", "--predict"], "--predict reads a local Keystone's access log"),
        (["--engine", "locust", "--predict"], "it needs --target local and --engine rally"),
        (["--no-ramp", "--predict"], "--predict reads the ramp's Keystone-side figures"),
    ],
)
def test_predict_where_it_cannot_work_exits_2_before_any_load(argv, reason, capsys, monkeypatch):
    def no_target(*a, **k):  # pragma: no cover - reached only by a defect
        raise AssertionError("a target was prepared for bad input")

    monkeypatch.setattr(targets, "prepared_env", no_target)
    code = cli.main(["capacity", "--scenario", "validate", *argv, "--reports-dir", "/nonexistent"])
    assert code == 2
    assert reason in capsys.readouterr().err


def test_the_report_draws_n_and_n_plus_1_from_the_walks_probes_too():
    from rally_keystone_bench.report import capacity as capacity_report

    model = LawModel(lambda rate: 0.08)
    out, _, _ = search(model)
    for p in out.probes:
        p.report = "probe.json"
    pair = capacity_report.n_pair(out.probes, out.n)
    assert [(p.role, p.rps, p.passed) for p in pair] == [
        ("confirm N", 24, True),
        ("predicted N", 25, False),
    ]


def test_the_page_says_the_walk_found_n_and_how_far_from_the_prediction(monkeypatch):
    from rally_keystone_bench.report import capacity as capacity_report

    monkeypatch.setattr(capacity_report, "machine", lambda: {"arch": "x", "cores": 2, "cpu": "c"})
    for model, method in (
        (RampHarsh(lambda rate: 0.07, 1.3), "walked from the knee Keystone's busy time predicted"),
        (LawModel(lambda rate: 0.08, full=1.0), "walked from the knee"),
    ):
        out, _, _ = search(model)
        summary = capacity_report.build_summary(out, SEARCH, "local", "t0", 1.0)
        page = " ".join(capacity_report.render_html(summary, out.probes, out.n).split())
        assert method in page and "by bisection" not in page
        assert f'<th class="l">prediction</th><td>{out.prediction}</td>' in page
        assert "whole probes from there" in out.prediction
    # a search without a prediction still says it bisected, and has no prediction row
    blind = Settings("validate", 1, 200, 10, 30, 0.01, 1, ramp=True)
    out, _, _ = search(LawModel(lambda rate: 0.08), blind)
    page = capacity_report.render_html(
        capacity_report.build_summary(out, blind, "local", "t0", 1.0), out.probes, out.n
    )
    assert "rps by bisection" in page and "prediction</th>" not in page
    assert out.prediction_held is None


def test_every_probe_of_a_search_on_a_local_keystone_names_one_users_tag():
    import argparse

    import jinja2
    import yaml

    from rally_keystone_bench.driver import probe_args
    from rally_keystone_bench.shipped import probe_task_path
    from rally_keystone_bench.verbs import capacity as capacity_verb

    local = argparse.Namespace(target="local")
    tag = capacity_verb.users_tag(local, {})
    assert tag.startswith("capacity-") and tag != capacity_verb.users_tag(local, {})
    assert capacity_verb.users_tag(argparse.Namespace(target="cloud"), {}) is None
    assert capacity_verb.users_tag(local, {"ldap_domain": "LDAP"}) is None
    text = jinja2.Environment().from_string(probe_task_path().read_text())
    for args in (
        probe_args.task_args(SEARCH, 40, tag),
        probe_args.ramp_task_args(SEARCH, [1, 9], tag),
    ):
        (sub,) = yaml.safe_load(text.render(**args))["subtasks"]
        assert sub["contexts"]["keystone_users"]["reuse"] == tag
        assert sub["contexts"]["token_pool"]["reuse"] == tag  # validate: one pool a search
    (sub,) = yaml.safe_load(text.render(**probe_args.task_args(SEARCH, 40)))["subtasks"]
    assert "reuse" not in sub["contexts"]["keystone_users"]


def test_a_ramp_whose_first_step_fails_prints_no_empty_interval():
    # seen on the machine at load 17: validations at 1 rps kept both workers 99 % busy
    out, said, _ = search(LawModel(lambda rate: 2.5))
    assert "ramp: its first step, 1 rps, did not pass: whole probes decide" in said
    assert not any("[1, 1)" in line for line in said)
    assert out.status == "low degrades" and out.exit_code == 1
