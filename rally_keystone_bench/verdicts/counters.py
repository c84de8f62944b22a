"""Cost counters per request from Keystone's OSprofiler trace records; their verdict.

A record is one trace point as the run's trace store keeps it (a dict:
``name`` such as ``wsgi-start`` or ``db-stop``, ``base_id``, ``trace_id``,
``timestamp``, and ``statement`` on ``db-start``, ``method``/``path`` on
``wsgi-start``). One ``base_id`` is one request our client signed.
``cache-start`` (``cache``: its ``op`` and ``keys``), ``cache-stop``
(``cache``: ``misses`` of a get) and ``ldap-start`` (``ldap``: Keystone's
LDAP handler call) come from the run's own trace points inside Keystone
(deploy/templates/keystone_bench_tracing.py.j2): Keystone traces neither.

Counts are exact, so their verdict needs no statistics: the median count of
SQL statements per request (the lower median: always a count some request
had) either changed or did not. The median also keeps a worker's first,
colder request (seen: 118 statements for a first validation, 61 after) from
deciding anything.

A cache entry that expires in one run and not in the other changes the
count without any change of code: Keystone rebuilds what it missed (seen:
a validation's catalog, +4 statements, in a candidate that only slept in
token issue). Where both sides traced their cache, the verdict is judged on
the requests in the baseline's usual cache state, those with as many cache
misses as most of the baseline's had; a rise outside them is shown, not
failed. A statement added to every request rises there too.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Every request of ours goes to /v3/auth/tokens; its method names the action.
ACTION_BY_METHOD = {
    "POST": "keystone.issue_token",
    "GET": "keystone.validate_token",
    "HEAD": "keystone.check_token",
    "DELETE": "keystone.revoke_token",
}
MIN_REQUESTS = 3  # fewer traced requests of an action: no counter verdict

_LITERALS = (
    (re.compile(r"'(?:[^']|'')*'"), "?"),  # string literals
    (re.compile(r"%\(\w+\)s|:\w+\b|\$\d+|%s"), "?"),  # bound parameters of any paramstyle
    (re.compile(r"__\[POSTCOMPILE_\w+\]"), "?"),  # SQLAlchemy's expanding IN
    (re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?\b"), "?"),  # numbers
    (re.compile(r"\(\s*\?(?:\s*,\s*\?)+\s*\)"), "(?)"),  # IN (?, ?, ?) -> IN (?)
    (re.compile(r"\s+"), " "),
)
_TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+[\"`]?([A-Za-z_][\w.]*)", re.IGNORECASE)
_VERB = re.compile(r"^\s*(\w+)")


def shape(statement: str) -> str:
    """STATEMENT with its literals and parameters as ``?``: equal for the same query."""
    text = statement
    for pattern, replacement in _LITERALS:
        text = pattern.sub(replacement, text)
    return text.strip()


def label(statement: str) -> str:
    """A short name for a statement: ``SELECT ... FROM revocation_event``, ``BEGIN``."""
    verb_match = _VERB.match(statement)
    verb = verb_match.group(1).upper() if verb_match else "?"
    table = _TABLE.search(statement)
    if table is None:
        return verb
    if verb == "INSERT":
        return f"INSERT INTO {table.group(1)}"
    if verb == "UPDATE":
        return f"UPDATE {table.group(1)}"
    return f"{verb} ... FROM {table.group(1)}"


def _seconds(stamp: Any) -> float | None:
    """Epoch seconds of a point's time.

    The run's trace store writes a float (time.time(): cheaper than
    osprofiler's formatted string, see deploy/tracing.py); osprofiler's own
    ISO string (UTC) is read too.
    """
    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
        return float(stamp)
    try:
        moment = datetime.datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%S.%f")
    except ValueError:
        return None
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp()


@dataclasses.dataclass(frozen=True)
class RequestCost:
    """What one traced request cost Keystone."""

    base_id: str
    action: str
    statements: tuple[str, ...]  # as Keystone sent them, in order
    db_seconds: float  # inside the database driver, summed over the statements
    complete: bool  # the request's wsgi-stop was recorded
    started: float | None = None  # epoch seconds of its wsgi-start
    cache_gets: int = 0  # keys asked of the cache backend (memcached)
    cache_misses: int = 0  # of those, keys it did not have
    cache_sets: int = 0  # keys written to it
    ldap_calls: tuple[str, ...] = ()  # Keystone's LDAP handler operations, in order

    @property
    def sql_count(self) -> int:
        return len(self.statements)

    def shapes(self) -> collections.Counter[str]:
        return collections.Counter(shape(s) for s in self.statements)


def request_costs(records: Iterable[Mapping[str, Any]]) -> list[RequestCost]:
    """One RequestCost per traced request (base_id) whose root point was recorded."""
    by_request: dict[str, list[Mapping[str, Any]]] = collections.defaultdict(list)
    for record in records:
        if record.get("base_id"):
            by_request[str(record["base_id"])].append(record)
    costs = []
    for base_id, points in by_request.items():
        root = next((p for p in points if p.get("name") == "wsgi-start"), None)
        if root is None:
            continue
        method = str(root.get("method") or "").upper()
        costs.append(
            RequestCost(
                base_id=base_id,
                action=ACTION_BY_METHOD.get(method, f"{method} {root.get('path')}"),
                complete=any(p.get("name") == "wsgi-stop" for p in points),
                started=_seconds(root.get("timestamp")),
                **_point_counts(points),
            )
        )
    return sorted(costs, key=lambda c: (c.started or 0.0, c.base_id))


def _point_counts(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One request's SQL statements and DB time, cache keys and LDAP calls."""
    starts: dict[str, float | None] = {}
    statements: list[str] = []
    cache = collections.Counter[str]()
    ldap: list[str] = []
    db = 0.0
    for point in sorted(points, key=lambda p: _seconds(p.get("timestamp")) or 0.0):
        name = point.get("name")
        detail = point.get("cache") if isinstance(point.get("cache"), Mapping) else {}
        if name == "db-start":
            statements.append(str(point.get("statement", "")))
            starts[str(point.get("trace_id"))] = _seconds(point.get("timestamp"))
        elif name == "db-stop":
            began = starts.pop(str(point.get("trace_id")), None)
            ended = _seconds(point.get("timestamp"))
            if began is not None and ended is not None:
                db += max(0.0, ended - began)
        elif name == "cache-start":
            cache[str(detail.get("op"))] += int(detail.get("keys") or 0)
        elif name == "cache-stop":
            cache["misses"] += int(detail.get("misses") or 0)
        elif name == "ldap-start":
            ldap.append(str(point.get("ldap")))
    return {
        "statements": tuple(statements),
        "db_seconds": db,
        "cache_gets": cache["get"],
        "cache_misses": cache["misses"],
        "cache_sets": cache["set"],
        "ldap_calls": tuple(ldap),
    }


