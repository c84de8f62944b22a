"""Capacity probes judged on Keystone's side too, and repeats that converge on N.

Synthetic probes and access-log lines: a degradation seen only by the
client (Keystone's times flat, its workers idle) bounds no N; repeats that
disagree are explained (which figure moved, what else ran), repeated on a
quiet machine, and N comes with its spread.
"""

from __future__ import annotations

import dataclasses

from rally_keystone_bench.driver import probe_args
from rally_keystone_bench.verdicts import cpu, keystone_side, probe_verdict
from rally_keystone_bench.verdicts.capacity import Settings
from rally_keystone_bench.verdicts.capacity_search import find_capacity
from rally_keystone_bench.verdicts.keystone_side import CLIENT_BOUND, LoggedRequest
from rally_keystone_bench.verdicts.probe_verdict import OK, SATURATED, SLOPE, Probe

SETTINGS = Settings("validate", low=1, high=200, warmup=10, window=30, max_slope=0.01, precision=1)
RAMPED = Settings("validate", 1, 200, 10, 30, 0.01, 1, ramp=True)


def log(rate, seconds, server_s, workers=2, method="GET", start=1000.0):
    """Access-log lines of RATE requests a second for SECONDS, each SERVER_S long."""
    n = int(rate * seconds)
    return [
        LoggedRequest(start + i / rate, server_s, 100 + i % workers, 200, method, "/v3/auth/tokens")
        for i in range(n)
    ]


def side(requests, seconds=10.0, scenario="validate"):
    return keystone_side.keystone_side(requests, 1000.0, 1000.0 + seconds, scenario)


# -- Keystone's side of one span -------------------------------------------------------
def test_keystone_side_counts_the_scenarios_requests_busy_workers_and_setup():
    got = side(log(10, 10, 0.02) + log(2, 10, 0.3, method="POST"))
    assert got.requests == 100 and got.setup == 20 and got.workers == 2
    assert abs(got.p95 - 0.02) < 1e-9
    # 100 * 0.02 + 20 * 0.3 = 8 server seconds over 10 s and 2 workers
    assert abs(got.busy - 0.4) < 1e-9
    assert abs(got.setup_busy - 6 / 8) < 1e-9


def test_flat_server_times_and_growing_client_waits_are_generator_or_setup_bound():
    reference = side(log(5, 10, 0.02))
    step = side(log(20, 10, 0.025))  # flat, workers 2.5 % busy
    probe = Probe(1, "ramp 5/16", 20, verdict=SATURATED, reason="the slowest took 18.2 s", p95=4.0)
    probe_verdict.judge_keystone_side(probe, step, reference)
    assert probe.verdict == CLIENT_BOUND and not probe.passed
    assert "Keystone's times stayed flat while the client's waits grew" in probe.reason
    assert "by the client alone: degraded (saturated)" in probe.reason
    assert probe.server_p95 == step.p95 and probe.server_requests == 200


def test_a_keystone_whose_workers_are_full_stays_saturated_though_its_times_are_flat():
    # uWSGI queues outside its workers: at saturation server times stay flat, workers busy
    reference = side(log(5, 10, 0.02))
    step = side(log(100, 10, 0.02, workers=2))  # 20 server seconds a second over 2 workers
    probe = Probe(1, "search", 100, verdict=SATURATED, reason="slots", p95=3.0)
    probe_verdict.judge_keystone_side(probe, step, reference)
    assert probe.verdict == SATURATED
    assert "2 worker(s) 100% busy" in probe.reason


def test_a_keystone_that_answers_slower_itself_stays_degraded():
    reference = side(log(5, 10, 0.02))
    step = side(log(20, 10, 0.4))  # server p95 20x the reference's
    probe = Probe(1, "search", 20, verdict=SLOPE, reason="latency slope", p95=2.0)
    probe_verdict.judge_keystone_side(probe, step, reference)
    assert probe.verdict == SLOPE


def test_workers_busy_with_token_issues_the_validate_probe_did_not_send_are_setup_bound():
    reference = side(log(5, 10, 0.02))
    step = side(log(10, 10, 0.02) + log(6, 10, 0.3, method="POST"))  # 18 s of bcrypt over 2
    probe = Probe(1, "ramp 4/16", 10, verdict=SATURATED, reason="slowest 18.2 s", p95=18.2)
    probe_verdict.judge_keystone_side(probe, step, reference)
    assert probe.verdict == CLIENT_BOUND
    assert probe.reason.startswith("setup-bound: Keystone's workers spent 90% of their time")
    assert probe.setup_requests == 60


