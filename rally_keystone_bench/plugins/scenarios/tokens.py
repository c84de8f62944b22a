"""KeystoneTokens.* scenarios: each atomic action times one token request.

Sessions, admin authentication, the tokens to validate and the connections
themselves are all prepared before a timer starts. Clients live per process,
across iterations, so connections stay alive as they do in a real service:
an iteration leases one idle client (or makes one when all are busy) and
gives it back when it ends. Rally's rps runner starts a thread per iteration;
the lease keeps it from paying a new client, connection and admin token each
time (the pool grows to the process's concurrency, no further).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from typing import Any

from rally.common.plugin import plugin
from rally.task import atomic, context, validation
from rally_openstack.task import scenario

from rally_keystone_bench.clients import pool
from rally_keystone_bench.clients.auth import METHODS, SCOPES, UserAuth
from rally_keystone_bench.clients.tokens import Token, TokenClient, TokenRequestError, shorten
from rally_keystone_bench.plugins.contexts.default_users import DEFAULT_USERS, STOCK_USERS

ISSUE = "keystone.issue_token"
VALIDATE = "keystone.validate_token"
CHECK = "keystone.check_token"
REVOKE = "keystone.revoke_token"
BURST = "keystone.token_burst"

# A token kept across iterations (the admin's X-Auth-Token, the token that
# method "token" rescopes) is replaced when fewer seconds than this are left.
MIN_TTL = 600.0


class _RecordedAction:
    """Times one request the way atomic.ActionTimer does, without its list.

    ActionTimer looks for its parent in the scenario's shared list, which is
    not safe from several threads; a burst records its requests here and
    nests them under one parent afterwards.
    """

    def __init__(self, name: str) -> None:
        self.action: dict[str, Any] = {"name": name, "children": [], "started_at": None}

    def __enter__(self) -> _RecordedAction:
        self.action["started_at"] = time.time()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.action["finished_at"] = time.time()
        if exc_type is not None:
            self.action["failed"] = True


@context.add_default_context(DEFAULT_USERS, {})
@plugin.default_meta(inherit=True)  # a copy of OpenStackScenario's: the stock users go below
class _TokenScenario(scenario.OpenStackScenario):
    """What the KeystoneTokens scenarios share: users, clients, timers.

    Their default context is keystone_bench_default_users, not the stock
    users context every OpenStack scenario has: the stock one where a
    workload names no users context, nothing beside keystone_users
    (plugins/contexts/default_users.py).

    ``run`` wraps its body in ``with self._leases():``; the clients that
    ``_issuer`` and ``_validator`` lease go back to the process's pool when
    the iteration ends, failed or not.
    """

    @contextlib.contextmanager
    def _leases(self) -> Any:
        self._leased: dict[tuple, tuple[Any, TokenClient]] = {}
        try:
            yield
        finally:
            for (purpose, _), (credential, client) in self._leased.items():
                pool.give_back(credential, client, purpose=purpose)
            self._leased = {}

    def _lease(self, credential: Any, purpose: str, fresh_connection: bool) -> TokenClient:
        leased = getattr(self, "_leased", None)
        if leased is None:  # called outside _leases(): keep the client, as before
            return pool.shared_client(
                credential, fresh_connection=fresh_connection, purpose=purpose
            )
        key = (purpose, fresh_connection)
        if key not in leased:
            client = pool.lease_client(
                credential, fresh_connection=fresh_connection, purpose=purpose
            )
            leased[key] = (credential, client)
        return leased[key][1]

    def _user(self) -> tuple[Any, UserAuth]:
        credential = self.context["user"]["credential"]
        auth = UserAuth.from_credential(credential)
        return credential, auth

    def _timer(self, name: str) -> Any:
        return functools.partial(atomic.ActionTimer, self, name)

    def _issuer(self, fresh_connection: bool = False) -> TokenClient:
        credential, _ = self._user()
        client = self._lease(credential, "issue", fresh_connection)
        pool.open_connections(client, 1)
        return client

    def _validator(self) -> TokenClient:
        """A client holding an X-Auth-Token allowed to validate the user's tokens.

        The admin's token when the environment has an admin, else the user's
        own (Keystone lets a user validate its own tokens). The token_pool
        context issues it before the load; every client of the process shares
        it (a new client issues none) until it nears expiry.
        """
        credential, auth, scope = pool.validator_auth(self.context)
        client = self._lease(credential, "validate:" + repr(auth.key()), False)
        preset = (self.context.get("token_pool") or {}).get("auth_tokens") or {}

        def issue() -> Token:
            token = client.issue(auth, "password", scope, include_catalog=False).token
            assert token is not None
            return token

        token = pool.auth_token(
            credential,
            auth,
            scope,
            MIN_TTL,
            issue,
            preset=preset.get(pool.auth_token_key(credential, auth, scope)),
        )
        if client.auth_token is not token:
            client.use_auth_token(token)
        pool.open_connections(client, 1)
        return client

    def _source_token(self, client: TokenClient, auth: UserAuth) -> Token:
        """An unscoped token of the user, for method "token" to rescope."""
        return pool.source_token(client, auth, MIN_TTL)

    def _application_credential(self, client: TokenClient, auth: UserAuth) -> UserAuth:
        """An application credential of the user, created once per process."""
        return pool.application_credential(client, auth)

    def _report(self, title: str, description: str, **figures: float) -> None:
        """Chart what the iteration did in Rally's HTML (Scenario Data tab)."""
        self.add_output(
            additive={
                "title": title,
                "description": description,
                "chart_plugin": "StatsTable",
                "data": [[name.replace("_", " "), value] for name, value in figures.items()],
            }
        )


