"""The gate's verdict from paired blocks: candidate against baseline, same seconds.

The gate's task sends one request to each side per iteration, in random
order (``KeystoneTokens.paired``); the run is cut into blocks of a few
seconds. Per block and action:

- the latency ratio: the median over the block's pairs of
  candidate / baseline (both requests of a pair within a second);
- the server CPU per request of each side: its Keystone workers' CPU time
  in the block divided by the requests they served in it;
- the interference: other processes' CPU (mean, and how much it swung
  between samples), steal time, and the load generator's own CPU.

A block whose interference passes a bound (:class:`Bounds`) is set aside.
Each action's latency is judged on its clean blocks: the median of the
per-block ratios, its bootstrap 95 % interval, and the Wilcoxon signed-rank
test of the log ratios against 0. A machine that gets slower or faster
during the run moves both sides of every block alike, so a drift cancels in
the ratios.

The gate makes one latency test per workload and action, and its promise
holds for all of them together (:mod:`verdicts.family`): the p-values are
Holm-adjusted over the family (``family_verdict.judge_family``), every action needs the
clean blocks that let its test reach the strictest corrected level, and an
action slower than the threshold whose corrected p-value does not reach
alpha is inconclusive (the gate extends itself), never a pass. Server CPU
per request is evidence: it names the kind of a regression (burns CPU,
waits, or both) with the numbers, and convicts nothing on its own (a change
that costs CPU at concurrency 1 costs latency too, and the latency test is
the one the family's promise is made for). Too few clean blocks:
``inconclusive`` (exit 3), never a regression.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from rally_keystone_bench.verdicts import family, stats
from rally_keystone_bench.verdicts.verdict_head import (
    counters_headline,
    unknown_headline,
    verdict_fields,
)

MIN_CLEAN_BLOCKS = 8
MIN_PAIRS_PER_BLOCK = 1
EXIT_INCONCLUSIVE = 3
CPU_ROW = "server CPU per request"
KIND_CPU = "burns CPU"
KIND_WAITS = "waits"
KIND_BOTH = "burns CPU and waits"
KIND_UNKNOWN = "slower (server CPU not measured)"
KIND_FAILS = "fails"
# The added server CPU as a share of the added latency that names the kind:
# at least CPU_SHARE -> burns CPU; at most WAIT_SHARE -> waits; between: both.
CPU_SHARE = 2.0 / 3.0
WAIT_SHARE = 1.0 / 5.0


@dataclasses.dataclass(frozen=True)
class Bounds:
    """When a block counts as disturbed (figures in cores: CPU seconds per second).

    Steady load from elsewhere falls on both sides of every pair alike; a
    load that starts or stops within a block, CPU stolen by the hypervisor,
    or a load generator short of CPU, may not.
    """

    max_other_swing: float = 0.5  # other processes' CPU, max - min between samples
    max_steal: float = 0.1
    max_generator: float = 0.8

    def reason(self, i: Interference) -> str | None:
        """Why a block with interference I is set aside, or None when it is clean."""
        if i.other_swing > self.max_other_swing:
            return f"other processes' CPU swung by {i.other_swing:.2f} core"
        if i.steal > self.max_steal:
            return f"steal {i.steal:.2f} core"
        if i.generator > self.max_generator:
            return f"load generator at {i.generator:.2f} core"
        return None

    def describe(self) -> str:
        return (
            f"a block is set aside when other processes' CPU swings by more than "
            f"{self.max_other_swing:g} core within it, steal exceeds {self.max_steal:g} core, "
            f"or the load generator uses more than {self.max_generator:g} core"
        )


@dataclasses.dataclass(frozen=True)
class Interference:
    """What else ran during a block, in cores (CPU seconds per second)."""

    other: float  # mean CPU of processes that are neither Keystone nor the load
    other_swing: float  # max - min of ``other`` between the block's samples
    steal: float
    generator: float  # the load generator (rally and its workers)


@dataclasses.dataclass
class Block:
    """One block of one workload: paired latencies and each side's server CPU."""

    index: int
    start: float  # epoch seconds
    end: float
    ratios: list[float]  # candidate / baseline of each pair
    base_median: float
    cand_median: float
    base_cpu: float | None = None  # server CPU seconds per request
    cand_cpu: float | None = None
    interference: Interference | None = None
    set_aside: str | None = None  # the reason, or None when clean

    @property
    def ratio(self) -> float:
        return median(self.ratios)

    @property
    def cpu_ratio(self) -> float:
        if not self.base_cpu or self.cand_cpu is None:
            return math.nan
        return self.cand_cpu / self.base_cpu

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "start": self.start,
            "end": self.end,
            "pairs": len(self.ratios),
            "ratio": _finite(self.ratio),
            "base_median": self.base_median,
            "cand_median": self.cand_median,
            "base_cpu_per_request": self.base_cpu,
            "cand_cpu_per_request": self.cand_cpu,
            "cpu_ratio": _finite(self.cpu_ratio),
            "interference": dataclasses.asdict(self.interference) if self.interference else None,
            "set_aside": self.set_aside,
        }


