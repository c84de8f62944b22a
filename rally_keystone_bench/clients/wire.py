"""What a token request puts on the wire: one builder for every session.

Both engines send their token requests through TokenClient, over one of
three sessions: the DirectSession (urllib3: Rally's scenarios, the Locust
engine's ``--ks-http keystoneauth``), the Locust engine's GeventSession
(geventhttpclient), or keystoneauth's own session (through a proxy). The
first two take their query string, headers and body from :func:`encode`,
and each writes a request's head and body in one ``send``: Keystone then
receives the same bytes in one segment from either engine (see
doc/source/engines.rst, "The same request from both engines").

What the HTTP libraries would otherwise add on their own differs:
http.client (under urllib3) sends ``Accept-Encoding: identity`` and
geventhttpclient sends nothing, so it is given here, for both.
"""

from __future__ import annotations

import functools
import json as jsonlib
import urllib.parse
from collections.abc import Mapping
from typing import Any

# http.client's limit for joining a body to the head (http.client._MAXLINE)
_JOIN_LIMIT = 65536


@functools.cache
def user_agent() -> str:
    """What our requests say they are: this tool, then keystoneauth's own default.

    Given to the session once: keystoneauth otherwise builds the header
    again for every request. Keystone's access log shows it.
    """
    from keystoneauth1 import session as ks_session

    return f"rally-keystone-bench {ks_session.DEFAULT_USER_AGENT}"


def encode(
    headers: Mapping[str, str] | None, params: Mapping[str, str] | None, json: Any
) -> tuple[str, dict[str, str], bytes | None]:
    """A token request's query string, headers and body, as our sessions send them.

    The keystoneauth arguments TokenClient passes (``headers=``, ``params=``,
    ``json=``): our User-Agent, ``Accept-Encoding: identity`` (what
    http.client adds by itself, and geventhttpclient does not), the query
    urlencoded, a JSON body with its Content-Type. The HTTP library adds
    only Host and Content-Length, the same from either.
    """
    sent = {"User-Agent": user_agent(), "Accept-Encoding": "identity", **(headers or {})}
    query = urllib.parse.urlencode(params) if params else ""
    body = None
    if json is not None:
        body = jsonlib.dumps(json).encode()
        sent.setdefault("Content-Type", "application/json")
    return query, sent, body


class OneWrite:
    """A urllib3 connection mixin: the request's head and a small body in one send.

    urllib3 2 writes the head, then the body, in two sends (two TCP
    segments, TCP_NODELAY); geventhttpclient writes both at once. Joined
    here, so that Keystone receives a request from either engine the same
    way (Python 3.11's http.client does not join them either).
    """

    _kb_body: bytes | None = None
    _kb_joined: bytes | None = None

    def request(self, method: str, url: str, body: Any = None, headers: Any = None, **kw: Any):
        framed = kw.get("chunked") or "transfer-encoding" in {k.lower() for k in headers or {}}
        small = isinstance(body, bytes) and 0 < len(body) < _JOIN_LIMIT and not framed
        self._kb_body = body if small else None
        try:
            return super().request(method, url, body=body, headers=headers, **kw)  # type: ignore[misc]
        finally:
            self._kb_body = self._kb_joined = None

    def send(self, data: Any) -> None:
        body = self._kb_body
        if body is None or not isinstance(data, bytes):
            super().send(data)  # type: ignore[misc]
        elif self._kb_joined is None and data is not body:  # the head: with the body
            self._kb_joined = body
            super().send(data + body)  # type: ignore[misc]
        elif data is not self._kb_joined:  # not the body sent already
            super().send(data)  # type: ignore[misc]


@functools.cache
def pool_classes() -> dict[str, type]:
    """urllib3 pool classes whose connections write a request in one send."""
    import urllib3
    from urllib3 import connection, connectionpool

    class HTTPConnection(OneWrite, connection.HTTPConnection):
        pass

    class HTTPSConnection(OneWrite, connection.HTTPSConnection):
        pass

    class HTTPPool(urllib3.HTTPConnectionPool):
        ConnectionCls = HTTPConnection

    class HTTPSPool(connectionpool.HTTPSConnectionPool):
        ConnectionCls = HTTPSConnection

    return {"http": HTTPPool, "https": HTTPSPool}