_TokenScenario._default_meta_get("default_context").pop(STOCK_USERS)


@validation.add("enum", param_name="scope", values=list(SCOPES), missed=True)
@validation.add("enum", param_name="method", values=list(METHODS), missed=True)
@validation.add("keystone_bench_scope_for_method")
@validation.add("required_platform", platform="openstack", users=True)
@scenario.configure(name="KeystoneTokens.authenticate", platform="openstack")
class Authenticate(_TokenScenario):
    def run(
        self,
        scope: str = "project",
        method: str = "password",
        include_catalog: bool = True,
        fresh_connection: bool = False,
    ) -> None:
        """Issue one token; time that one POST /v3/auth/tokens.

        :param scope: project, domain, system or unscoped
        :param method: password, token (rescope a token issued before the
            timer) or application_credential (created once, before the timer)
        :param include_catalog: ask for the service catalog in the token
        :param fresh_connection: open a new TCP connection for the request
            (the cold path) instead of reusing a kept-alive one
        """
        with self._leases():
            _, auth = self._user()
            client = self._issuer(fresh_connection)
            source = None
            if method == "token":
                source = self._source_token(self._issuer(), auth)
            elif method == "application_credential":
                auth = self._application_credential(self._issuer(), auth)
            result = client.issue(
                auth,
                method,
                scope,
                include_catalog,
                token=source,
                timer=self._timer(ISSUE),
            )
            self._report(
                "Issued tokens",
                f"method {method}, scope {scope}, catalog {include_catalog}",
                http_status=result.status,
                catalog_size=result.catalog_size or 0,
            )


def _pool_token(context: dict, client: TokenClient | Any) -> str:
    """A token from the token_pool context (round-robin, refreshed)."""
    from rally_keystone_bench.plugins.contexts.token_pool import next_token

    return next_token(context, client)


@validation.add("enum", param_name="method", values=["GET", "HEAD"], missed=True)
@validation.add("number", param_name="repetitions", minval=1, integer_only=True, nullable=True)
@validation.add("required_platform", platform="openstack", users=True)
@scenario.configure(name="KeystoneTokens.validate", platform="openstack")
class Validate(_TokenScenario):
    def run(
        self,
        method: str = "GET",
        include_catalog: bool = False,
        repetitions: int = 1,
        allow_expired: bool = False,
    ) -> None:
        """Validate a user's token; time each GET (or HEAD) /v3/auth/tokens.

        Tokens come from the token_pool context when the task has it;
        otherwise one token is issued per iteration, before any timer, and
        validated ``repetitions`` times.

        :param method: GET validates (keystone.validate_token), HEAD checks
            (keystone.check_token)
        :param include_catalog: ask for the catalog in the GET response
        :param repetitions: validations per iteration
        :param allow_expired: pass allow_expired=1
        """
        with self._leases():
            _, auth = self._user()
            validator = self._validator()
            pooled = bool(self.context.get("token_pool"))
            token = None
            statuses = []
            for _ in range(repetitions):
                if pooled:
                    # an issuer only when a pooled token must be replaced
                    token = _pool_token(self.context, self._issuer)
                elif token is None:
                    token = (
                        self._issuer()
                        .issue(auth, "password", "project", include_catalog=False)
                        .token
                    )
                if method == "HEAD":
                    result = validator.check(
                        token, allow_expired=allow_expired, timer=self._timer(CHECK)
                    )
                else:
                    result = validator.validate(
                        token, include_catalog, allow_expired, timer=self._timer(VALIDATE)
                    )
                statuses.append(result)
            last = statuses[-1]
            self._report(
                "Validated tokens",
                f"{method}, catalog {include_catalog}, {repetitions} per iteration",
                http_status=last.status,
                catalog_size=last.catalog_size or 0,
            )


