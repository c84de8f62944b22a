"""The small check client, for calls made before Rally starts: does a token come?

A local Keystone's readiness probe and a cloud's preflight ask once, with
the standard library only (no session, no retries, nothing imported that
Rally would load): the status of one token request whose body comes from
the one builder (``clients/auth.py``).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request

from rally_keystone_bench.clients.auth import UserAuth, auth_request_body
from rally_keystone_bench.clients.session import identity_v3_url


def token_status(
    auth_url: str,
    auth: UserAuth,
    scope: str | None = "project",
    *,
    include_catalog: bool = True,
    timeout: float = 30.0,
    context: ssl.SSLContext | None = None,
) -> int:
    """The HTTP status of one POST /v3/auth/tokens as AUTH (201: a token came).

    OSError or ValueError when no answer came (refused, timed out, a bad URL).
    """
    url = identity_v3_url(auth_url) + "/auth/tokens" + ("" if include_catalog else "?nocatalog")
    req = urllib.request.Request(
        url,
        data=json.dumps(auth_request_body(auth, scope=scope)).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
