"""The TokenClients a process keeps across Rally iterations, and what they hold.

Rally builds a new scenario object for every iteration; the clients, their
sessions and their kept-alive connections outlive them here, per process
(and per runner thread where asked). ``clear()`` forgets all of it (tests,
a process that forks).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from rally_keystone_bench.clients.auth import UserAuth
from rally_keystone_bench.clients.credentials import verify_of
from rally_keystone_bench.clients.tokens import Token, TokenClient

POOL_SIZE = 64

_CLIENTS: dict[tuple, TokenClient] = {}
_IDLE: dict[tuple, list[TokenClient]] = {}
_SOURCE_TOKENS: dict[tuple, Token] = {}
_APP_CREDENTIALS: dict[tuple, UserAuth] = {}
_AUTH_TOKENS: dict[str, Token] = {}
_LOCK = threading.Lock()
_AUTH_LOCK = threading.Lock()  # held while a validator token is issued: one at a time


def clear() -> None:
    """Forget every client, token and application credential this process keeps."""
    with _LOCK:
        for held in (_CLIENTS, _IDLE, _SOURCE_TOKENS, _APP_CREDENTIALS, _AUTH_TOKENS):
            held.clear()


def shared_client(
    credential: Any,
    *,
    fresh_connection: bool = False,
    purpose: str = "issue",
    per_thread: bool = True,
    pool_size: int = POOL_SIZE,
) -> TokenClient:
    """The TokenClient this process (and runner thread) keeps for a credential.

    Rally builds a new scenario object for every iteration; the client, its
    session and its kept-alive connections outlive them here.
    """
    key = (
        os.getpid(),
        threading.get_ident() if per_thread else None,
        credential["auth_url"],
        str(verify_of(credential)),
        fresh_connection,
        purpose,
        pool_size,
    )
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = TokenClient(
                credential["auth_url"],
                verify=verify_of(credential),
                fresh_connection=fresh_connection,
                pool_size=pool_size,
            )
            _CLIENTS[key] = client
    return client


def lease_client(
    credential: Any, *, fresh_connection: bool = False, purpose: str = "issue"
) -> TokenClient:
    """An idle TokenClient of this process for a credential, or a new one.

    The caller has it to itself until ``give_back``: it may hold an
    X-Auth-Token, and a fresh-connection client closes its connections.
    """
    key = _lease_key(credential, fresh_connection, purpose)
    with _LOCK:
        idle = _IDLE.setdefault(key, [])
        if idle:
            return idle.pop()  # the last given back: its connection is the warmest
    return TokenClient(
        credential["auth_url"],
        verify=verify_of(credential),
        fresh_connection=fresh_connection,
        pool_size=1,
    )


def give_back(credential: Any, client: TokenClient, *, purpose: str = "issue") -> None:
    key = _lease_key(credential, client.fresh_connection, purpose)
    with _LOCK:
        _IDLE.setdefault(key, []).append(client)


def _lease_key(credential: Any, fresh_connection: bool, purpose: str) -> tuple:
    return (
        os.getpid(),
        credential["auth_url"],
        str(verify_of(credential)),
        fresh_connection,
        purpose,
    )


def open_connections(client: TokenClient, count: int) -> None:
    """Open ``count`` kept-alive connections at once, outside any timer.

    Each sends one GET of the Identity v3 version document (not a token
    request); the connections then wait in the client's pool.
    """
    if client.fresh_connection or getattr(client, "_warm", 0) >= count:
        return
    barrier = threading.Barrier(count)

    def get() -> None:
        barrier.wait()
        client.session.request(
            client.base_url,
            "GET",
            authenticated=False,
            raise_exc=False,
            log=False,
            headers={"Accept": "application/json"},
        )

    threads = [threading.Thread(target=get) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client._warm = count  # type: ignore[attr-defined]


def source_token(client: TokenClient, auth: UserAuth, min_ttl: float) -> Token:
    """An unscoped token of AUTH's user, kept per process until fewer than MIN_TTL s are left."""
    key = (os.getpid(), auth.key())
    with _AUTH_LOCK:  # concurrent first iterations: one issues, the others wait for it
        token = _SOURCE_TOKENS.get(key)
        left = token.seconds_left() if token else None
        if token is None or (left is not None and left < min_ttl):
            result = client.issue(auth, "password", "unscoped", include_catalog=False)
            token = result.token
            assert token is not None
            _SOURCE_TOKENS[key] = token
        return token


def application_credential(client: TokenClient, auth: UserAuth) -> UserAuth:
    """An application credential of AUTH's user, created once per process.

    It expires by itself two hours later; users that a context creates are
    deleted with their application credentials.
    """
    key = (os.getpid(), auth.key())
    with _LOCK:
        found = _APP_CREDENTIALS.get(key)
        if found is None:
            found = client.create_application_credential(auth, lifetime_s=7200)
            _APP_CREDENTIALS[key] = found
        return found


def validator_auth(context: dict, user: dict | None = None) -> tuple[Any, UserAuth, str]:
    """Whose X-Auth-Token validates the users' tokens: (credential, auth, scope).

    The admin's when the context has an admin, else the user's own (USER, or
    the iteration's): Keystone lets a user validate its own tokens.
    """
    credential = (context.get("admin") or {}).get("credential")
    if not credential:
        credential = (user or context["user"])["credential"]
    auth = UserAuth.from_credential(credential)
    scope = "project" if auth.project_name or auth.project_id else "system"
    return credential, auth, scope


def auth_token_key(credential: Any, auth: UserAuth, scope: str) -> str:
    """A string naming a validator token, kept in the (copied) Rally context."""
    return repr((credential["auth_url"], auth.key(), scope))


def auth_token(
    credential: Any,
    auth: UserAuth,
    scope: str,
    min_ttl: float,
    issue: Callable[[], Token],
    preset: Token | None = None,
) -> Token:
    """The validator token every client of this process shares.

    PRESET (the one the token_pool context issued before the load) is taken
    first; ISSUE() is called only when neither it nor the token this process
    holds has more than MIN_TTL seconds left, by one thread while the others
    wait for its token. A new client then costs Keystone no token issue.
    """
    key = auth_token_key(credential, auth, scope)
    with _AUTH_LOCK:
        token = _AUTH_TOKENS.get(key) or preset
        left = token.seconds_left() if token is not None else None
        if token is None or (left is not None and left <= min_ttl):
            token = issue()
        _AUTH_TOKENS[key] = token
        return token