@validation.add("enum", param_name="scope", values=list(SCOPES), missed=True)
@validation.add("number", param_name="count", minval=1, integer_only=True, nullable=True)
@validation.add("number", param_name="parallel", minval=1, integer_only=True, nullable=True)
@validation.add("keystone_bench_not_greater_than", param_name="parallel", limit_param="count")
@validation.add("required_platform", platform="openstack", users=True)
@scenario.configure(name="KeystoneTokens.concurrent_create", platform="openstack")
class ConcurrentCreate(_TokenScenario):
    def run(self, count: int = 20, parallel: int = 20, scope: str = "project") -> None:
        """Issue ``count`` tokens from ``parallel`` threads released at once.

        Each request is a keystone.issue_token nested in one
        keystone.token_burst; the burst's wall time and tokens per second
        are charted in the HTML report.

        :param count: tokens per iteration
        :param parallel: threads sending them, released by one barrier
        :param scope: project, domain, system or unscoped
        """
        credential, auth = self._user()
        client = pool.shared_client(
            credential,
            purpose="burst",
            per_thread=False,
            pool_size=max(pool.POOL_SIZE, parallel),
        )
        pool.open_connections(client, parallel)
        actions, errors = _send_burst(client, auth, scope, count, parallel)
        wall = self._record_burst(actions, errors)
        self._chart_burst(count, parallel, len(errors), wall)
        if errors:
            first = errors[0]
            raise TokenRequestError(
                "issue",
                first.status,
                f"{len(errors)} of {count} token requests failed; first: {first.message}",
            )

    def _record_burst(self, actions: list[dict[str, Any] | None], errors: list) -> float:
        """One keystone.token_burst holding the burst's issue_token actions; its wall time."""
        children = sorted(
            (a for a in actions if a and a.get("started_at")),
            key=lambda a: a["started_at"],
        )
        started = min(a["started_at"] for a in children)
        finished = max(a["finished_at"] for a in children)
        burst = {
            "name": BURST,
            "children": children,
            "started_at": started,
            "finished_at": finished,
        }
        if errors:
            burst["failed"] = True
        self._atomic_actions.append(burst)
        return finished - started

    def _chart_burst(self, count: int, parallel: int, failed: int, wall: float) -> None:
        """The burst's wall time and tokens per second, charted in the HTML report."""
        self.add_output(
            additive={
                "title": "Burst wall time",
                "description": f"{count} tokens, {parallel} at once (seconds)",
                "chart_plugin": "Lines",
                "data": [["burst wall time (s)", wall]],
                "label": "seconds",
                "axis_label": "iteration",
            }
        )
        self.add_output(
            additive={
                "title": "Burst throughput",
                "description": f"{count} tokens, {parallel} at once",
                "chart_plugin": "Lines",
                "data": [["tokens per second", (count - failed) / wall if wall else 0]],
                "label": "tokens/s",
                "axis_label": "iteration",
            }
        )


def _send_burst(
    client: Any, auth: Any, scope: str, count: int, parallel: int
) -> tuple[list[dict[str, Any] | None], list[TokenRequestError]]:
    """COUNT token requests from PARALLEL threads released by one barrier.

    The issue_token action of each (None where none was recorded), and the
    errors.
    """
    actions: list[dict[str, Any] | None] = [None] * count
    errors: list[TokenRequestError] = []
    next_index = iter(range(count))
    lock = threading.Lock()
    barrier = threading.Barrier(parallel + 1)

    def work() -> None:
        barrier.wait()
        while True:
            with lock:
                index = next(next_index, None)
            if index is None:
                return
            record = _RecordedAction(ISSUE)
            try:
                client.issue(auth, "password", scope, timer=lambda r=record: r)
            except TokenRequestError as exc:
                with lock:
                    errors.append(exc)
            actions[index] = record.action

    threads = [threading.Thread(target=work) for _ in range(parallel)]
    for thread in threads:
        thread.start()
    barrier.wait()  # every thread is waiting: release them together
    for thread in threads:
        thread.join()
    return actions, errors


class RevokedTokenStillValid(Exception):
    """A revoked token passed validation."""


@validation.add("number", param_name="validations", minval=0, integer_only=True, nullable=True)
@validation.add("required_platform", platform="openstack", users=True)
@scenario.configure(name="KeystoneTokens.lifecycle", platform="openstack")
class Lifecycle(_TokenScenario):
    def run(self, validations: int = 1, revoke: bool = True, check: bool = False) -> None:
        """Issue a token, validate it, revoke it, and make sure it is gone.

        Timed: keystone.issue_token, ``validations`` x keystone.validate_token,
        with ``check`` a keystone.check_token (HEAD), then
        keystone.revoke_token. After the revocation one more validation (not
        timed, and asking for the catalog where the timed ones do not) must
        answer 404; a revoked token that validates fails the iteration.

        :param validations: validations between issue and revoke
        :param revoke: revoke the token at the end
        :param check: check the token (HEAD) after the validations; the
            capacity probe's lifecycle does, as the Locust engine's does
        """
        with self._leases():
            _, auth = self._user()
            issuer = self._issuer()
            validator = self._validator()
            token = issuer.issue(auth, timer=self._timer(ISSUE)).token
            assert token is not None
            for _ in range(validations):
                validator.validate(token, include_catalog=False, timer=self._timer(VALIDATE))
            if check:
                validator.check(token, timer=self._timer(CHECK))
            if not revoke:
                return
            validator.revoke(token, timer=self._timer(REVOKE))
            try:
                # Untimed, and with the catalog, so that Keystone's access log
                # tells it from the timed validations (which ask for nocatalog).
                after = validator.validate(token, include_catalog=True)
            except TokenRequestError as exc:
                if exc.status != 404:
                    raise
                return
            raise RevokedTokenStillValid(
                f"token {shorten(token.value)}... still validates after revocation "
                f"(HTTP {after.status})"
            )