def median(values: Sequence[float]) -> float:
    import numpy as np

    return float(np.median(values)) if len(values) else math.nan


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def make_block(
    index: int,
    start: float,
    end: float,
    base: Sequence[float],
    cand: Sequence[float],
    base_cpu: float | None = None,
    cand_cpu: float | None = None,
    interference: Interference | None = None,
) -> Block:
    """A block from its pairs' latencies (BASE[i] and CAND[i] are one pair)."""
    ratios = [c / b for b, c in zip(base, cand, strict=True) if b > 0]
    return Block(
        index, start, end, ratios, median(base), median(cand), base_cpu, cand_cpu, interference
    )


@dataclasses.dataclass
class Judgement:
    """One figure (latency or server CPU per request) judged on the clean blocks."""

    name: str
    n_clean: int
    ratio: float  # median of the clean blocks' ratios
    ci_low: float
    ci_high: float
    p_value: float  # Wilcoxon signed-rank of log ratios against 0
    base: float  # median over clean blocks of the baseline's figure
    cand: float
    verdict: str
    regression: bool
    p_adjusted: float = math.nan  # Holm over the gate's family; NaN: not part of it
    tests: int = 1  # the family's size

    @property
    def p_judged(self) -> float:
        """The p-value the verdict was decided on: the corrected one when there is one."""
        return self.p_adjusted if math.isfinite(self.p_adjusted) else self.p_value

    def as_dict(self) -> dict[str, Any]:
        return {k: _finite(v) for k, v in dataclasses.asdict(self).items()}


def judge_ratios(
    name: str,
    ratios: Sequence[float],
    base: Sequence[float],
    cand: Sequence[float],
    threshold: float,
    alpha: float,
    seed: int = stats.DEFAULT_SEED,
    words: tuple[str, str] = ("slower", "faster"),
    convicts: bool = True,
) -> Judgement:
    """Median of per-block ratios, its bootstrap CI, Wilcoxon p and the verdict.

    WORDS say a ratio above 1 and below 1 (``1.31x slower``, ``1.58x more CPU``).
    CONVICTS: False for evidence (server CPU), which is never a regression.
    """
    import numpy as np

    r = np.asarray([x for x in ratios if math.isfinite(x) and x > 0], dtype=float)
    if r.size == 0:
        return Judgement(name, 0, *(math.nan,) * 6, "no figures", False)
    med, lo, hi = stats.median_ci(r, seed=seed)
    p = stats.wilcoxon_signed_rank(np.log(r)).p_value
    text = stats.verdict(med, p, alpha, threshold, higher_is=words[0], lower_is=words[1])
    regression = convicts and beyond(med, p, alpha, threshold)
    return Judgement(
        name, int(r.size), med, lo, hi, p, median(base), median(cand), text, regression
    )


def beyond(ratio: float, p: float, alpha: float, threshold: float) -> bool:
    """Significantly slower by more than the threshold."""
    return bool(p < alpha and ratio > 1.0 and stats.change_percent(ratio) > threshold)


def over_threshold(ratio: float, threshold: float) -> bool:
    return math.isfinite(ratio) and ratio > 1.0 and stats.change_percent(ratio) > threshold