def test_without_an_access_log_the_clients_verdict_stands():
    probe = Probe(1, "search", 60, verdict=SLOPE, reason="latency slope", p95=2.0)
    probe_verdict.judge_keystone_side(probe, None, None)
    assert probe.verdict == SLOPE and probe.reason == "latency slope"


class RampModel:
    """A target of CAPACITY rps whose ramps are held up by the generator at FOOLED rps."""

    def __init__(self, capacity_rps, fooled):
        self.capacity, self.fooled = capacity_rps, fooled
        self.probes: list[Probe] = []

    def __call__(self, rate, role):
        verdict = OK if rate <= self.capacity else SLOPE
        self.probes.append(Probe(len(self.probes) + 1, role, rate, verdict=verdict))
        return self.probes[-1]

    def ramp(self, rates):
        out = []
        for i, rate in enumerate(rates):
            verdict = OK if rate <= self.capacity else SLOPE
            if rate == self.fooled:
                verdict = CLIENT_BOUND  # the generator's transient, seen from Keystone's side
            out.append(Probe(len(self.probes) + 1, f"ramp {i + 1}/{len(rates)}", rate, verdict))
            if verdict != OK:
                break
        self.probes.append(out[-1])
        return out


def test_a_ramp_step_the_generator_held_up_does_not_bound_n():
    model, said = RampModel(50, fooled=30), []
    out = find_capacity(RAMPED, model, say=said.append, ramp=model.ramp)
    assert "ramp: 30 rps was generator- or setup-bound: it does not bound N" in said
    assert "ramp: N in [16, 200] rps" in said
    assert out.status == "found" and out.n == 50 and out.confirmed


def test_low_ramp_steps_are_as_short_as_the_others_and_not_judged_by_their_slope():
    # issue 46: 30 and 15 s at 1 and 2 rps (30 requests for the slope) cost 45 s a search
    steps = RAMPED.ramp_steps([1, 3, 15, 29])
    assert [s for _, s in steps] == [15.0, 5.0, 5.0, 5.0]  # the first carries the warm-up
    text = probe_args.describe_ramp(RAMPED, [1, 3, 15, 29])
    assert text == "5 s a step (at 1, 3: too few for the slope), after 10 s of warm-up"
    assert probe_args.describe_ramp(RAMPED, [15, 29]) == "5 s a step, after 10 s of warm-up"


# -- repeats that disagree ---------------------------------------------------------------
class BusyMachine:
    """A target of 50 rps on a machine another process loads during probes BUSY.

    A busy probe at 50 rps degrades (the CPU went elsewhere); a repeat runs
    when the machine is quiet again.
    """

    def __init__(self, busy):
        self.busy = set(busy)
        self.probes: list[Probe] = []

    def __call__(self, rate, role):
        number = len(self.probes) + 1
        loaded = number in self.busy
        verdict = OK if rate <= 50 and not (loaded and rate >= 50) else SLOPE
        p = Probe(number, role, rate, verdict=verdict, p95=0.12 if verdict == OK else 1.8)
        p.server_p95 = 0.015 if not loaded else 0.09
        p.other_cpu, p.other_swing, p.steal = (1.3, 1.2, 0.0) if loaded else (0.05, 0.1, 0.0)
        self.probes.append(p)
        return p


def test_disagreeing_repeats_name_what_moved_repeat_on_a_quiet_machine_and_give_n_with_spread():
    # bisection: ... 50 passes (probe 7); confirm N fails on a busy machine (probe 9),
    # and again (probe 15): the rounds are spent, 50 is repeated
    machine, said = BusyMachine(busy={9, 15}), []
    out = find_capacity(SETTINGS, machine, say=said.append)
    moved = [line for line in said if "disagree:" in line]
    assert moved, said
    assert "other processes 0.05 -> 1.30 core" in moved[0]
    assert "shared the machine (other processes used 1.30 core)" in moved[0]
    assert "client p95 120 ms -> 1.80 s" in moved[0]
    assert any(p.role == "repeat N" for p in out.probes)
    assert out.status == "found" and out.confirmed and out.n == 50
    assert out.spread == (49, 50)
    assert out.message == "N = 50 rps (49-50 rps across repeats); 51 rps is degraded (slope)"


