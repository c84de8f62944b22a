"""Progress of a Rally task as Rally and Locust users expect it: a line per workload start
(``[3/6] KeystoneTokens.validate(GET): 20 iterations``), then iterations done of the
total (or seconds of the duration), failures, elapsed and ETA.

On a terminal one live line is rewritten in place; in a CI log (stderr not a tty)
plain lines come every few seconds and at each workload's end. The workloads are
known before Rally starts: the task file rendered at its arguments, as Rally will
render it; Rally's log says when each starts ("Running workload") and ends
("Finished workload").
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

STARTED = "Running workload:"
FINISHED = "Finished workload"
# Args that tell workloads of one scenario apart, first that is set wins.
NAMING_ARGS = ("method", "path", "workload")
SECRET_WORDS = ("password", "secret", "token")
LIVE_EVERY_S = 0.5


@dataclasses.dataclass(frozen=True)
class Planned:
    """One workload as the task file declares it."""

    label: str  # KeystoneTokens.validate(GET)
    times: int | None = None  # iterations, for runners that count them
    duration: float | None = None  # seconds, for runners that run for a time

    def size(self) -> str:
        if self.times is not None:
            return f"{self.times} iterations"
        if self.duration is not None:
            return f"{self.duration:g} s"
        return "size unknown"


def label(scenario: str, args: Mapping[str, Any] | None) -> str:
    """SCENARIO with the arguments that tell its workloads apart: ``validate(GET)``."""
    args = args or {}
    for key in NAMING_ARGS:
        if isinstance(args.get(key), str):
            return f"{scenario}({args[key]})"
    words = [
        str(v)
        for k, v in args.items()
        if isinstance(v, str) and not any(s in k.lower() for s in SECRET_WORDS)
    ]
    return f"{scenario}({', '.join(words)})" if words else scenario


def _runner_size(runner: Mapping[str, Any]) -> tuple[int | None, float | None]:
    if len(runner) != 1:
        return None, None
    [(_kind, cfg)] = runner.items()
    cfg = cfg or {}
    times = cfg.get("times")
    duration = cfg.get("duration")
    if isinstance(times, int):
        return times, None
    if isinstance(duration, (int, float)):
        return None, float(duration)
    return None, None


def plan(task_file: Path, task_args: Mapping[str, Any]) -> list[Planned]:
    """The workloads of a v2 task file at TASK_ARGS; [] when it cannot be read here
    (Rally then still says how far it got, without totals)."""
    try:
        import jinja2
        import yaml

        text = jinja2.Environment().from_string(task_file.read_text()).render(**task_args)
        doc = yaml.safe_load(text)
        subtasks = doc["subtasks"]
    except Exception:  # Rally's own validation reports a bad task; progress does without
        return []
    out = []
    for sub in subtasks:
        for wl in sub.get("workloads") or [sub]:
            scenario = wl.get("scenario") or {}
            name, args = next(iter(scenario.items()), ("workload", {}))
            times, duration = _runner_size(wl.get("runner") or {})
            out.append(Planned(label(name, args), times, duration))
    return out


class Board:
    """Watches one task's Rally lines and says how far each workload got.

    SAY gets the plain lines (a workload's start and end, and in a log every
    EVERY seconds); on a terminal STREAM shows one live line in between.
    """

    def __init__(
        self,
        planned: list[Planned],
        say: Callable[[str], None],
        *,
        every: float = 5.0,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.planned, self.say, self.every, self.clock = planned, say, every, clock
        stream = stream if stream is not None else sys.stderr
        self.live = stream if getattr(stream, "isatty", lambda: False)() else None
        self.index = 0  # of the running workload, from 1; 0 before the first
        self.base = (0, 0, 0)  # the task's (done, failed, started) when it started
        self.load_at: float | None = None  # its first iteration's start: contexts set up
        self.started_at = self.last_said = 0.0
        self.running = False  # between a workload's start and its end line
        self.counts = (0, 0)
        self.total: int | None = len(planned) or None
        self._live_shown = False

    # -- what Rally says -------------------------------------------------------------
    def feed(self, line: str, done: int, failed: int, started: int = 0) -> None:
        """One line of Rally's output, and the task's counts (done, failed, started) after it."""
        if STARTED in line:
            self._end()
            self.index += 1
            self.base, self.started_at = (done, failed, started), self.clock()
            self.last_said, self.running = self.started_at, True
            self.load_at = None
            self.counts = (0, 0)
            self._say(f"{self._tag()} {self._current().label}: {self._current().size()} ...")
            return
        if not self.running:
            return
        if self.load_at is None and (started > self.base[2] or done > self.base[0]):
            self.load_at = self.clock()
        counts = (done - self.base[0], failed - self.base[1])
        if FINISHED in line:
            self.counts = counts
            self._end()
            return
        if counts != self.counts:
            self.counts = counts
            self._update()

    def close(self) -> None:
        """The task ended: the last workload's line, if Rally did not say it finished."""
        self._end()

    # -- what we say -----------------------------------------------------------------
    def _current(self) -> Planned:
        if 0 < self.index <= len(self.planned):
            return self.planned[self.index - 1]
        return Planned(f"workload {self.index}")

    def _tag(self) -> str:
        return f"[{self.index}/{self.total}]" if self.total else f"[{self.index}]"

    def status(self) -> str:
        """``13/20 iterations, 0 failed, 4.1 s elapsed, ETA 2.2 s``: the ETA from the
        load's pace, the contexts' setup (before the first iteration) left out."""
        wl, (done, failed) = self._current(), self.counts
        now = self.clock()
        elapsed = now - self.started_at
        load = now - self.load_at if self.load_at is not None else 0.0
        if wl.times:
            eta = load * (wl.times - done) / done if done else None
            head = f"{done}/{wl.times} iterations"
        elif wl.duration:
            eta = max(wl.duration - load, 0.0)
            head = f"{done} iterations, {min(load, wl.duration):.0f}/{wl.duration:g} s"
        else:
            eta, head = None, f"{done} iterations"
        tail = f", ETA {eta:.1f} s" if eta is not None else ""
        return f"{head}, {failed} failed, {elapsed:.1f} s elapsed{tail}"

    def _update(self) -> None:
        now = self.clock()
        if self.live is not None:
            if now - self.last_said >= LIVE_EVERY_S:
                self.last_said = now
                self.live.write(f"\r\x1b[K{self._tag()} {self._current().label}: {self.status()}")
                self.live.flush()
                self._live_shown = True
        elif now - self.last_said >= self.every:
            self.last_said = now
            self._say(f"{self._tag()} {self._current().label}: {self.status()}")

    def _end(self) -> None:
        if not self.running:
            return
        self.running = False
        done, failed = self.counts
        elapsed = self.clock() - self.started_at
        self._say(
            f"{self._tag()} {self._current().label}: finished, {done} iterations, "
            f"{failed} failed, in {elapsed:.1f} s"
        )

    def _say(self, text: str) -> None:
        if self.live is not None and self._live_shown:
            self.live.write("\r\x1b[K")
            self._live_shown = False
        self.say(text)
