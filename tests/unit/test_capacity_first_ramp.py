"""N from the first ramp's prediction in a ramp and a few whole probes (issue 46).

One search recorded on the 2-core Intel Xeon (2026-11-29, validate on
SQLite, --warmup 10 --window 30) took 16.6 minutes and 13 probes to N = 19:
its first ramp (1, 15, 29 ... rps) had one step under the knee, too idle to
time, so a second ramp was needed; its 15-rps step saturated (the jump from
1 rps) while whole probes of 15-19 rps passed, and that step kept the walk
below it. tests/fixtures/capacity-validate-2026-11-29.json keeps every
probe's rate, verdict and Keystone's busy share; a Keystone that answers
from those figures is searched again here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rally_keystone_bench.verdicts import capacity, capacity_search, knee, ramps
from rally_keystone_bench.verdicts.capacity import Settings
from rally_keystone_bench.verdicts.probe_verdict import OK, SATURATED, SLOPE, Probe

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "capacity-validate-2026-11-29.json"
SEARCH = Settings("validate", 1, 200, 10, 30, 0.01, 1, ramp=True, predict=True)


def recorded() -> tuple[dict, list[dict]]:
    data = json.loads(FIXTURE.read_text())
    return data, [dict(zip(data["columns"], row, strict=True)) for row in data["probes"]]


class Searched:
    """Probes and ramps of a modelled Keystone, counted as the prober's progress lines
    count them ("probe k of about M" read from the plan as each run starts)."""

    def __init__(self) -> None:
        self.probes: list[Probe] = []
        self.ramps: list[list[float]] = []
        self.count = 0
        self.plan: capacity.Plan | None = None
        self.said_about: list[tuple[int, int]] = []

    def judged(self, number: int, role: str, rate: float) -> Probe:  # pragma: no cover
        raise NotImplementedError

    def _count(self) -> None:
        self.count += 1
        if self.plan is not None:
            self.said_about.append((self.count, self.plan.about))

    def __call__(self, rate: float, role: str) -> Probe:
        self._count()
        self.probes.append(self.judged(self.count, role, rate))
        return self.probes[-1]

    def ramp(self, rates: list[float]) -> list[Probe]:
        self._count()
        self.ramps.append(list(rates))
        out = []
        for i, rate in enumerate(rates):
            out.append(self.judged(self.count, f"ramp {i + 1}/{len(rates)}", rate))
            if not out[-1].passed:
                break  # the run stops in its first failed step
        self.probes.append(out[-1])
        return out

    def whole(self) -> list[tuple[str, float, str]]:
        return [(p.role, p.rps, p.verdict) for p in self.probes if not p.role.startswith("ramp")]


class RecordedKeystone(Searched):
    """The recorded Keystone: its workers' busy share at a rate interpolated between the
    recorded probes that passed; whole probes pass up to CAPACITY rps (19 as recorded)
    and above it fail as recorded (20 rps by its slope, 23 saturated), else by the
    slope; a ramp step of 15 rps or more fails as the first ramp's 15-rps step did."""

    def __init__(self, capacity_rps: float = 19) -> None:
        super().__init__()
        self.capacity = capacity_rps
        _, rows = recorded()
        passed: dict[float, list[float]] = {}
        for r in rows:
            if r["verdict"] == OK:
                passed.setdefault(r["rps"], []).append(r["server_busy"])
        self.rates = sorted(passed)
        self.busy = [float(np.mean(passed[rate])) for rate in self.rates]
        self.failed = {
            r["rps"]: (r["verdict"], r["server_busy"])
            for r in rows
            if r["verdict"] != OK and not r["role"].startswith("ramp")
        }
        (self.jump,) = [r for r in rows if r["role"] == "ramp 2/16"]
        assert self.jump["rps"] == 15 and self.jump["verdict"] == SATURATED

    def judged(self, number: int, role: str, rate: float) -> Probe:
        if role.startswith("ramp") and rate >= self.jump["rps"]:
            verdict, busy = self.jump["verdict"], self.jump["server_busy"]
        elif rate <= self.capacity:
            verdict, busy = OK, float(np.interp(rate, self.rates, self.busy))
        else:
            verdict, busy = self.failed.get(rate, (SLOPE, 0.99))
        return Probe(number, role, rate, verdict=verdict, sent_rate=rate, server_busy=busy)


