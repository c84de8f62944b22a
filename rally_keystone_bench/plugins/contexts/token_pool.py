"""token_pool: tokens issued before the load, handed out round-robin to validation scenarios.

    token = next_token(context, client)   # in a scenario, before its timer

A pooled token with less than ``min_ttl`` seconds left is replaced (issued
again with its user's credentials, outside any timer) before it is handed
out, so a long run never validates an expired token by accident. Rally runs
iterations in forked processes, each with a deep copy of the context: the
round-robin position and the replaced tokens are kept per process.

With ``reuse: TAG`` (keystone_users' reuse tag) the pool is kept with the
tag's state (plugins/contexts/reuse.py, owner-only): the next run uses again
each kept token of a user of the tag that still has ``reuse_min_ttl`` seconds
left and that Keystone still accepts (one checked per user), and issues only
the rest. A capacity search's probes so share one pool.
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
from rally_keystone_bench.plugins.contexts import _base, reuse

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
            "reuse": {
                "type": "string",
                "pattern": reuse.TAG_PATTERN,
                "description": "keystone_users' reuse tag: keep the pooled tokens with it "
                "and use them again on the next run.",
            },
            "reuse_min_ttl": {
                "type": "number",
                "minimum": 0,
                "description": "With reuse: a kept token is used again only with this many "
                "seconds left (default min_ttl; the load's length plus min_ttl keeps any kept "
                "token from being replaced during the load).",
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
        per_user = self.config["tokens_per_user"]
        tag_users, kept = self._kept(users, workers)
        pool = SharedTokens((u["id"], _padded(kept.get(u["id"], []), per_user)) for u in users)
        jobs = [(u, i) for u in users for i, t in enumerate(pool[u["id"]]) if t is None]

        def issue(job: tuple[dict, int]) -> tuple[str, int, tk.Token]:
            user, index = job
            return user["id"], index, _issue(client, user, scope, stats)

        watch = _admin.AbortWatch(_base.task_uuid(self.context))
        results, errors, aborted = _admin.run_parallel(issue, jobs, workers, watch)
        for user_id, index, token in results:
            pool[user_id][index] = token
        tag = self.config.get("reuse")
        if tag:  # what was issued is kept, even when the setup fails
            reuse.save_tokens(tokens_to_keep(tag, _auth_url(users), pool, users, tag_users, scope))
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
        reused = sum(len(v) for v in kept.values())
        how = f" ({len(results)} issued, {reused} kept by reuse tag {tag})" if tag else ""
        LOG.info(
            f"token_pool: {len(results) + reused} {scope}-scoped tokens for {len(users)} "
            f"users{how}, min_ttl {self.config['min_ttl']} s"
        )

    def _kept(self, users: list[dict], workers: int) -> tuple[set[str], dict[str, list[tk.Token]]]:
        """With reuse: the tag's user ids, and the kept tokens fit to use again, by user id."""
        tag = self.config.get("reuse")
        if not tag:
            return set(), {}
        config = self.context.get("config") or {}
        users_cfg = config.get("keystone_users") or config.get(_base.USERS) or {}
        if users_cfg.get("reuse") != tag:
            raise exceptions.ContextSetupFailure(
                ctx_name=self.get_name(),
                msg=f"reuse: {tag} keeps the tokens of keystone_users' reuse tag's users: "
                f"give keystone_users reuse: {tag} too",
            )
        auth_url = _auth_url(users)
        tag_users = set(reuse.load_state(tag, auth_url)["users"])
        min_left = self.config.get("reuse_min_ttl", self.config["min_ttl"])
        kept = kept_tokens(
            reuse.load_tokens(tag, auth_url),
            users,
            tag_users,
            self.config["scope"],
            self.config["tokens_per_user"],
            min_left,
        )
        return tag_users, _still_accepted(kept, users[0]["credential"], workers)

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

        if self.config.get("reuse"):  # revoked: none is fit to use again
            reuse.save_tokens(
                {"tag": self.config["reuse"], "auth_url": _auth_url(users), "users": {}}
            )
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


def _auth_url(users: list[dict]) -> str:
    return users[0]["credential"]["auth_url"]


def _padded(tokens: list[tk.Token], size: int) -> list[tk.Token | None]:
    """TOKENS, then None for each one still to issue, SIZE in all."""
    return [*tokens[:size], *[None] * (size - len(tokens[:size]))]


def kept_tokens(
    stored: dict[str, Any],
    users: list[dict],
    tag_users: set[str],
    scope: str,
    per_user: int,
    min_left: float,
    now: float | None = None,
) -> dict[str, list[tk.Token]]:
    """The STORED tokens fit to use again, by user id, at most PER_USER each.

    Only for a user of this run whose id is one of the tag's (TAG_USERS),
    of the same SCOPE and project, and only tokens with at least MIN_LEFT
    seconds left (an unknown expiry is not kept).
    """
    run_users = {u["id"]: u for u in users}
    fit: dict[str, list[tk.Token]] = {}
    for user_id, entry in (stored.get("users") or {}).items():
        user = run_users.get(user_id)
        if user is None or user_id not in tag_users or not isinstance(entry, dict):
            continue
        if entry.get("scope") != scope or entry.get("project_id") != user.get("tenant_id"):
            continue
        tokens = []
        for raw in entry.get("tokens") or []:
            if not isinstance(raw, dict) or not raw.get("value"):
                continue
            token = tk.Token(str(raw["value"]), raw.get("expires_at"))
            try:
                left = token.seconds_left(now)
            except ValueError:  # an expiry that does not parse
                left = None
            if left is not None and left >= min_left:
                tokens.append(token)
        if tokens:
            fit[user_id] = tokens[:per_user]
    return fit


def tokens_to_keep(
    tag: str,
    auth_url: str,
    pool: dict[str, list],
    users: list[dict],
    tag_users: set[str],
    scope: str,
) -> dict[str, Any]:
    """What reuse.save_tokens keeps of POOL: the tokens of the tag's users."""
    kept: dict[str, Any] = {}
    for user in users:
        if user["id"] not in tag_users:
            continue
        tokens = [t for t in pool.get(user["id"], []) if t is not None]
        kept[user["id"]] = {
            "scope": scope,
            "project_id": user.get("tenant_id"),
            "tokens": [{"value": t.value, "expires_at": t.expires_at} for t in tokens],
        }
    return {"tag": tag, "auth_url": auth_url, "users": kept}


def _still_accepted(
    kept: dict[str, list[tk.Token]], credential: Any, workers: int
) -> dict[str, list[tk.Token]]:
    """KEPT without the users whose first kept token Keystone no longer accepts.

    One HEAD /v3/auth/tokens per user, the token checking itself (no admin,
    no bcrypt): a Keystone started again with new Fernet keys, or a user's
    tokens revoked (a password reset), fails it and the user's tokens are
    issued again.
    """
    if not kept:
        return {}
    local = threading.local()

    def check(user_id: str) -> str:
        if not hasattr(local, "client"):
            local.client = _client(credential, 1)
        token = kept[user_id][0]
        local.client.use_auth_token(token)
        local.client.check(token)
        return user_id

    accepted, refused, _ = _admin.run_parallel(check, list(kept), workers, fail_fast=False)
    if refused:
        LOG.info(
            f"token_pool: the kept tokens of {len(refused)} users are not accepted any "
            f"more ({_base.describe_errors(refused)}); issued again"
        )
    return {user_id: kept[user_id] for user_id in accepted}


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
