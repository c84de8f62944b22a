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


# Keystone's token API handler (outermost keystone/api frame) -> the atomic action it serves.
HANDLER_ACTIONS = {
    "AuthTokenResource.post": "keystone.issue_token",
    "AuthTokenResource.get": "keystone.validate_token",
    "AuthTokenResource.head": "keystone.check_token",
    "AuthTokenResource.delete": "keystone.revoke_token",
}
ANY = "any request"


def handler_of(frames: tuple[str, ...], package: str = "keystone") -> str | None:
    """The outermost frame of PACKAGE/api/ in FRAMES, as file:function."""
    for frame in frames:
        if f"{package}/api/" in frame:
            return where(frame)
    return None


def action_of(handler: str | None) -> str:
    if handler is None:
        return ANY
    return HANDLER_ACTIONS.get(handler.rpartition(":")[2], ANY)


def self_ms(
    stacks: Stacks, rate: float, requests: Mapping[str, int]
) -> dict[tuple[str, str], float]:
    """(file:function, action) -> ms of self time per request of that action.

    A stack under a token handler counts per request of the action it
    serves; any other stack per request of any kind (REQUESTS[ANY]).
    """
    out: dict[tuple[str, str], float] = collections.defaultdict(float)
    for frames, n in stacks.items():
        action = action_of(handler_of(frames))
        count = requests.get(action) or requests.get(ANY) or 1
        out[(where(frames[-1]), action)] += n * 1000.0 / rate / count
    return dict(out)


@dataclasses.dataclass(frozen=True)
class ProfileChange:
    """One function's self time per request of an action, before and after."""

    function: str  # file:function
    action: str
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
            f"{self.action}: {self.function} (line {self.line}) {self.added_ms:+.1f} ms per "
            f"request ({self.before_ms:.1f} -> {self.after_ms:.1f} ms of self time{under})"
        )


def diff(
    before: Stacks,
    after: Stacks,
    requests: tuple[Mapping[str, int], Mapping[str, int]],
    rate: float,
    top: int = 5,
) -> list[ProfileChange]:
    """The TOP (function, action) pairs whose self time per request rose most, largest first."""
    b = self_ms(before, rate, requests[0])
    a = self_ms(after, rate, requests[1])
    keys = sorted(set(a) | set(b), key=lambda k: (-(a.get(k, 0.0) - b.get(k, 0.0)), k))
    changes = []
    for key in keys[:top]:
        function, action = key

        def mine(frames: tuple[str, ...], function: str = function, action: str = action) -> bool:
            return where(frames[-1]) == function and action_of(handler_of(frames)) == action

        hits = [f for f in after if mine(f)] or [f for f in before if mine(f)]
        lines = collections.Counter(line_of(f[-1]) for f in hits)
        handlers = collections.Counter(handler_of(f) for f in hits if handler_of(f))
        changes.append(
            ProfileChange(
                function,
                action,
                b.get(key, 0.0),
                a.get(key, 0.0),
                handlers.most_common(1)[0][0] if handlers else None,
                lines.most_common(1)[0][0] if lines else "?",
            )
        )
    return changes