class LawKeystone(Searched):
    """WORKERS workers spending DEMAND s on each request: rate * demand / workers busy;
    a rate that would keep them over 97 % busy degrades (by its slope up to 110 %)."""

    def __init__(self, demand: float, workers: int = 2) -> None:
        super().__init__()
        self.demand, self.workers = demand, workers

    def judged(self, number: int, role: str, rate: float) -> Probe:
        busy = rate * self.demand / self.workers
        verdict = OK if busy <= 0.97 else (SLOPE if busy <= 1.1 else SATURATED)
        return Probe(
            number, role, rate, verdict=verdict, sent_rate=rate, server_busy=min(busy, 1.0)
        )


def search(model: Searched, settings: Settings = SEARCH):
    said: list[str] = []
    plan = capacity.Plan(capacity.estimated_probes(settings))
    model.plan = plan
    out = capacity_search.find_capacity(
        settings, model, say=said.append, ramp=model.ramp, plan=plan
    )
    return out, said, plan


# -- the recorded search, searched again ---------------------------------------------
def test_the_fixture_is_the_recorded_search_of_13_probes_to_n_19():
    data, rows = recorded()
    assert data["result"]["n_rps"] == 19 and data["elapsed_s"] == pytest.approx(996.6)
    assert max(r["number"] for r in rows) == 13
    assert rows[0]["role"] == "ramp 1/16" and "missed" in data["result"]["prediction"]


def test_the_first_ramp_doubles_from_low_and_narrows_to_equal_steps_of_the_range():
    rates = ramps.ramp_rates(SEARCH)
    assert rates[:6] == [1, 2, 4, 8, 16, 30]  # then 14-rps steps, as 16 equal steps have
    assert rates[-3:] == [184, 198, 200]
    assert all(b - a <= 14 for a, b in zip(rates, rates[1:], strict=False))


def test_the_recorded_keystone_is_found_by_one_ramp_and_two_whole_probes():
    model = RecordedKeystone()
    out, said, plan = search(model)
    assert out.status == "found" and out.confirmed and out.n == 19
    assert model.ramps == [ramps.ramp_rates(SEARCH)] and len(model.ramps) == 1
    ramp = [p for p in out.probes if p.role.startswith("ramp")]
    assert [(p.rps, p.verdict) for p in ramp] == [
        (1, OK), (2, OK), (4, OK), (8, OK), (16, SATURATED),
    ]  # fmt: skip
    # the steps at 2, 4 and 8 rps had the workers 11-42 % busy: a prediction at once,
    # from the busiest (their median said 18: one whole probe more)
    prediction = knee.predict(ramp, SEARCH)
    assert [rate for rate, _ in prediction.evidence] == [2, 4, 8]
    assert prediction.saturation == pytest.approx(19.0, abs=0.1) and prediction.n == 19
    assert model.whole() == [("predicted N", 19, OK), ("confirm N+1", 20, SLOPE)]
    # the saturated 16-rps step is far under the law's 19 rps: it does not hold the walk
    assert (
        "the ramp's 16-rps step degraded (saturated) while Keystone's busy time puts "
        "saturation near 19.0 rps: probing the prediction"
    ) in said
    assert out.message == "N = 19 rps; 20 rps is degraded (slope)"
    assert out.prediction == (
        "predicted 19 rps (saturation near 19.0 rps): N found by 2 whole probes from there"
    )
    # the plan: the ramp and two probes, never grown
    assert not [line for line in said if line.startswith("plan:")]
    assert all(k <= about for k, about in model.said_about) and plan.about == model.count == 3
    # load: the ramp's steps up to the one that failed, 5 s each after 10 s of warm-up,
    # and two windows of 10 + 30 s
    ran = SEARCH.ramp_steps([p.rps for p in ramp])
    assert sum(seconds for _, seconds in ran) + 2 * 40 == 35 + 80