def test_a_rate_settles_by_its_quiet_probes_and_its_majority():
    quiet_ok = Probe(1, "search", 50, verdict=OK, other_cpu=0.1, steal=0.0)
    busy_bad = Probe(2, "confirm N", 50, verdict=SLOPE, other_cpu=1.3, steal=0.0)
    from rally_keystone_bench.verdicts import repeats

    assert repeats.settles([quiet_ok, busy_bad])  # the busy one does not count
    assert not repeats.decided([quiet_ok, busy_bad])
    bad2 = Probe(3, "repeat N", 50, verdict=SLOPE, other_cpu=0.1, steal=0.0)
    ok2 = Probe(4, "repeat N", 50, verdict=OK, other_cpu=0.1, steal=0.0)
    assert repeats.decided([quiet_ok, busy_bad, bad2, ok2])  # 2 of 3 quiet passed
    assert repeats.settles([quiet_ok, busy_bad, bad2, ok2])


class RampedThenFlipping:
    """Seen 2026-11-29 (validate, --no-predict, 2-core AMD EPYC): both ramps passed up to
    28 rps, whole probes failed at 29 and 28, and 27 passed once, then failed its
    confirmation. N then rested on 26 rps, which only a ramp's 5-s step had passed."""

    def __init__(self) -> None:
        self.whole: list[tuple[str, float]] = []

    def ramp(self, rates: list[float]) -> list[Probe]:
        out = []
        for i, rate in enumerate(rates):
            verdict = OK if rate <= 28 else SATURATED
            out.append(Probe(1, f"ramp {i + 1}/{len(rates)}", rate, verdict=verdict))
            if verdict != OK:
                break
        return out

    def __call__(self, rate: float, role: str) -> Probe:
        self.whole.append((role, rate))
        earlier = sum(1 for _, r in self.whole if r == rate)
        passed = rate <= 26 or (rate == 27 and earlier == 1)
        return Probe(len(self.whole), role, rate, verdict=OK if passed else SLOPE)


def test_n_that_only_a_ramp_step_passed_is_probed_whole_before_the_search_settles_on_it():
    # before: repeats.settles([]) raised IndexError and the search ended with exit 2
    keystone, said = RampedThenFlipping(), []
    settings = dataclasses.replace(SETTINGS, ramp=True)
    out = find_capacity(settings, keystone, say=said.append, ramp=keystone.ramp)
    assert ("repeat N", 26) in keystone.whole
    assert "26 rps passed only as a ramp's step: probing it whole" in said
    assert out.status == "found" and out.n == 26 and out.spread == (26, 27)
    assert out.message == "N = 26 rps (26-27 rps across repeats); 27 rps is degraded (slope)"


def test_the_machine_during_a_probe_from_the_samplers_intervals():
    t = cpu.TICKS
    ivs = [
        cpu.Interval(0.0, 1.0, busy=int(1.5 * t), steal=0, groups={"keystone": t}, pids={}),
        cpu.Interval(1.0, 2.0, busy=int(0.5 * t), steal=int(0.2 * t), groups={}, pids={}),
    ]
    m = keystone_side.machine_during(ivs)
    assert abs(m.other - 0.5) < 0.02 and abs(m.other_swing) < 0.02 and abs(m.steal - 0.1) < 0.02
    assert keystone_side.disturbance(m) == "other processes used 0.50 core"
    assert keystone_side.disturbance(keystone_side.Machine(0.1, 0.0, 0.0)) is None
    assert keystone_side.machine_during([]) is None


def test_the_access_log_is_read_once_a_line_still_written_waits(tmp_path):
    """ProbeEvidence reads only what Keystone appended since its last read; a line
    without its newline yet is left for the next read, not lost or half parsed."""
    from rally_keystone_bench.driver.probe_evidence import ProbeEvidence

    (tmp_path / "access.log").write_text("1000 POST /v3/auth/tokens 201 250000 7\n")
    evidence = ProbeEvidence(tmp_path, say=lambda _m: None)
    assert [r.method for r in evidence.requests()] == ["POST"]
    with open(tmp_path / "access.log", "a") as log:
        log.write("2000 GET /v3/auth/tokens 200 90")  # mid-write
    assert len(evidence.requests()) == 1
    with open(tmp_path / "access.log", "a") as log:
        log.write("000 8\n")
    got = evidence.requests()
    assert [(r.method, r.seconds, r.pid) for r in got] == [("POST", 0.25, 7), ("GET", 0.09, 8)]
