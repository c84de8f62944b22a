"""Where the time went: py-spy's collapsed stacks, per request, and their difference.

A collapsed stack is one line ``frame;frame;...;frame COUNT``, root first;
py-spy writes a frame as ``function (path/file.py:line)`` and, with
``--subprocesses``, starts each stack with ``process PID:"command"`` frames,
which are dropped here, as are stacks without a Python frame (a uWSGI
process waiting in C for its next request).

A function's *self* time is the samples where it is the innermost Python
frame: with ``--idle`` that includes a wait it called (``time.sleep``, a
lock, a socket read), so an added sleep shows as self time of its caller.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Iterable, Mapping

_FRAME = re.compile(r"^(?P<function>.*) \((?P<path>[^()]*?):(?P<line>\d+)\)$")
Stacks = Mapping[tuple[str, ...], int]


def parse(lines: Iterable[str]) -> collections.Counter[tuple[str, ...]]:
    """Collapsed stacks (root first) -> sample counts; process frames and empty stacks dropped."""
    stacks: collections.Counter[tuple[str, ...]] = collections.Counter()
    for line in lines:
        text, _, count = line.rstrip().rpartition(" ")
        if not text or not count.isdigit():
            continue
        frames = tuple(f for f in text.split(";") if f and not f.startswith("process "))
        if frames:
            stacks[frames] += int(count)
    return stacks


def where(frame: str) -> str:
    """``keystone/api/auth.py:AuthTokenResource.post`` from py-spy's frame text."""
    found = _FRAME.match(frame)
    if not found:
        return frame
    return f"{found['path']}:{found['function']}"


def line_of(frame: str) -> str:
    found = _FRAME.match(frame)
    return found["line"] if found else "?"


def self_ms(stacks: Stacks, rate: float, requests: int) -> dict[str, float]:
    """file:function -> milliseconds of self time per request."""
    per = 1000.0 / rate / max(requests, 1)
    out: dict[str, float] = collections.defaultdict(float)
    for frames, n in stacks.items():
        out[where(frames[-1])] += n * per
    return dict(out)


def _caller_in(stacks: Stacks, key: str, package: str) -> str | None:
    """The innermost frame of PACKAGE/api/ above KEY in the stacks where KEY is innermost."""
    best: collections.Counter[str] = collections.Counter()
    for frames, n in stacks.items():
        if where(frames[-1]) != key:
            continue
        for frame in reversed(frames[:-1]):
            if f"{package}/api/" in frame:
                best[where(frame)] += n
                break
    return best.most_common(1)[0][0] if best else None


@dataclasses.dataclass(frozen=True)
class ProfileChange:
    """One function's self time per request, before and after."""

    function: str  # file:function
    before_ms: float
    after_ms: float
    under: str | None  # the Keystone API handler it ran under, when found
    line: str = "?"

    @property
    def added_ms(self) -> float:
        return self.after_ms - self.before_ms

    def sentence(self) -> str:
        under = f", under {self.under}" if self.under else ""
        return (
            f"{self.function} (line {self.line}): {self.added_ms:+.1f} ms per request "
            f"({self.before_ms:.1f} -> {self.after_ms:.1f} ms of self time{under})"
        )


def diff(
    before: Stacks,
    after: Stacks,
    requests: tuple[int, int],
    rate: float,
    top: int = 5,
    package: str = "keystone",
) -> list[ProfileChange]:
    """The TOP functions whose self time per request changed most, largest rise first."""
    b = self_ms(before, rate, requests[0])
    a = self_ms(after, rate, requests[1])
    keys = sorted(set(a) | set(b), key=lambda k: (-(a.get(k, 0.0) - b.get(k, 0.0)), k))
    changes = []
    for key in keys[:top]:
        lines = [line_of(f[-1]) for f in after if where(f[-1]) == key]
        changes.append(
            ProfileChange(
                key,
                b.get(key, 0.0),
                a.get(key, 0.0),
                _caller_in(after, key, package) or _caller_in(before, key, package),
                collections.Counter(lines).most_common(1)[0][0] if lines else "?",
            )
        )
    return changes