@dataclasses.dataclass
class ActionVerdict:
    """The gate's verdict on one action of one workload."""

    workload: str
    action: str  # keystone.issue_token, without the side
    blocks: list[Block]
    latency: Judgement | None
    cpu: Judgement | None
    inconclusive: str | None  # the reason, or None
    # Success (compare.judge_success): the verdict on failures, when any.
    base_success: float | None = None  # percent
    cand_success: float | None = None
    failure_verdict: str = ""
    failure_regression: bool = False

    @property
    def n_clean(self) -> int:
        return sum(1 for b in self.blocks if b.set_aside is None)

    @property
    def regression(self) -> bool:
        """Fails more often; or, on enough clean blocks, slower or costlier in CPU."""
        if self.failure_regression:
            return True
        if self.inconclusive:
            return False
        return bool(self.latency and self.latency.regression)

    @property
    def kind(self) -> str | None:
        """For a regression: fails, burns CPU, waits (a sleep, a lock, a round trip), or both."""
        if not self.regression:
            return None
        if self.failure_regression:
            return KIND_FAILS
        added = self.added_ms()
        if added is None:
            return KIND_UNKNOWN
        return kind_of(*added)

    def added_ms(self) -> tuple[float, float] | None:
        """(added latency, added server CPU) per request in ms, medians over clean blocks.

        None when the server CPU was not measured on enough blocks.
        """
        lat, cpu = self.latency, self.cpu
        if lat is None or cpu is None:
            return None
        values = (lat.cand - lat.base, cpu.cand - cpu.base)
        if not all(math.isfinite(v) for v in values):
            return None
        return values[0] * 1000.0, values[1] * 1000.0

    def kind_detail(self) -> str:
        """``burns CPU and waits: +219.0 ms per request, of which +98.0 ms server CPU``."""
        kind = self.kind
        added = self.added_ms()
        if kind is None or kind == KIND_FAILS or added is None:
            return kind or ""
        return f"{kind}: {added[0]:+.1f} ms per request, of which {added[1]:+.1f} ms server CPU"

    @property
    def verdict(self) -> str:
        if self.failure_regression:
            return self.failure_verdict
        if self.inconclusive:
            return f"inconclusive: {self.inconclusive}"
        assert self.latency is not None
        if not self.regression:
            return self.latency.verdict
        return f"{self.latency.verdict}, {self.kind}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "action": self.action,
            "verdict": self.verdict,
            "regression": self.regression,
            "kind": self.kind,
            "kind_detail": self.kind_detail() or None,
            "inconclusive": self.inconclusive,
            "base_success_percent": self.base_success,
            "cand_success_percent": self.cand_success,
            "failure_verdict": self.failure_verdict,
            "clean_blocks": self.n_clean,
            "blocks_set_aside": len(self.blocks) - self.n_clean,
            "latency": self.latency.as_dict() if self.latency else None,
            "server_cpu_per_request": self.cpu.as_dict() if self.cpu else None,
            "block_ratios": [_finite(b.ratio) for b in self.blocks if b.set_aside is None],
            "blocks": [b.as_dict() for b in self.blocks],
        }


def judge_action(
    workload: str,
    action: str,
    blocks: Sequence[Block],
    threshold: float = 10.0,
    alpha: float = 0.01,
    bounds: Bounds | None = None,
    min_clean: int = MIN_CLEAN_BLOCKS,
) -> ActionVerdict:
    """Set aside disturbed blocks, then judge latency and server CPU on the rest."""
    bounds = bounds or Bounds()
    blocks = list(blocks)
    for b in blocks:
        b.set_aside = bounds.reason(b.interference) if b.interference else None
    clean = [b for b in blocks if b.set_aside is None]
    if len(clean) < min_clean:
        aside = len(blocks) - len(clean)
        why = f"{len(clean)} clean blocks, {min_clean} needed ({aside} of {len(blocks)} set aside"
        reasons = sorted({b.set_aside.split(" by ")[0] for b in blocks if b.set_aside})
        why += f": {'; '.join(reasons)})" if reasons else ")"
        return ActionVerdict(workload, action, blocks, None, None, why)
    latency = judge_ratios(
        action,
        [b.ratio for b in clean],
        [b.base_median for b in clean],
        [b.cand_median for b in clean],
        threshold,
        alpha,
    )
    with_cpu = [b for b in clean if math.isfinite(b.cpu_ratio)]
    cpu = None
    if len(with_cpu) >= min(min_clean, MIN_CLEAN_BLOCKS):
        cpu = judge_ratios(
            CPU_ROW,
            [b.cpu_ratio for b in with_cpu],
            [b.base_cpu for b in with_cpu],
            [b.cand_cpu for b in with_cpu],
            threshold,
            alpha,
            words=("more CPU", "less CPU"),
            convicts=False,
        )
    return ActionVerdict(workload, action, blocks, latency, cpu, None)


def kind_of(added_latency_ms: float, added_cpu_ms: float) -> str:
    """The kind of a slowdown from what it added: server CPU against latency per request."""
    if added_latency_ms <= 0:
        return KIND_CPU if added_cpu_ms > 0 else KIND_WAITS
    share = added_cpu_ms / added_latency_ms
    if share >= CPU_SHARE:
        return KIND_CPU
    if share <= WAIT_SHARE:
        return KIND_WAITS
    return KIND_BOTH