@dataclasses.dataclass(frozen=True)
class ActionCounters:
    """The counters of one action over its traced requests."""

    action: str
    sql_counts: tuple[int, ...]
    db_seconds: tuple[float, ...]
    shape_counts: Mapping[str, float]  # shape -> its median count per request
    labels: Mapping[str, str]  # shape -> label
    cache_gets: tuple[int, ...] = ()  # per request; empty: no cache operation traced
    cache_misses: tuple[int, ...] = ()
    ldap_calls: tuple[int, ...] = ()  # per request; empty: no LDAP call traced
    # cache misses per request -> the counters of the requests that had that many,
    # for each count at least MIN_REQUESTS requests had; empty: no cache traced
    by_misses: Mapping[int, ActionCounters] = dataclasses.field(default_factory=dict)

    @property
    def requests(self) -> int:
        return len(self.sql_counts)

    @property
    def sql_median(self) -> int:
        return statistics.median_low(self.sql_counts) if self.sql_counts else 0

    @property
    def sql_max(self) -> int:
        return max(self.sql_counts, default=0)

    @property
    def db_ms_median(self) -> float:
        return statistics.median(self.db_seconds) * 1000 if self.db_seconds else 0.0

    @property
    def cache_gets_median(self) -> int | None:
        return statistics.median_low(self.cache_gets) if self.cache_gets else None

    @property
    def cache_hit_ratio(self) -> float | None:
        """Keys found over keys asked, over every traced request (None: nothing asked)."""
        asked = sum(self.cache_gets)
        return (asked - sum(self.cache_misses)) / asked if asked else None

    @property
    def ldap_median(self) -> int | None:
        return statistics.median_low(self.ldap_calls) if self.ldap_calls else None

    @property
    def usual_misses(self) -> int | None:
        """The cache misses per request that most traced requests had (ties: the fewest);
        None without a cache state that MIN_REQUESTS requests shared."""
        if not self.by_misses:
            return None
        return min(self.by_misses, key=lambda m: (-self.by_misses[m].requests, m))

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "action": self.action,
            "traced_requests": self.requests,
            "sql_statements_median": self.sql_median,
            "sql_statements_max": self.sql_max,
            "db_ms_median": round(self.db_ms_median, 3),
            "statements": {s: n for s, n in self.shape_counts.items()},
        }
        if self.cache_gets:
            doc["cache_gets_median"] = self.cache_gets_median
            ratio = self.cache_hit_ratio
            doc["cache_hit_ratio"] = None if ratio is None else round(ratio, 4)
        if self.ldap_calls:
            doc["ldap_calls_median"] = self.ldap_median
            doc["ldap_calls_max"] = max(self.ldap_calls)
        if self.by_misses:
            doc["by_cache_misses"] = {str(m): c.as_dict() for m, c in self.by_misses.items()}
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ActionCounters:
        """The counters a summary JSON kept (as_dict): medians stand for every request.

        A summary written before ``by_cache_misses`` was kept has no cache
        states: its verdict is judged over all requests, as it was then.
        """
        n = int(doc.get("traced_requests") or 0)
        shapes = {str(k): float(v) for k, v in (doc.get("statements") or {}).items()}
        median = int(doc.get("sql_statements_median") or 0)
        gets = doc.get("cache_gets_median")
        ratio = doc.get("cache_hit_ratio")
        misses = round(int(gets) * (1 - float(ratio))) if gets and ratio is not None else 0
        ldap = doc.get("ldap_calls_median")
        return cls(
            action=str(doc["action"]),
            sql_counts=tuple([median] * max(n - 1, 0) + [int(doc.get("sql_statements_max") or 0)])
            if n
            else (),
            db_seconds=tuple([float(doc.get("db_ms_median") or 0.0) / 1000] * n),
            shape_counts=shapes,
            labels={s: label(s) for s in shapes},
            cache_gets=tuple([int(gets)] * n) if gets is not None else (),
            cache_misses=tuple([misses] * n) if gets is not None else (),
            ldap_calls=tuple([int(ldap)] * n) if ldap is not None else (),
            by_misses={
                int(m): cls.from_dict(c) for m, c in (doc.get("by_cache_misses") or {}).items()
            },
        )


