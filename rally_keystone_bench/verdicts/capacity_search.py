"""The capacity search: N bracketed by ramps, walked from a predicted knee, bisected.

A probe is one Rally task (tasks/capacity-probe.yaml): the ``pooled_rps``
runner (``--runner rps`` for Rally's own; same schedule, see
runners/pooled_rps.py) starts ``rps * (warmup + window)`` iterations at a
constant rate; verdicts/probe_verdict.py judges it (errors, saturation,
the generator's limit, the latency slope past the warm-up).

The search first brackets N with a ramp (one run whose rate rises step by
step, each step judged as a probe on the iterations due in it): its rate
doubles from --low (verdicts/ramps.py). Where Keystone's busy time is
known (a local Keystone's access log), the steps that passed predict the
knee (verdicts/knee.py, the utilization law): the search probes the grid
rate at that bound with a whole probe and walks from it (WALK_PROBES at
most): down while probes degrade, one step and then twice as far each
time; once one has passed, up to the rate the busy time of the probes
that passed predicts then, or 1, 1, 1, 2, 4 ... steps further while they keep
passing, below what failed; once a whole probe has failed above a pass,
between the two (the prediction if it lies in the upper half, else the
middle); until a rate passes and the next one does not: those two whole
probes are N and N + precision, confirmed. A step that failed by errors
or saturation keeps the walk below it, unless it failed under CONTRADICTED
of the predicted saturation: a ramp's jump can saturate a step whole
probes pass, and the search says it probes the prediction instead. When
the walk does not find the edge in WALK_PROBES, the prediction missed: the
search says so and goes on as it does without one.

Without a prediction, a finer ramp (7 steps) inside the first one's bracket,
then bisection of what is left on a linear scale, the probe rates on a
grid of --precision (with --no-ramp, the whole range); a probe above N
fails early under --abort-on-sla-failure, so a high guess is cheap. It
then repeats N and N + precision ("confirm"); when a confirmation
contradicts the search, it resumes from there (two rounds at most), then
repeats what still disagrees (verdicts/repeats.py) and gives N with its
spread.

Its settings, outcome, plan, constants and grid are verdicts/capacity.py's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from rally_keystone_bench.verdicts import keystone_side, knee
from rally_keystone_bench.verdicts.capacity import (
    CONFIRM_ROUNDS,
    CONTRADICTED,
    WALK_PROBES,
    Outcome,
    Plan,
    Settings,
    bisections,
    estimated_probes,
    fmt,
    midpoint,
)
from rally_keystone_bench.verdicts.probe_verdict import (
    ERRORS,
    GENERATOR,
    LOWER_BOUNDS,
    SATURATED,
    Probe,
)
from rally_keystone_bench.verdicts.ramps import ramp_bracket, ramp_rates, refine_rates
from rally_keystone_bench.verdicts.repeats import full_probes, settle


class _Search:
    """The probes so far, the one way each is run, and the plan kept ahead of them."""

    def __init__(
        self,
        settings: Settings,
        probe: Callable[[float, str], Probe],
        say: Callable[[str], None],
        plan: Plan,
    ) -> None:
        self.settings, self.probe, self.say, self.plan = settings, probe, say, plan
        self.probes: list[Probe] = []
        self.runs = 0  # probes and ramps run (a ramp is one)
        self.eps = settings.precision * 1e-6

    def expect(self, more: int, reason: str) -> None:
        """MORE probes to come, for REASON: the plan grows (and says so) if it was short."""
        line = self.plan.grow(self.runs + more, reason)
        if line:
            self.say(line)

    def run(self, rate: float, role: str) -> Probe:
        self.expect(1, f"one more ({role} at {fmt(rate)} rps)")
        self.runs += 1
        p = self.probe(rate, role)
        earlier = full_probes(self.probes, rate)  # the last probe of this rate, if it disagrees
        self.probes.append(p)
        if earlier and earlier[-1].passed != p.passed and not role.startswith("search"):
            self.say(keystone_side.moved(earlier[-1], p))
        return p

    def ramp(self, ramp: Callable[[list[float]], list[Probe]], rates: list[float]) -> list[Probe]:
        self.expect(1, "one more ramp")
        self.runs += 1
        steps = ramp(rates)
        self.probes.extend(steps)
        return steps

    def fail_above(self, rate: float) -> tuple[float, Probe | None]:
        """The lowest rate above RATE that did not pass, and its probe ((high, None): none)."""
        failing = [p for p in self.probes if not p.passed and p.rps > rate + self.eps]
        if not failing:
            return self.settings.high, None
        best = min(failing, key=lambda p: (p.rps, -p.number))
        return best.rps, best

    def passed_below(self, rate: float) -> float:
        """The highest rate below RATE that passed (--low: none)."""
        passing = [q.rps for q in self.probes if q.passed and q.rps < rate - self.eps]
        return max(passing, default=self.settings.low)


@dataclasses.dataclass
class _Bracket:
    """[lo, hi) after the ramps (lo taken to pass and hi to fail until probed), the
    probe that failed at hi (None: nothing failed up to hi), and the knee predicted."""

    lo: float
    hi: float
    hi_probe: Probe | None
    prediction: knee.Prediction | None = None


def _bracket(search: _Search, ramp: Callable[[list[float]], list[Probe]] | None) -> _Bracket:
    """N's bracket from the ramps, or [low, high] without one; with settings.predict, the
    first ramp whose steps predict the knee ends the bracketing."""
    settings, say = search.settings, search.say
    lo, hi = settings.low, settings.high
    hi_probe: Probe | None = None
    rates = ramp_rates(settings) if ramp is not None else []
    if len(rates) < 3:  # a range of two grid steps or less: bisecting it is as quick
        rates = []
    for ramp_round in range(2):
        if ramp is None or not rates:
            break
        steps = search.ramp(ramp, rates)
        lo, hi, hi_probe = ramp_bracket(steps, lo, hi, hi_probe, settings.max_slope, say)
        if hi_probe is not None and hi <= lo + search.eps:
            say(f"ramp: its first step, {fmt(hi)} rps, did not pass: whole probes decide")
        else:
            top = ")" if hi_probe is not None else "]"  # "]": no step failed up to hi
            say(f"ramp: N in [{fmt(lo)}, {fmt(hi)}{top} rps")
        if settings.predict:
            prediction = knee.predict(search.probes, settings)
            if prediction is not None:
                return _Bracket(lo, hi, hi_probe, prediction)
            say(f"no prediction: {_why_no_prediction(steps)}")
        # the finer ramp, once, when the first one found a step that failed
        rates = refine_rates(settings, lo, hi) if ramp_round == 0 and hi_probe else []
        if rates and settings.predict:
            search.expect(4, "no prediction: a finer ramp, a probe inside it, two confirmations")
    return _Bracket(lo, hi, hi_probe)


def _why_no_prediction(steps: Sequence[Probe]) -> str:
    if all(p.server_busy is None for p in steps):
        return "Keystone's busy time was not measured (no access log)"
    return (
        f"no step passed with Keystone's workers {100 * knee.MIN_BUSY:.0f}-"
        f"{100 * knee.MAX_BUSY:.0f}% busy"
    )


def _outcome(
    n: float,
    hi_probe: Probe | None,
    confirmed: bool,
    settings: Settings,
    probes: list[Probe],
    spread: tuple[float, float] | None = None,
) -> Outcome:
    """The search's result: N found, or a lower bound (--high, or the generator's limit)."""
    if hi_probe is None:
        status, limited = "lower bound", "--high"
        message = f"N >= {fmt(n)} rps: no degradation up to --high {fmt(settings.high)}"
    elif hi_probe.verdict in LOWER_BOUNDS:
        status, limited = "lower bound", "generator"
        message = (
            f"N >= {fmt(n)} rps, {hi_probe.verdict} at {fmt(hi_probe.rps)} rps ({hi_probe.reason})"
        )
    else:
        note = ""
        if spread is not None and spread[0] != spread[1]:
            note = f" ({fmt(spread[0])}-{fmt(spread[1])} rps across repeats)"
        elif not confirmed:
            note = " (not confirmed: the repeats disagreed)"
        status, limited = "found", None
        message = f"N = {fmt(n)} rps{note}; {fmt(hi_probe.rps)} rps is {hi_probe.verdict}"
    return Outcome(n, status, limited, confirmed, message, probes, spread)


@dataclasses.dataclass
class _Walk:
    """Where the walk from the predicted rate ended: N found (HIT), or the bracket left."""

    lo: float
    hi: float
    hi_probe: Probe | None
    hit: bool
    why: str = ""


def _edge(walked: Sequence[Probe], eps: float) -> tuple[float | None, Probe | None]:
    """(the highest rate a whole probe of the walk passed, None: none; the lowest whole
    probe of the walk above it that did not pass, None: none)."""
    lo = max((q.rps for q in walked if q.passed), default=None)
    above = [q for q in walked if not q.passed and (lo is None or q.rps > lo + eps)]
    return lo, min(above, key=lambda q: (q.rps, -q.number), default=None)


def _walk(search: _Search, start: float) -> _Walk:
    """Whole probes from START (WALK_PROBES at most) until a rate passes and the rate one
    grid step above it fails: those two are N and N + precision, each probed whole.

    While none has passed, down one grid step a probe, then twice as far each time
    (_next_down). Once one has passed and nothing whole failed above it, up to N's grid
    rate as Keystone's busy time predicts it now, or further: one grid step after each
    of the first three passes, two after the fourth, four after the fifth (_next_up);
    kept below the lowest rate that failed above (a ramp's step too). Once a whole
    probe has failed above the highest pass, the walk probes between the two
    (_between). The plan holds START and one probe more; each probe further grows it,
    said.
    """
    s, eps = search.settings, search.eps
    walked: list[Probe] = []
    rate, role = start, "predicted N"
    for k in range(WALK_PROBES):
        p = search.run(rate, role)
        walked.append(p)
        if p.verdict in LOWER_BOUNDS:
            why = f"{fmt(p.rps)} rps was {p.verdict}"
            return _Walk(search.passed_below(p.rps), p.rps, p, False, why)
        lo, hi_probe = _edge(walked, eps)
        if lo is not None and lo >= s.high - eps:
            return _Walk(lo, s.high, None, True)  # N >= --high
        if lo is not None and hi_probe is not None and hi_probe.rps <= lo + s.precision + eps:
            return _Walk(lo, hi_probe.rps, hi_probe, True)
        if k == WALK_PROBES - 1:
            break
        if lo is None:
            low = min(q.rps for q in walked)
            if low <= s.low + eps:
                return _Walk(s.low, low, hi_probe, False, f"even {fmt(low)} rps degraded")
            rate, role = _next_down(search, low, len(walked)), "confirm N"
            why = f"{_seen(start, low)} degraded: the walk goes on down to {fmt(rate)} rps"
        elif hi_probe is not None:
            rate, role, why = _between(search, lo, hi_probe)
        else:
            rate, role, why = _next_up(search, lo, sum(q.passed for q in walked))
        search.say(f"walk: {why}")
        if k:
            search.expect(1, f"the walk's probe {k + 2} ({WALK_PROBES} whole probes at most)")
    lo, hi_probe = _edge(walked, eps)
    if lo is None:
        low = min(q.rps for q in walked)
        return _Walk(search.passed_below(low), low, p, False, f"{fmt(low)} rps still degraded")
    if hi_probe is None:
        top, top_probe = search.fail_above(lo)
        return _Walk(lo, top, top_probe, False, f"{fmt(lo)} rps still passed")
    why = f"{fmt(lo)} rps passed and {fmt(hi_probe.rps)} rps degraded, still apart"
    return _Walk(lo, hi_probe.rps, hi_probe, False, why)


def _seen(start: float, rate: float) -> str:
    return f"{fmt(start)} rps" if rate == start else f"{fmt(start)} to {fmt(rate)} rps"


def _next_down(search: _Search, low: float, failed: int) -> float:
    """The walk's next rate below LOW, the lowest of FAILED whole probes that all degraded:
    one grid step under the first (a prediction is most often just over N), then twice
    as far each time, and not under the highest rate that passed below LOW (a ramp's
    step) plus one step, nor under --low."""
    s = search.settings
    floor = max(s.low, round(search.passed_below(low) + s.precision, 6))
    return max(min(floor, low - s.precision), round(low - s.precision * 2 ** (failed - 1), 6))


def _next_up(search: _Search, lo: float, passes: int) -> tuple[float, str, str]:
    """(rate, role, why) of the walk's next probe once LO passed, the walk's PASSES-th
    pass, with no whole probe failed above it: the knee Keystone's busy time predicts
    now, or LO plus 1, 1, 1, 2, 4 ... grid steps (PASSES 1, 2, 3, 4, 5 ...) if that
    is further, kept under the lowest rate that failed above LO (a ramp's step) and
    --high. One step at a time at first: where the search starts near N, N is one to
    three steps above the walk's first probe (on a 2-core Xeon, 2026-11-30: 19 passed
    and 20 did not; 20, 21, 22 passed and 23 did not), and a jump past N + 1 costs a
    probe more, back down to it (measured: 1, 1, 2 jumped from 22 to 24 and then
    needed 23). Then growing, since the busy share near the knee predicts a step up at
    most where a request costs less the faster they come (on an EPYC the walk climbed
    16 to 19 one rps a probe with N at 20 to 22): the steps bound the walk's probes
    by the log of the distance, not the distance."""
    s = search.settings
    hi = search.fail_above(lo)[0]
    jump = round(lo + s.precision * 2 ** max(0, passes - 3), 6)
    step, below = round(lo + s.precision, 6), round(hi - s.precision, 6)
    prediction = knee.predict(search.probes, s)
    target = max(jump, prediction.n) if prediction is not None else jump
    rate = round(min(s.high, max(step, min(target, below))), 6)
    where = f"{fmt(lo)} rps passed"
    if rate == step:
        return rate, "confirm N+1", f"{where}: the walk goes on up to {fmt(rate)} rps"
    if prediction is not None and prediction.n >= rate - 1e-9:
        why = (
            f"{where}; Keystone's workers now put saturation near {prediction.saturation:.1f} "
            f"rps: the walk probes {fmt(rate)} rps"
        )
    else:
        why = f"{where}, its {_nth(passes)} pass in a row: the walk goes on up to {fmt(rate)} rps"
    return rate, "predicted N", why


def _nth(k: int) -> str:
    names = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh")
    return names[k - 1] if 1 <= k <= len(names) else f"{k}th"


def _between(search: _Search, lo: float, hi_probe: Probe) -> tuple[float, str, str]:
    """(rate, role, why) of the walk's probe between LO, which passed, and HI_PROBE, the
    lowest whole probe that failed above it, more than a grid step apart: the knee
    Keystone's busy time predicts now if it lies in the upper half (HI_PROBE's rate
    included: then one step under it), else the middle. The law's bound errs low where
    a request costs less the faster they come (seen on validations), so a prediction in
    the lower half is worth no more than the middle; one above HI_PROBE is contradicted
    by a whole probe. The middle halves what is left whatever the answer."""
    s = search.settings
    middle = midpoint(lo, hi_probe.rps, s)
    prediction = knee.predict(search.probes, s)
    rate, why = middle, "the walk probes the middle"
    if prediction is not None and middle + search.eps < prediction.n <= hi_probe.rps + search.eps:
        rate = round(min(prediction.n, hi_probe.rps - s.precision), 6)
        why = (
            f"Keystone's workers now put saturation near {prediction.saturation:.1f} rps: "
            "the walk probes"
        )
    role = "search"  # N + 1 above a pass, N under a failure: what the probe confirms
    if rate <= lo + s.precision + search.eps:
        role = "confirm N+1"
    elif rate >= hi_probe.rps - s.precision - search.eps:
        role = "confirm N"
    return (
        rate,
        role,
        f"{fmt(lo)} rps passed and {fmt(hi_probe.rps)} rps degraded; {why} {fmt(rate)} rps",
    )


def _start(search: _Search, prediction: knee.Prediction, bracket: _Bracket) -> float:
    """The walk's first rate: the predicted one, inside the ramp's bracket when a step
    failed there by errors or saturation (a slope step is weaker evidence: not held to)
    at a rate the law agrees with, CONTRADICTED of the predicted saturation or more.

    A ramp's step jumps its rate: the step that failed far below the saturation
    Keystone's busy time predicts says more of the jump than of the rate (seen
    2026-11-29: 15 rps saturated in the ramp, whole probes of 15-19 rps passed).
    """
    settings, hi_probe = search.settings, bracket.hi_probe
    rate = min(max(prediction.n, settings.low, bracket.lo), settings.high)
    if hi_probe is None or hi_probe.verdict not in (ERRORS, SATURATED):
        return rate
    if hi_probe.rps < CONTRADICTED * prediction.saturation:
        search.say(
            f"the ramp's {fmt(hi_probe.rps)}-rps step {hi_probe.verdict} while Keystone's "
            f"busy time puts saturation near {prediction.saturation:.1f} rps: "
            "probing the prediction"
        )
        return rate
    return max(settings.low, min(rate, round(bracket.hi - settings.precision, 6)))


def find_capacity(
    settings: Settings,
    probe: Callable[[float, str], Probe],
    say: Callable[[str], None] = lambda line: None,
    ramp: Callable[[list[float]], list[Probe]] | None = None,
    plan: Plan | None = None,
) -> Outcome:
    """Search N with PROBE(rate, role); confirm N and N + precision.

    With RAMP (one run whose rate rises through the rates it is given, a
    Probe judged per step), the search brackets N first; with
    settings.predict, it walks from the knee the ramp's Keystone-side
    figures predict (verdicts/knee.py), else (or when the walk misses)
    it refines the bracket with a finer ramp and bisects it. PLAN (its
    ``about``, read by the prober's progress lines) grows only with a
    reason, said.
    """
    search = _Search(settings, probe, say, plan or Plan(estimated_probes(settings)))
    bracket = _bracket(search, ramp)
    prediction = bracket.prediction
    if prediction is None:
        return _bisect_and_confirm(search, bracket.lo, bracket.hi, bracket.hi_probe)
    say(f"predicted: {prediction.describe()}")
    walk = _walk(search, _start(search, prediction, bracket))
    held = f"predicted {fmt(prediction.n)} rps (saturation near {prediction.saturation:.1f} rps)"
    if walk.hit:
        out = _outcome(walk.lo, walk.hi_probe, True, settings, search.probes)
        off = walk.lo - prediction.n
        away = ""
        out.prediction_held = "held"
        if abs(off) > 2 * settings.precision + search.eps:  # held: within two grid steps
            away = f" {fmt(abs(off))} rps {'above' if off > 0 else 'below'} it"
            out.prediction_held = "walked"
        out.prediction = f"{held}: N found{away} by {search.runs - 1} whole probes from there"
        return out
    lo, hi, hi_probe = walk.lo, walk.hi, walk.hi_probe
    say(
        f"the prediction missed ({walk.why} after {WALK_PROBES} probes from "
        f"{fmt(prediction.n)} rps): bisecting [{fmt(lo)}, {fmt(hi)}) rps as without one"
    )
    search.expect(
        bisections(lo, hi, settings) + 2, "the prediction missed: bisection and two confirmations"
    )
    out = _bisect_and_confirm(search, lo, hi, hi_probe)
    out.prediction = f"{held}: missed ({walk.why}), found by bisection"
    out.prediction_held = "missed"
    return out


def _bisect_and_confirm(search: _Search, lo: float, hi: float, hi_probe: Probe | None) -> Outcome:
    """Bisect [LO, HI) down to one grid step, then confirm N and N + precision (two rounds
    that resume the search when a confirmation contradicts it), then settle by repeats."""
    settings, eps, probes = search.settings, search.eps, search.probes
    confirmed = False
    for _round in range(CONFIRM_ROUNDS + 1):
        if hi - lo > settings.precision + eps:
            search.expect(bisections(lo, hi, settings) + 2, f"bisecting [{fmt(lo)}, {fmt(hi)}) rps")
        while hi - lo > settings.precision + eps:
            p = search.run(midpoint(lo, hi, settings), "search")
            if p.passed:
                lo = p.rps
            else:
                hi, hi_probe = p.rps, p
        if _round == CONFIRM_ROUNDS:
            if hi_probe is None or hi_probe.verdict in LOWER_BOUNDS:
                break  # nothing to settle: N stays unconfirmed
            search.expect(2, "N and N + precision still disagree: repeats")
            lo, hi_probe, spread = settle(lo, settings, search.run, probes, search.say)
            return _outcome(lo, hi_probe, True, settings, probes, spread)
        pn = search.run(lo, "confirm N")
        if not pn.passed:
            if lo <= settings.low + eps:
                return _low_fails(pn, settings, probes)
            hi, hi_probe = lo, pn
            lo = search.passed_below(lo)
            search.say(f"{fmt(hi)} rps failed its confirmation: the search resumes below it")
            continue
        if lo >= settings.high - eps:
            confirmed, hi_probe = True, None
            break
        p1 = search.run(round(min(lo + settings.precision, settings.high), 6), "confirm N+1")
        if p1.passed:
            lo = p1.rps
            if lo >= settings.high - eps:
                confirmed, hi_probe = True, None
                break
            hi, hi_probe = search.fail_above(lo)
            search.say(f"{fmt(lo)} rps passed as N + precision: the search resumes above it")
            continue
        hi_probe, confirmed = p1, True
        break
    return _outcome(lo, hi_probe, confirmed, settings, probes)


def _low_fails(pn: Probe, settings: Settings, probes: list[Probe]) -> Outcome:
    """Even --low did not pass: it degrades (exit 1), or the generator could not send it."""
    status = "not measurable" if pn.verdict == GENERATOR else "low degrades"
    return Outcome(
        None,
        status,
        "generator" if pn.verdict == GENERATOR else None,
        message=f"even --low {fmt(settings.low)} rps is {pn.verdict}: {pn.reason}",
        probes=probes,
    )
