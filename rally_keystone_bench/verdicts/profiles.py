"""Where the time went: py-spy's collapsed stacks, per request, and their difference.

A collapsed stack is one line ``frame;frame;...;frame COUNT``, root first;
py-spy writes a frame as ``function (path/file.py:line)`` and, with
``--subprocesses``, starts each stack with ``process PID:"command"`` frames,
which are dropped here, as are stacks without a Python frame (a uWSGI
process waiting in C for its next request).

A function's *self* time is the samples where it is the innermost Python
frame: with ``--idle`` that includes a wait it called (``time.sleep``, a
lock, a socket read), so an added sleep shows as self time of its caller.
Self time is kept per line of that frame too: the line a sample was taken
at is the line that made the call (``time.sleep(0.15)``, ``bcrypt.hashpw``),
and a change names the lines its added samples were taken at, with their
shares and, given a SOURCE reader, each line's text (the call made there).

Self time is per request Keystone served (``served``: its access log, in
the window py-spy sampled), never per request Rally timed: Keystone also
serves untimed requests (a context's setup, a pool's tokens, the token a
validation workload validates), and their samples must not be charged to
the timed ones, else a function's self time per request exceeds the request.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

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


def path_of(frame: str) -> str | None:
    """The file py-spy names in FRAME (``keystone/api/auth.py``), or None."""
    found = _FRAME.match(frame)
    return found["path"] if found else None


# Keystone's token API handler (outermost keystone/api frame) -> the atomic action it serves.
HANDLER_ACTIONS = {
    "AuthTokenResource.post": "keystone.issue_token",
    "AuthTokenResource.get": "keystone.validate_token",
    "AuthTokenResource.head": "keystone.check_token",
    "AuthTokenResource.delete": "keystone.revoke_token",
}
ANY = "any request"


# Flask serves HEAD with a resource's get(): the stacks under AuthTokenResource.get are a
# validation's or a check's, and count per request of either that Keystone served.
SERVED_BY_GET = ("keystone.validate_token", "keystone.check_token")


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


# The token API's methods (Keystone's access log) -> the atomic action each serves.
METHOD_ACTIONS = {
    "POST": "keystone.issue_token",
    "GET": "keystone.validate_token",
    "HEAD": "keystone.check_token",
    "DELETE": "keystone.revoke_token",
}
TOKENS_PATH = "/v3/auth/tokens"
Span = tuple[float, float]  # epoch seconds, start and end


def served(lines: Iterable[str], spans: Sequence[Span]) -> collections.Counter[str]:
    """Requests Keystone served that started inside SPANS: per token action, all under ANY.

    LINES are Keystone's access log, ``EPOCH_MS METHOD URI STATUS MICROS PID``
    (every server writes that line, deploy/servers.py).
    """
    out: collections.Counter[str] = collections.Counter()
    for line in lines:
        fields = line.split()
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        started = int(fields[0]) / 1000.0
        if not any(a <= started < b for a, b in spans):
            continue
        out[ANY] += 1
        if fields[2].partition("?")[0] == TOKENS_PATH and fields[1] in METHOD_ACTIONS:
            out[METHOD_ACTIONS[fields[1]]] += 1
    return out


def line_self_ms(
    stacks: Stacks, rate: float, requests: Mapping[str, int]
) -> dict[tuple[str, str, str], float]:
    """(file:function, action, line) -> ms of self time per request taken at that line.

    REQUESTS: what Keystone served while STACKS were sampled (``served``).
    A stack under a token handler counts per request of the action it
    serves (the GET handler: per GET or HEAD); any other stack per request
    of any kind (REQUESTS[ANY]).
    """
    out: dict[tuple[str, str, str], float] = collections.defaultdict(float)
    for frames, n in stacks.items():
        action = action_of(handler_of(frames))
        kinds = SERVED_BY_GET if action == SERVED_BY_GET[0] else (action,)
        count = sum(requests.get(k, 0) for k in kinds) or requests.get(ANY) or 1
        out[(where(frames[-1]), action, line_of(frames[-1]))] += n * 1000.0 / rate / count
    return dict(out)


def self_ms(
    stacks: Stacks, rate: float, requests: Mapping[str, int]
) -> dict[tuple[str, str], float]:
    """(file:function, action) -> ms of self time per request of that action (its lines summed)."""
    out: dict[tuple[str, str], float] = collections.defaultdict(float)
    for (function, action, _), ms in line_self_ms(stacks, rate, requests).items():
        out[(function, action)] += ms
    return dict(out)


Source = Callable[[str, str], "str | None"]  # (file as py-spy names it, line) -> its text


@dataclasses.dataclass(frozen=True)
class LineShare:
    """One line of a function: its share of the change in self time, and what it says."""

    line: str
    share: float  # 0-1 of the function's added self time (or of its self time)
    text: str | None = None  # the line's source, stripped: the call made there

    def phrase(self) -> str:
        """``line 325 (100 %: time.sleep(0.15))``."""
        said = f": {self.text}" if self.text else ""
        return f"line {self.line} ({self.share * 100:.0f} %{said})"


@dataclasses.dataclass(frozen=True)
class ProfileChange:
    """One function's self time per request of an action, before and after."""

    function: str  # file:function
    action: str
    before_ms: float
    after_ms: float
    under: str | None  # the Keystone API handler it ran under, when found
    line: str = "?"  # the line that took most of the change
    lines: tuple[LineShare, ...] = ()  # the lines that took it, largest share first

    @property
    def added_ms(self) -> float:
        return self.after_ms - self.before_ms

    def place(self) -> str:
        """The lines the change was taken at, or ``(line N)`` without their shares."""
        if not self.lines:
            return f"(line {self.line})"
        return ", ".join(s.phrase() for s in self.lines)

    def sentence(self) -> str:
        under = f", under {self.under}" if self.under else ""
        return (
            f"{self.action}: {self.function} {self.place()} {self.added_ms:+.1f} ms per "
            f"request ({self.before_ms:.1f} -> {self.after_ms:.1f} ms of self time{under})"
        )