def by_action(costs: Sequence[RequestCost]) -> dict[str, ActionCounters]:
    """The counters of each action, over its complete traced requests."""
    grouped: dict[str, list[RequestCost]] = collections.defaultdict(list)
    for cost in costs:
        if cost.complete:
            grouped[cost.action].append(cost)
    return {action: _counters(action, group) for action, group in sorted(grouped.items())}


def _counters(action: str, group: Sequence[RequestCost], states: bool = True) -> ActionCounters:
    """ACTION's counters over GROUP; with STATES, also per cache-miss count (by_misses)."""
    per_request = [c.shapes() for c in group]
    every = sorted({s for counts in per_request for s in counts})
    medians = {s: float(statistics.median_low([c[s] for c in per_request])) for s in every}
    cached = any(c.cache_gets or c.cache_sets for c in group)
    ldap = any(c.ldap_calls for c in group)
    sizes = collections.Counter(c.cache_misses for c in group) if cached and states else {}
    return ActionCounters(
        action=action,
        sql_counts=tuple(c.sql_count for c in group),
        db_seconds=tuple(c.db_seconds for c in group),
        shape_counts={s: n for s, n in medians.items() if n},
        labels={s: label(s) for s in every},
        cache_gets=tuple(c.cache_gets for c in group) if cached else (),
        cache_misses=tuple(c.cache_misses for c in group) if cached else (),
        ldap_calls=tuple(len(c.ldap_calls) for c in group) if ldap else (),
        by_misses={
            m: _counters(action, [c for c in group if c.cache_misses == m], states=False)
            for m, n in sorted(sizes.items())
            if n >= MIN_REQUESTS
        },
    )


