"""OSprofiler's signed trace headers, built as ``osprofiler.web`` builds them.

Keystone's profiler middleware traces a request whose ``X-Trace-Info`` (a
URL-safe base64 JSON of ``base_id`` and ``parent_id``) is signed, in
``X-Trace-HMAC``, with HMAC-SHA1 under one of its ``[profiler] hmac_keys``.
This is that signature, without osprofiler on the load side.

A TokenClient signs a sample of its *timed* requests (those sent with a
timer: each one an atomic action) when the environment names the run's key
file (``KEYSTONE_BENCH_TRACE_KEY_FILE``, set by the deployment that
owns the key); ``KEYSTONE_BENCH_TRACE_RATE`` is the fraction traced (default
1: every timed request). The sample is spread evenly: with rate 0.25, every
fourth timed request of a client, counted per request kind (the HTTP verb): a client
that alternates issue and validate gets every fourth of each traced, not
every second issue and no validation.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import os
import threading
import uuid
from collections.abc import Mapping

KEY_FILE_ENV = "KEYSTONE_BENCH_TRACE_KEY_FILE"
RATE_ENV = "KEYSTONE_BENCH_TRACE_RATE"
X_TRACE_INFO = "X-Trace-Info"
X_TRACE_HMAC = "X-Trace-HMAC"


def signed_headers(key: str, base_id: str | None = None) -> dict[str, str]:
    """The two headers that make Keystone trace one request under BASE_ID (a new uuid)."""
    base_id = base_id or str(uuid.uuid4())
    data = json.dumps({"base_id": base_id, "parent_id": base_id})
    packed = base64.urlsafe_b64encode(data.encode())
    signature = hmac.new(key.encode(), packed, hashlib.sha1).hexdigest()
    return {X_TRACE_INFO: packed.decode(), X_TRACE_HMAC: signature}


class Sampler:
    """Signs RATE of the requests it is asked about, evenly spread; thread-safe."""

    def __init__(self, key: str, rate: float = 1.0) -> None:
        if not key:
            raise ValueError("the trace key is empty")
        if not (math.isfinite(rate) and 0.0 <= rate <= 1.0):
            raise ValueError(f"the trace rate must be 0-1, not {rate!r}")
        self._key = key
        self.rate = rate
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key
        return f"<Sampler rate={self.rate:g}>"

    def headers(self, kind: str = "") -> dict[str, str]:
        """Signed headers for a sampled request of KIND, else an empty dict."""
        with self._lock:
            seen = self._seen.get(kind, 0)
            before = math.floor(seen * self.rate + 1e-9)
            self._seen[kind] = seen + 1
            after = math.floor((seen + 1) * self.rate + 1e-9)
        return signed_headers(self._key) if after > before else {}


def from_environment(environ: Mapping[str, str] | None = None) -> Sampler | None:
    """The Sampler the environment asks for, or None (tracing off, or no readable key)."""
    environ = os.environ if environ is None else environ
    path = environ.get(KEY_FILE_ENV)
    if not path:
        return None
    try:
        key = open(path).read().strip()
        rate = float(environ.get(RATE_ENV) or 1.0)
        return Sampler(key, rate)
    except (OSError, ValueError):
        return None
