"""Retries of transient Keystone failures, with capped exponential backoff.

Transient: HTTP 5xx (SQLite's "database is locked" arrives as a 500), 409
from concurrent writes, and connections that were refused, reset or timed
out (a Keystone being restarted). Anything else is permanent and is raised
at once. Every retry is counted, so that the contexts can report them.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

# What a retry is for, as counted: "HTTP 500", "HTTP 409", "connection".
Cause = str


class KeystoneAdminError(Exception):
    """A Keystone admin request failed for good.

    ``what`` names the resource ("create user rkb-1a2b-p00-u0003"), ``status``
    is the HTTP status (0 when no answer came), ``attempts`` how many requests
    were sent. The message never holds a password or a token.
    """

    def __init__(self, what: str, status: int, message: str, attempts: int = 1) -> None:
        self.what = what
        self.status = status
        self.message = message
        self.attempts = attempts
        answer = f"HTTP {status}" if status else "no answer"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        super().__init__(f"{what}: {answer}{tries}: {message}")


class TransientError(Exception):
    """Raised by an attempt that may succeed when tried again."""

    def __init__(self, cause: Cause, status: int, message: str) -> None:
        super().__init__(message)
        self.cause = cause
        self.status = status
        self.message = message


def is_transient_status(status: int) -> bool:
    """5xx (except 501 Not Implemented) and 409 are worth another try."""
    return status == 409 or (500 <= status < 600 and status != 501)


@dataclass
class RetryPolicy:
    """How often and how long to retry: delay = base * 2**n, capped, with jitter."""

    max_retries: int = 8
    base_delay: float = 0.1
    max_delay: float = 4.0
    # Give up on a resource only when both the retries and this many seconds
    # are spent: a Keystone restart takes several seconds.
    min_patience: float = 30.0

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number RETRY (0-based), with full jitter."""
        ceiling = min(self.max_delay, self.base_delay * (2**retry))
        return ceiling * (0.5 + random.random() / 2)


@dataclass
class RetryStats:
    """Thread-safe count of retries, by cause."""

    causes: Counter = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, cause: Cause) -> None:
        with self._lock:
            self.causes[cause] += 1

    @property
    def total(self) -> int:
        return sum(self.causes.values())

    def describe(self) -> str:
        """'3 retries (HTTP 500: 2, connection: 1)' or '0 retries'."""
        if not self.total:
            return "0 retries"
        parts = ", ".join(f"{k}: {v}" for k, v in sorted(self.causes.items()))
        return f"{self.total} retries ({parts})"


def call(
    attempt: Callable[[], object],
    what: str,
    stats: RetryStats,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
):
    """Run ATTEMPT until it returns, retrying while it raises TransientError.

    Raises KeystoneAdminError naming WHAT when retries are exhausted.
    """
    policy = policy or RetryPolicy()
    started = clock()
    retry = 0
    while True:
        try:
            return attempt()
        except TransientError as exc:
            out_of_retries = retry >= policy.max_retries
            out_of_time = clock() - started >= policy.min_patience
            if out_of_retries and out_of_time:
                raise KeystoneAdminError(
                    what, exc.status, f"still failing, gave up: {exc.message}", retry + 1
                ) from None
            stats.add(exc.cause)
            sleep(policy.delay(min(retry, 16)))
            retry += 1