@dataclasses.dataclass(frozen=True)
class CounterChange:
    """One workload's count per request of one action, before and after.

    COUNTER: "SQL statements" (by default), "LDAP operations" (both judged:
    each is a round trip Keystone makes) or "cache gets" (shown, never a
    failure: a get may replace a statement). BEFORE and AFTER are what is
    judged: with CACHE_MISSES, the medians of the requests that missed the
    cache that many times (the baseline's usual state), and OVERALL the same
    counter over every request, where that differs.
    """

    action: str
    before: int
    after: int
    shapes: tuple[tuple[str, float], ...]  # (label, change per request), largest first
    judged: bool  # both sides had enough traced requests
    tolerance: int = 0
    workload: str = ""  # the token path: the workload's title; empty: pooled
    counter: str = "SQL statements"
    missing: str = ""  # why a side has no count at all (a timed workload left untraced)
    cache_misses: int | None = None  # the judged requests' cache misses each; None: all
    overall: CounterChange | None = None  # over every request, when that differs
    # requests in that state and in all, before and after: ((36, 40), (10, 40))
    shares: tuple[tuple[int, int], tuple[int, int]] | None = None

    @property
    def unknown(self) -> bool:
        """Not judged: too few traced requests, or none on a side. Never "unchanged"."""
        return not self.judged

    @property
    def key(self) -> str:
        """The workload and action: what latency verdicts are matched by."""
        return f"{self.workload}: {self.action}" if self.workload else self.action

    @property
    def delta(self) -> int:
        return self.after - self.before

    @property
    def failed(self) -> bool:
        return self.judged and self.counter in FAILING and self.delta > self.tolerance

    @property
    def rise(self) -> str:
        """``WORKLOAD: ACTION 61 -> 67 SQL statements``: what a verdict's headline names."""
        said = f"{self.key} {self.before} -> {self.after} {self.counter}"
        if self.overall is None:
            return said
        usual = f"the baseline's usual cache misses ({self.cache_misses} each)"
        return f"{said} in requests with {usual}"

    @property
    def changed(self) -> bool:
        return self.judged and abs(self.delta) > self.tolerance

    @property
    def seen_changed(self) -> bool:
        """The count changed in the judged requests or over all of them (shown, not hidden)."""
        return self.changed or (self.overall is not None and self.overall.changed)

    def sentence(self) -> str:
        """``Validate ... (GET): keystone.validate_token 61 -> 62 SQL statements per request
        (+1: SELECT ...)``; without a workload, ``keystone.validate_token: 61 -> 62 ...``.
        Judged in the baseline's usual cache state, and different over all requests: that
        count first, then the judged one and whether the rest followed cache misses."""
        subject = f"{self.workload}: {self.action}" if self.workload else f"{self.action}:"
        if self.missing:
            return f"{subject} {self.counter} per request unknown ({self.missing})"
        if self.overall is None:
            return f"{subject} {self._figures()}"
        (b_in, b_all), (a_in, a_all) = self.shares or ((0, 0), (0, 0))
        said = (
            f"{subject} {self.overall._figures()}; in requests with the baseline's usual "
            f"cache misses ({self.cache_misses} each: {b_in} of the baseline's {b_all}, "
            f"{a_in} of the candidate's {a_all}), {self.before} -> {self.after} "
            f"({self._detail()})"
        )
        if self.overall.delta > self.tolerance and not self.failed:
            said += ": the rise followed cache misses, shown, not failed"
        return said

    def _figures(self) -> str:
        """``61 -> 62 SQL statements per request (+1: SELECT ...)``."""
        head = f"{self.before} -> {self.after} {self.counter} per request"
        if not self.judged:
            return f"{head} (too few traced requests to judge)"
        return f"{head} ({self._detail()})"

    def _detail(self) -> str:
        """``unchanged``, ``+2``, or ``+1: SELECT ... FROM assignment``."""
        if not self.delta and not self.shapes:
            return "unchanged"
        if not self.shapes:
            return f"{self.delta:+d}"
        shown = self.shapes[:4]
        mixed = len({n > 0 for _, n in shown}) > 1  # some added, some gone: sign each
        listed = ", ".join(
            ("+" if n > 0 else "-") * mixed + (f"{lab} x{abs(n):g}" if abs(n) != 1 else lab)
            for lab, n in shown
        )
        more = f", {len(self.shapes) - 4} more" if len(self.shapes) > 4 else ""
        return f"{self.delta:+d}: {listed}{more}"