@dataclasses.dataclass
class GateResult:
    """Every action's verdict; ``exit_code`` is what CI sees."""

    base: str
    candidate: str
    threshold: float
    alpha: float
    block_seconds: float
    bounds: Bounds
    actions: list[ActionVerdict]
    rounds: int = 1  # task runs (the gate extends itself with more)
    max_failure_increase: float = 0.0  # percentage points
    notes: list[str] = dataclasses.field(default_factory=list)
    tests: int = 1  # latency tests in the family (family_verdict.judge_family)
    blocks_needed: int = MIN_CLEAN_BLOCKS  # clean blocks each action needed
    # "workload: action" of each SQL count a side traced no (or too few) request of:
    # unknown, so the gate cannot say "no regression" for it
    counters_unknown: list[str] = dataclasses.field(default_factory=list)
    # "workload: action (SQL statements)" of each exact count that rose beyond the
    # tolerance: a regression whatever the latency said (no noise to wait out)
    counters_failed: list[str] = dataclasses.field(default_factory=list)

    @property
    def regressions(self) -> list[ActionVerdict]:
        return [a for a in self.actions if a.regression]

    @property
    def inconclusive(self) -> list[ActionVerdict]:
        return [a for a in self.actions if a.inconclusive and not a.regression]

    @property
    def exit_code(self) -> int:
        if self.regressions or self.counters_failed:
            return 1
        if self.inconclusive or not self.actions or self.counters_unknown:
            return EXIT_INCONCLUSIVE
        return 0

    @property
    def only_counts_unknown(self) -> bool:
        """Inconclusive for no other reason than an unknown SQL count: latency was judged."""
        judged = bool(self.actions) and not self.regressions and not self.inconclusive
        return judged and not self.counters_failed and bool(self.counters_unknown)

    def headline(self) -> str:
        """The verdict in one line, before any number."""
        rules = f"threshold {self.threshold:g}%, alpha {self.alpha:g}"
        if self.tests > 1:
            rules += f" over {self.tests} tests (Holm)"
        if self.max_failure_increase:
            rules += f", max failure increase {self.max_failure_increase:g} points"
        regs = self.regressions
        if regs:
            worst = max(
                regs,
                key=lambda a: (a.failure_regression, a.latency.ratio if a.latency else 0.0),
            )
            more = f" (and {len(regs) - 1} more)" if len(regs) > 1 else ""
            return f"REGRESSION ({rules}): {worst.action} {worst.verdict} in {worst.workload}{more}"
        if self.counters_failed:
            return counters_headline(rules, self.counters_failed)
        if self.only_counts_unknown:
            return unknown_headline(rules, self.counters_unknown)
        if self.exit_code == EXIT_INCONCLUSIVE:
            first = self.inconclusive[0] if self.inconclusive else None
            why = "no pairs"
            if first:
                why = f"{first.action} in {first.workload}: {first.inconclusive}"
            return f"INCONCLUSIVE ({rules}): too little clean measurement; {why}"
        return f"no regression ({rules})"

    def advice(self) -> str | None:
        if self.only_counts_unknown:
            return (
                "a side traced too few of a timed workload's requests (the counter lines say "
                "which, and why), so a SQL statement added there would pass unseen: not a "
                "failure of the change; recheck"
            )
        if self.exit_code == EXIT_INCONCLUSIVE:
            return (
                "the machine was too busy to judge: not a failure of the change; "
                "recheck, or give the gate more --max-time"
            )
        return None

    def interference_summary(self) -> str:
        blocks = [b for a in self.actions for b in a.blocks]
        seen = [b.interference for b in blocks if b.interference]
        clean = sum(1 for b in blocks if b.set_aside is None)
        if not seen:
            return f"clean blocks: {clean} of {len(blocks)}; interference not measured"
        other = [i.other for i in seen]
        return (
            f"clean blocks: {clean} of {len(blocks)} ({self.block_seconds:g} s each, "
            f"{self.rounds} task run{'s' if self.rounds != 1 else ''}); "
            f"interference: other processes {median(other):.2f} core median, "
            f"{max(other):.2f} max; steal {max(i.steal for i in seen):.2f} core max; "
            f"load generator {median([i.generator for i in seen]):.2f} core median"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            **verdict_fields(self),
            "inconclusive": self.exit_code == EXIT_INCONCLUSIVE,
            "advice": self.advice(),
            "block_seconds": self.block_seconds,
            "task_runs": self.rounds,
            "family": {
                "tests": self.tests,
                "correction": "holm",
                "blocks_needed": self.blocks_needed,
                "rule": family.describe(self.alpha, self.tests),
            },
            "bounds": {**dataclasses.asdict(self.bounds), "rule": self.bounds.describe()},
            "interference": self.interference_summary(),
            "actions": [a.as_dict() for a in self.actions],
            "notes": self.notes,
            "counters_unknown": self.counters_unknown,
            "counters_failed": self.counters_failed,
        }
