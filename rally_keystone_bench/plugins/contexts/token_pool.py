"""token_pool: tokens issued before the load, handed out round-robin to validation scenarios.

    token = next_token(context, client)   # in a scenario, before its timer

A pooled token with less than ``min_ttl`` seconds left is replaced (issued
again with its user's credentials, outside any timer) before it is handed
out, so a long run never validates an expired token by accident. Rally runs
iterations in forked processes, each with a deep copy of the context: the
round-robin position and the replaced tokens are kept per process.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from rally import consts, exceptions
from rally.common import logging
from rally.task import context

from rally_keystone_bench.clients import admin as _admin
from rally_keystone_bench.clients import auth as client_auth
from rally_keystone_bench.clients import pool as client_pool
from rally_keystone_bench.clients import tokens as tk
from rally_keystone_bench.clients.retry import (
    KeystoneAdminError,
    RetryStats,
    TransientError,
    call,
    is_transient_status,
)
from rally_keystone_bench.plugins.contexts import _base

LOG = logging.getLogger(__name__)


# Per process: the next index for each user, and tokens issued again here.
class SharedTokens(dict):
    """user id -> that user's pooled tokens, shared by the iterations of a process.

    Rally deep-copies the context before every iteration; in a one-off
    measurement, copying a pool of 32 tokens took 175 us of the load
    generator's CPU per iteration, more than the rest of the context.
    Nothing changes the pool during the load (a token replaced near expiry
    goes to ``_replaced``), so each iteration gets the pool itself.
    """

    def __deepcopy__(self, memo: dict) -> SharedTokens:
        return self


_next: collections.Counter = collections.Counter()
_replaced: dict[tuple[str, int], tk.Token] = {}
_lock = threading.Lock()


@context.configure(name="token_pool", platform="openstack", order=115)
class TokenPool(context.Context):
    """Issues `tokens_per_user` tokens for every user before the load starts."""

    CONFIG_SCHEMA = {
        "type": "object",
        "$schema": consts.JSON_SCHEMA,
        "properties": {
            "tokens_per_user": {
                "type": "integer",
                "minimum": 1,
                "description": "Tokens issued for each user (default 1).",
            },
            "scope": {
                "enum": list(client_auth.SCOPES),
                "description": "Scope of the tokens (default project: the user's project).",
            },
            "min_ttl": {
                "type": "number",
                "minimum": 0,
                "description": "A token with fewer seconds left is replaced before use "
                "(default 60).",
            },
            "revoke_at_cleanup": {
                "type": "boolean",
                "description": "Revoke the pooled tokens at cleanup (default false).",
            },
            "resource_management_workers": _base.WORKERS_SCHEMA,
        },
        "additionalProperties": False,
    }

    DEFAULT_CONFIG = {
        "tokens_per_user": 1,
        "scope": "project",
        "min_ttl": 60,
        "revoke_at_cleanup": False,
        "resource_management_workers": _admin.DEFAULT_WORKERS,
    }

    def setup(self) -> None:
        users = self.context.get("users") or []
        if not users:
            raise exceptions.ContextSetupFailure(
                ctx_name=self.get_name(),
                msg="no users to issue tokens for: add keystone_users (or the users context)",
            )
        stats = RetryStats()
        workers = self.config["resource_management_workers"]
        client = _client(users[0]["credential"], workers)
        scope = self.config["scope"]
        jobs = [(u, i) for u in users for i in range(self.config["tokens_per_user"])]

        def issue(job: tuple[dict, int]) -> tuple[str, int, tk.Token]:
            user, index = job
            return user["id"], index, _issue(client, user, scope, stats)

        watch = _admin.AbortWatch(_base.task_uuid(self.context))
        results, errors, aborted = _admin.run_parallel(issue, jobs, workers, watch)
        pool = SharedTokens((u["id"], [None] * self.config["tokens_per_user"]) for u in users)
        for user_id, index, token in results:
            pool[user_id][index] = token
        auth_tokens = SharedTokens()
        if not errors and not aborted:
            auth_tokens = _validator_tokens(self.context, users, workers, stats, watch)
        self.context["token_pool"] = {
            "scope": scope,
            "min_ttl": float(self.config["min_ttl"]),
            "tokens": pool,
            # the validators' X-Auth-Tokens (KeystoneTokens.validate, lifecycle)
            "auth_tokens": auth_tokens,
        }
        bench = self.context.setdefault("keystone_bench", {"retries": {}})
        bench.setdefault("retries", {})[self.get_name()] = {"setup": stats.total}
        (LOG.warning if stats.total else LOG.info)(f"token_pool setup: {stats.describe()}")
        if errors:
            raise exceptions.ContextSetupFailure(
                ctx_name=self.get_name(), msg=_base.describe_errors(errors)
            )
        if aborted:
            raise exceptions.ContextSetupFailure(
                ctx_name=self.get_name(), msg="task aborted during setup"
            )
        LOG.info(
            f"token_pool: {len(results)} {scope}-scoped tokens for {len(users)} users, "
            f"min_ttl {self.config['min_ttl']} s"
        )

    def cleanup(self) -> None:
        pool = self.context.get("token_pool")
        if not pool or not self.config["revoke_at_cleanup"]:
            return
        tokens = [t for ts in pool["tokens"].values() for t in ts if t is not None]
        users = self.context.get("users") or []
        if not tokens or not users:
            return
        base_url = users[0]["credential"]["auth_url"]
        local = threading.local()

        def revoke(token: tk.Token) -> int:
            # A user may revoke its own token: no admin needed.
            if not hasattr(local, "client"):
                local.client = tk.TokenClient(base_url, timeout=_admin.DEFAULT_TIMEOUT)
            local.client.use_auth_token(token)
            return local.client.revoke(token).status

        done, errors, _ = _admin.run_parallel(
            revoke, tokens, self.config["resource_management_workers"], fail_fast=False
        )
        gone = [e for e in errors if isinstance(e, tk.TokenRequestError) and e.status == 404]
        errors = [e for e in errors if e not in gone]
        LOG.info(f"token_pool: revoked {len(done)} tokens ({len(gone)} already gone)")
        if errors:
            raise exceptions.RallyException(
                f"token_pool cleanup: {len(errors)} tokens not revoked: "
                f"{_base.describe_errors(errors)}"
            )


def _client(credential: Any, workers: int) -> tk.TokenClient:
    verify: bool | str = not credential.get("https_insecure", False)
    if verify and credential.get("https_cacert"):
        verify = credential["https_cacert"]
    return tk.TokenClient(
        credential["auth_url"], verify=verify, pool_size=workers, timeout=_admin.DEFAULT_TIMEOUT
    )


def _validator_tokens(
    context: dict, users: list[dict], workers: int, stats: RetryStats, watch: Any
) -> SharedTokens:
    """The validators' X-Auth-Tokens, issued now so that no iteration issues one.

    One for the admin when there is one, else one per user (each validates
    its own tokens): keyed as clients.pool.auth_token_key names them.
    """
    seen: dict[str, tuple[Any, client_auth.UserAuth, str]] = {}
    for user in users:
        credential, auth, scope = client_pool.validator_auth(context, user)
        key = client_pool.auth_token_key(credential, auth, scope)
        seen.setdefault(key, (credential, auth, scope))
    client = _client(next(iter(seen.values()))[0], workers)

    def issue(key: str) -> tuple[str, tk.Token]:
        credential, auth, scope = seen[key]
        what = f"issue the validator's {scope}-scoped token for {credential['username']}"
        return key, _issue_auth(client, auth, scope, stats, what)

    results, errors, aborted = _admin.run_parallel(issue, list(seen), workers, watch)
    if errors:
        raise exceptions.ContextSetupFailure(
            ctx_name=TokenPool.get_name(), msg=_base.describe_errors(errors)
        )
    if aborted:
        raise exceptions.ContextSetupFailure(
            ctx_name=TokenPool.get_name(), msg="task aborted during setup"
        )
    LOG.info(f"token_pool: {len(results)} validator tokens, issued before the load")
    return SharedTokens(results)


def _user_auth(user: dict) -> client_auth.UserAuth:
    auth = client_auth.UserAuth.from_credential(user["credential"])
    if user.get("tenant_id"):
        auth = dataclasses.replace(auth, project_id=user["tenant_id"])
    return auth


def _issue(client: tk.TokenClient, user: dict, scope: str, stats: RetryStats) -> tk.Token:
    """One token for USER, retrying transient failures; KeystoneAdminError otherwise."""
    what = f"issue a {scope}-scoped token for user {user['credential']['username']}"
    return _issue_auth(client, _user_auth(user), scope, stats, what)


def _issue_auth(
    client: tk.TokenClient, auth: client_auth.UserAuth, scope: str, stats: RetryStats, what: str
) -> tk.Token:
    def attempt() -> tk.Token:
        try:
            result = client.issue(auth, "password", scope, include_catalog=False)
        except tk.TokenRequestError as exc:
            if exc.status == 0:
                raise TransientError("connection", 0, exc.message) from None
            if is_transient_status(exc.status):
                raise TransientError(f"HTTP {exc.status}", exc.status, exc.message) from None
            raise KeystoneAdminError(what, exc.status, exc.message) from None
        if result.token is None:
            raise KeystoneAdminError(what, result.status, "no X-Subject-Token in the answer")
        return result.token

    return call(attempt, what, stats)


def next_token(context: dict, client: tk.TokenClient | Callable[[], tk.TokenClient]) -> str:
    """The next pooled token for this iteration's user, replaced first when near expiry.

    Call it before the scenario's timer: a replacement is one more token
    request, sent with CLIENT and timed by nothing. CLIENT may be a function
    that returns the client, called only when a token is replaced.
    """
    pool = context.get("token_pool")
    if not pool:
        raise ValueError("no token_pool in the context: add the token_pool context")
    user = context.get("user")
    with _lock:
        if user is not None:
            user_id = user["id"]
            tokens = pool["tokens"][user_id]
            index = _next[user_id] % len(tokens)
            _next[user_id] += 1
        else:
            # No per-iteration user: walk every pooled token in turn.
            flat = [
                (uid, i) for uid in sorted(pool["tokens"]) for i in range(len(pool["tokens"][uid]))
            ]
            user_id, index = flat[_next[None] % len(flat)]
            _next[None] += 1
        token = _replaced.get((user_id, index)) or pool["tokens"][user_id][index]
    left = token.seconds_left() if token is not None else None
    if token is None or (left is not None and left < pool["min_ttl"]):
        owner = user if user is not None else _find_user(context, user_id)
        if callable(client):
            client = client()
        token = _issue(client, owner, pool["scope"], RetryStats())
        with _lock:
            _replaced[(user_id, index)] = token
    return token.value


def replaced_count() -> int:
    """Tokens this process issued again because they were close to expiry."""
    return len(_replaced)


def _find_user(context: dict, user_id: str) -> dict:
    for u in context.get("users") or []:
        if u["id"] == user_id:
            return u
    raise ValueError(f"user {user_id} of the token pool is not in the context")
