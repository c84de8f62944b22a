"""A gevent HTTP client behind the keystoneauth Session interface TokenClient uses.

``TokenClient(auth_url, session=GeventSession(auth_url))`` sends the same
one request per call over geventhttpclient (a C HTTP parser, one kept-alive
connection per session) instead of keystoneauth -> requests -> urllib3.
Which stack the Locust engine uses is chosen by measurement: see
benchmarks/generator_ceiling.py and doc/source/engines.rst.

Only what TokenClient and the connection warm-up call is implemented:
``request(url, method, headers=, params=, json=, timeout=, ...)`` returning
an object with ``status_code``, ``headers``, ``content``, ``reason`` and
``json()``. Transport failures raise keystoneauth's ConnectFailure, the one
exception TokenClient turns into its own error.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from rally_keystone_bench.clients.session import Response, encode


class _Headers(dict):
    """Case-insensitive get() over the few headers TokenClient reads."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)

    def __getitem__(self, key: str) -> Any:
        return super().__getitem__(key.lower())


class GeventSession:
    """One kept-alive HTTP connection to one Keystone, for one Locust user."""

    def __init__(self, url: str, timeout: float = 60.0, insecure: bool = False) -> None:
        from geventhttpclient import HTTPClient

        parts = urllib.parse.urlsplit(url)
        self.scheme = parts.scheme
        self.netloc = parts.netloc
        self.client = HTTPClient(
            parts.hostname,
            parts.port or (443 if parts.scheme == "https" else 80),
            ssl=parts.scheme == "https",
            insecure=insecure,
            concurrency=1,
            connection_timeout=min(timeout, 10.0),
            network_timeout=timeout,
        )

    def request(
        self,
        url: str,
        method: str,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        json: Any = None,
        **_ignored: Any,
    ) -> Response:
        from keystoneauth1 import exceptions as ks_exc

        parts = urllib.parse.urlsplit(url)
        query, sent, body = encode(headers, params, json)
        uri = (parts.path or "/") + ("?" + query if query else "")
        try:
            resp = self.client.request(method, uri, body=body or b"", headers=sent)
            try:
                content = resp.read()
            finally:
                resp.release()
        except (OSError, ValueError) as exc:
            # refused, reset, timed out, a garbled answer: no answer, status 0
            raise ks_exc.ConnectFailure(f"{method} {parts.path}: {type(exc).__name__}") from None
        found = _Headers((k.lower(), v) for k, v in resp.items())
        return Response(resp.status_code, found, content, getattr(resp, "status_message", ""))

    def close(self) -> None:
        self.client.close()
