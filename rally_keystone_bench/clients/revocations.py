"""Revocation events through Keystone's API: the cheapest path that makes one row.

Keystone has no API that writes a revocation event directly, and none that
deletes one: events leave only when they expire (token expiration plus
``[revoke] expiration_buffer`` after they were made). Revoking a token
(DELETE /v3/auth/tokens) writes exactly one event, by the token's audit id.
The token to revoke is issued with the *token* method from the admin's own
token: no password hashing, so two light requests per event, on every
Keystone release. (Keystone 30's DELETE /v3/users/{id}/tokens writes an
event in one request, but every token of that user then fails validation,
and older releases lack it.)
"""

from __future__ import annotations

from typing import Any

from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.clients.retry import (
    KeystoneAdminError,
    TransientError,
    call,
    is_transient_status,
)


def count_events(admin: AdminClient) -> int:
    """How many revocation events Keystone holds now (GET /v3/OS-REVOKE/events)."""
    _, body = admin.request("GET", "/OS-REVOKE/events", "list revocation events")
    return len(body.get("events") or [])


def revoke_one(admin: AdminClient) -> None:
    """Issue a token from the admin's token, then revoke it: one revocation event."""
    token = _issue_from_admin_token(admin)
    _revoke(admin, token)


def _request(admin: AdminClient, method: str, headers: dict, json: Any = None) -> Any:
    from keystoneauth1 import exceptions as ks_exc

    kwargs: dict[str, Any] = {
        "raise_exc": False,
        "connect_retries": 0,
        "log": False,
        "timeout": admin.timeout,
        "headers": headers,
    }
    if json is not None:
        kwargs["json"] = json
    try:
        return admin.session.request(admin.base_url + "/auth/tokens", method, **kwargs)
    except (ks_exc.ConnectionError, ks_exc.RetriableConnectionFailure) as exc:
        raise TransientError("connection", 0, type(exc).__name__) from None


def _issue_from_admin_token(admin: AdminClient) -> str:
    what = "issue a token to revoke"

    def attempt() -> str:
        own = admin.session.get_token()
        body = {"auth": {"identity": {"methods": ["token"], "token": {"id": own}}}}
        resp = _request(admin, "POST", {}, json=body)
        if resp.status_code == 201:
            return resp.headers["X-Subject-Token"]
        if is_transient_status(resp.status_code):
            raise TransientError(f"HTTP {resp.status_code}", resp.status_code, "")
        raise KeystoneAdminError(what, resp.status_code, "token method refused")

    return call(attempt, what, admin.stats, admin.policy)


def _revoke(admin: AdminClient, token: str) -> None:
    what = f"revoke token {token[:8]}"

    def attempt() -> None:
        resp = _request(admin, "DELETE", {"X-Subject-Token": token})
        # 404 on a retry: the first attempt did revoke it
        if resp.status_code in (204, 404):
            return
        if is_transient_status(resp.status_code):
            raise TransientError(f"HTTP {resp.status_code}", resp.status_code, "")
        raise KeystoneAdminError(what, resp.status_code, "revocation refused")

    call(attempt, what, admin.stats, admin.policy)