SQL = "SQL statements"
LDAP = "LDAP operations"
CACHE = "cache gets"
FAILING = (SQL, LDAP)


def _sql_change(b: ActionCounters, a: ActionCounters, judged: bool, **kw: Any) -> CounterChange:
    deltas: dict[str, float] = collections.defaultdict(float)
    for s in set(b.shape_counts) | set(a.shape_counts):
        diff = a.shape_counts.get(s, 0.0) - b.shape_counts.get(s, 0.0)
        if diff:
            deltas[a.labels.get(s) or b.labels.get(s) or label(s)] += diff
    shapes = tuple(
        sorted(((k, v) for k, v in deltas.items() if v), key=lambda kv: (-abs(kv[1]), kv[0]))
    )
    return CounterChange(b.action, b.sql_median, a.sql_median, shapes, judged, **kw)


def _sql_verdict(b: ActionCounters, a: ActionCounters, judged: bool, **kw: Any) -> CounterChange:
    """The SQL count judged in the baseline's usual cache state when the candidate had
    MIN_REQUESTS requests in it, else over every request.

    A side whose cache expired rebuilds what it missed in the requests that
    missed: statements no code change added. A candidate with no request in
    the baseline's usual state is judged over every request: it may have
    changed what it caches.
    """
    overall = _sql_change(b, a, judged, **kw)
    usual = b.usual_misses
    if usual is None or usual not in a.by_misses:
        return overall
    matched = _sql_change(b.by_misses[usual], a.by_misses[usual], judged, **kw)
    seen = (overall.before, overall.after, overall.shapes)
    if (matched.before, matched.after, matched.shapes) == seen:
        return overall  # the cache's state made no difference: the sentence as ever
    shares = ((b.by_misses[usual].requests, b.requests), (a.by_misses[usual].requests, a.requests))
    return dataclasses.replace(matched, cache_misses=usual, overall=overall, shares=shares)


def compare(
    before: Mapping[str, ActionCounters],
    after: Mapping[str, ActionCounters],
    tolerance: int = 0,
    workload: str = "",
) -> list[CounterChange]:
    """Each action both sides traced: its median counts before and after, what changed.

    SQL statements always (in the baseline's usual cache state where both
    sides traced their cache: _sql_verdict); LDAP operations and cache gets
    where both sides traced any. WORKLOAD names the token path the counts are of.
    """
    changes = []
    for key in sorted(set(before) & set(after)):
        b, a = before[key], after[key]
        judged = b.requests >= MIN_REQUESTS and a.requests >= MIN_REQUESTS
        changes.append(_sql_verdict(b, a, judged, tolerance=tolerance, workload=workload))
        if b.ldap_median is not None and a.ldap_median is not None:
            changes.append(
                CounterChange(b.action, b.ldap_median, a.ldap_median, (), judged,
                              workload=workload, counter=LDAP)
            )  # fmt: skip
        if b.cache_gets_median is not None and a.cache_gets_median is not None:
            changes.append(
                CounterChange(b.action, b.cache_gets_median, a.cache_gets_median, (), judged,
                              workload=workload, counter=CACHE)
            )  # fmt: skip
    return changes


def unknown(action: str, workload: str, why: str) -> CounterChange:
    """ACTION's SQL count in WORKLOAD, which a side has no traced request of: unknown, WHY."""
    return CounterChange(action, 0, 0, (), False, workload=workload, missing=why)


def finding(change: CounterChange, latency_changed: bool) -> str | None:
    """What to say of a counter change the latency verdict did not see, or None."""
    if change.changed and change.delta > 0 and not latency_changed and change.counter == SQL:
        return (
            f"finding: {change.key} does {change.delta} more SQL statement(s) per request "
            "with no latency change measured here; the cost grows with the tables and the load"
        )
    return None


def split_by_windows(
    costs: Sequence[RequestCost], windows: Sequence[tuple[float, float] | None]
) -> list[list[RequestCost]]:
    """Each window's costs: the requests that started inside it (epoch seconds, inclusive).

    A workload's window runs from its first iteration's start to its last
    one's end, so a context's setup requests (before) are never counted.
    """
    out: list[list[RequestCost]] = []
    for window in windows:
        if window is None:
            out.append([])
            continue
        low, high = window
        out.append([c for c in costs if c.started is not None and low <= c.started <= high])
    return out