def test_a_keystone_whose_capacity_falls_under_sustained_load_is_found_by_the_walk():
    # the same ramp and prediction; whole probes pass up to 14 rps only: the walk goes
    # down, one step and then twice as far, and once 12 passed it probes between 12 and
    # 16, its whole probes N and N + 1: no bisection of the ramp's bracket, no probe again
    model = RecordedKeystone(capacity_rps=14)
    out, said, plan = search(model)
    assert out.status == "found" and out.confirmed and out.n == 14
    assert model.whole() == [
        ("predicted N", 19, SLOPE), ("confirm N", 18, SLOPE),
        ("confirm N", 16, SLOPE), ("confirm N", 12, OK),
        ("search", 14, OK), ("confirm N+1", 15, SLOPE),
    ]  # fmt: skip
    assert "walk: 12 rps passed and 16 rps degraded; the walk probes the middle 14 rps" in said
    assert not [line for line in said if "missed" in line]
    assert out.prediction == (
        "predicted 19 rps (saturation near 19.0 rps): N found 5 rps below it by 6 whole "
        "probes from there"
    )
    assert len(model.ramps) == 1
    grown = [line for line in said if line.startswith("plan:")]
    assert len(grown) == len(plan.reasons) == 4
    assert all(k <= about for k, about in model.said_about) and plan.about == model.count


# -- password tokens ----------------------------------------------------------------
def test_password_tokens_are_predicted_from_the_first_ramp_and_confirmed_by_two_probes():
    # 0.3 s of worker time a request on 2 workers: 15 % busy per rps, saturation 6.7 rps
    model = LawKeystone(0.3)
    out, said, plan = search(model)
    assert out.status == "found" and out.confirmed and out.n == 6
    ramp = [p for p in out.probes if p.role.startswith("ramp")]
    assert [(p.rps, p.verdict) for p in ramp] == [(1, OK), (2, OK), (4, OK), (8, SATURATED)]
    assert len(model.ramps) == 1  # no finer ramp: the first one predicted
    assert any(
        line.startswith("predicted: Keystone's workers were 15% busy at 1 rps, 30% busy at 2 rps, "
                        "60% busy at 4 rps: by the utilization law, from the busiest, they "
                        "saturate near 6.7 rps")
        for line in said
    )  # fmt: skip
    # 8 rps saturated at 1.2 times the law's bound: it agrees, and bounds the walk
    assert not any("probing the prediction" in line for line in said)
    assert model.whole() == [("predicted N", 6, OK), ("confirm N+1", 7, SLOPE)]
    assert plan.about == model.count == 3 and not plan.reasons


# -- a failed step the law agrees with still bounds the walk --------------------------
class Inflated(LawKeystone):
    """80 ms a request on 2 workers (saturated at 25 rps), but the ramp's steps from 4 rps
    on report the workers busy as if the bound were BOUND rps."""

    def __init__(self, bound: float) -> None:
        super().__init__(0.08)
        self.bound = bound

    def judged(self, number: int, role: str, rate: float) -> Probe:
        p = super().judged(number, role, rate)
        if role.startswith("ramp") and p.passed and rate >= 4:
            p.server_busy = rate / self.bound
        return p


@pytest.mark.parametrize(
    "bound, start, said_so",
    [
        (31, 29, False),  # 30 rps saturated, at 0.97 of the bound: the walk starts under it
        (50, 50, True),  # 30 rps is 0.6 of the bound: contradicted, the prediction probed
    ],
)
def test_a_failed_step_bounds_the_walk_only_where_the_law_agrees(bound, start, said_so):
    out, said, _ = search(Inflated(bound))
    whole = [(p.role, p.rps) for p in out.probes if not p.role.startswith("ramp")]
    assert whole[0] == ("predicted N", start)
    assert any("30-rps step degraded (saturated)" in line for line in said) == said_so
    assert out.n == 24 and out.confirmed  # the walk misses, the bisection finds N
