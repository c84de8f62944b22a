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

from collections.abc import Callable

from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.clients.auth import UserAuth
from rally_keystone_bench.clients.tokens import TokenClient, TokenRequestError


def count_events(admin: AdminClient) -> int:
    """How many revocation events Keystone holds now (GET /v3/OS-REVOKE/events)."""
    _, body = admin.request("GET", "/OS-REVOKE/events", "list revocation events")
    return len(body.get("events") or [])


def revoke_one(admin: AdminClient) -> None:
    """Issue a token from the admin's token, then revoke it: one revocation event."""
    token = admin.token_call("issue a token to revoke", _issue_from_admin_token(admin))
    admin.token_call(f"revoke token {token[:8]}", _revoke(admin, token))


def _issue_from_admin_token(admin: AdminClient) -> Callable[[TokenClient], str]:
    def issue(tokens: TokenClient) -> str:
        own = admin.session.get_token()
        # the token method, no scope: no password hashing on Keystone's side
        issued = tokens.issue(UserAuth(), "token", None, include_catalog=False, token=own)
        assert issued.token is not None
        return issued.token.value

    return issue


def _revoke(admin: AdminClient, token: str) -> Callable[[TokenClient], None]:
    def revoke(tokens: TokenClient) -> None:
        tokens.use_auth_token(admin.session.get_token())
        try:
            tokens.revoke(token)
        except TokenRequestError as exc:
            if exc.status != 404:  # 404 on a retry: the first attempt did revoke it
                raise

    return revoke