MIN_SHARE = 0.05  # a line with less of the change is not named (the top line always is)
MOST_LINES = 3
MIN_RISE_MS = 0.05  # a smaller rise prints as +0.0 ms: not where time went


def line_shares(
    before: Mapping[str, float], after: Mapping[str, float], source: Source | None, path: str | None
) -> tuple[LineShare, ...]:
    """Per line (ms before and after): the lines that took the added self time, largest first.

    Shares of the lines whose self time rose; when none rose, of the
    candidate's self time (else the baseline's) as it is.
    """
    rises = {n: after.get(n, 0.0) - before.get(n, 0.0) for n in set(before) | set(after)}
    weights = {n: d for n, d in rises.items() if d > 0} or dict(after) or dict(before)
    total = sum(weights.values())
    if total <= 0:
        return ()
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = [kv for i, kv in enumerate(ranked) if i == 0 or kv[1] / total >= MIN_SHARE]
    return tuple(
        LineShare(n, w / total, source(path, n) if source and path else None)
        for n, w in shown[:MOST_LINES]
    )


def diff(
    before: Stacks,
    after: Stacks,
    requests: tuple[Mapping[str, int], Mapping[str, int]],
    rate: float,
    top: int = 5,
    source: Source | None = None,
) -> list[ProfileChange]:
    """The TOP (function, action) pairs whose self time per request rose most, largest first.

    Only rises of MIN_RISE_MS or more: a function whose time stayed (``+0.0 ms``)
    or fell did not take the added time.

    Each names the lines its added samples were taken at; SOURCE, when
    given, reads a line's text (the candidate's tree first).
    """
    per_line = (line_self_ms(before, rate, requests[0]), line_self_ms(after, rate, requests[1]))
    by_key: tuple[dict, dict] = (collections.defaultdict(dict), collections.defaultdict(dict))
    for side, lines in zip(by_key, per_line, strict=True):
        for (function, action, line), ms in lines.items():
            side[(function, action)][line] = ms
    b = {k: sum(v.values()) for k, v in by_key[0].items()}
    a = {k: sum(v.values()) for k, v in by_key[1].items()}
    rose = [k for k in set(a) | set(b) if a.get(k, 0.0) - b.get(k, 0.0) >= MIN_RISE_MS]
    keys = sorted(rose, key=lambda k: (-(a.get(k, 0.0) - b.get(k, 0.0)), k))
    changes = []
    for key in keys[:top]:
        function, action = key

        def mine(frames: tuple[str, ...], function: str = function, action: str = action) -> bool:
            return where(frames[-1]) == function and action_of(handler_of(frames)) == action

        hits = [f for f in after if mine(f)] or [f for f in before if mine(f)]
        handlers = collections.Counter(handler_of(f) for f in hits if handler_of(f))
        path = path_of(hits[0][-1]) if hits else None
        shares = line_shares(by_key[0].get(key, {}), by_key[1].get(key, {}), source, path)
        changes.append(
            ProfileChange(
                function,
                action,
                b.get(key, 0.0),
                a.get(key, 0.0),
                handlers.most_common(1)[0][0] if handlers else None,
                shares[0].line if shares else "?",
                shares,
            )
        )
    return changes


Slice = tuple[float, float, Mapping]  # epoch start, end, and the samples taken (stack -> count)


def split_by_windows(
    slices: Sequence[Slice], windows: Sequence[Span | None]
) -> list[collections.Counter]:
    """Each window's samples: a slice's counts times the share of the slice inside it.

    py-spy's stacks carry no time: profiling restarts py-spy every few
    seconds, each slice knows when it was taken, and a slice that straddles
    a window's edge gives it its counts in proportion to the overlap
    (rounded). None (a workload without iteration) gets nothing.
    """
    out: list[collections.Counter] = [collections.Counter() for _ in windows]
    for start, end, counts in slices:
        length = end - start
        if length <= 0:
            continue
        for got, window in zip(out, windows, strict=True):
            if window is None:
                continue
            share = (min(end, window[1]) - max(start, window[0])) / length
            if share <= 0:
                continue
            for key, n in counts.items():
                part = round(n * share)
                if part:
                    got[key] += part
    return out
