"""TokenClient: the only code that speaks to Keystone's /v3/auth/tokens.

Every call sends exactly one HTTP request on a kept-alive connection (or on a
fresh one, when asked) and returns what a benchmark needs: the status, the
time the request took, the token's id shortened to 8 characters, its expiry
and the catalog size. No call discovers versions or fetches a token of its
own: URLs are built from the auth URL, and the X-Auth-Token used to validate,
check and revoke is obtained beforehand with :meth:`TokenClient.authorize`.

A token value or a password never appears in a repr, a log line or an error
message.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rally_keystone_bench.clients import session as client_session
from rally_keystone_bench.clients import tracing
from rally_keystone_bench.clients.auth import UserAuth, auth_request_body

# Fernet tokens (and JWS tokens) are long base64url strings; anything of that
# shape is scrubbed from error messages, whatever Keystone chose to echo.
_TOKEN_PATTERN = re.compile(r"gAAAAA[A-Za-z0-9_=-]{20,}|eyJ[A-Za-z0-9_.=-]{40,}")
_REDACTED = "<redacted>"


def shorten(value: str | None) -> str | None:
    """A token's first 8 characters: how a token may be named anywhere."""
    return None if value is None else value[:8]


class Token:
    """A token value that does not reveal itself in repr() or str()."""

    __slots__ = ("_value", "expires_at", "_expires")

    def __init__(self, value: str, expires_at: str | None = None) -> None:
        self._value = value
        self.expires_at = expires_at
        self._expires: tuple[str, float] | None = None  # (expires_at, parsed), once

    @property
    def value(self) -> str:
        """The full token, for an X-Auth-Token or X-Subject-Token header."""
        return self._value

    @property
    def id(self) -> str:
        """The token shortened to 8 characters."""
        return self._value[:8]

    def seconds_left(self, now: float | None = None) -> float | None:
        """Seconds until the token expires, or None if its expiry is unknown."""
        stamp = self.expires_at
        if not stamp:
            return None
        # asked before every iteration that uses the token: parse it once
        parsed = self._expires
        if parsed is None or parsed[0] != stamp:
            parsed = self._expires = (stamp, _parse_time(stamp))
        return parsed[1] - (time.time() if now is None else now)

    def __repr__(self) -> str:
        return f"<Token {self.id}...>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Token) and other._value == self._value

    # Immutable: a copy would be the same token. Rally deep-copies the whole
    # context for every iteration, pooled tokens included.
    def __copy__(self) -> Token:
        return self

    def __deepcopy__(self, memo: dict) -> Token:
        return self

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class TokenResult:
    """What one request to /v3/auth/tokens returned."""

    operation: str  # issue | validate | check | revoke
    status: int
    elapsed: float  # seconds, around the one HTTP request
    token_id: str | None = None  # first 8 characters only
    expires_at: str | None = None
    catalog_size: int | None = None  # number of services in the catalog
    methods: tuple[str, ...] = ()  # the token's authentication methods
    scope: str | None = None  # project | domain | system | unscoped
    user_id: str | None = None  # the token's user
    project_id: str | None = None  # the token's project, when project-scoped
    token: Token | None = field(default=None, repr=False, compare=False)

    @property
    def method(self) -> str | None:
        """The token's first authentication method ("password", ...)."""
        return self.methods[0] if self.methods else None


class TokenRequestError(Exception):
    """Keystone answered a token request with a non-2xx status.

    Carries the status and Keystone's own message, scrubbed of any token
    value or password.
    """

    def __init__(self, operation: str, status: int, message: str, elapsed: float = 0.0) -> None:
        self.operation = operation
        self.status = status
        self.message = message
        self.elapsed = elapsed
        super().__init__(f"{operation} token: HTTP {status}: {message}")


def scrub(text: str, secrets: list[str] | tuple[str, ...] = ()) -> str:
    """Remove every secret and anything shaped like a token from text."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, _REDACTED)
    return _TOKEN_PATTERN.sub(_REDACTED, text)


def _parse_time(stamp: str) -> float:
    from datetime import datetime, timezone

    value = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def _token_value(token: Token | str) -> str:
    return token.value if isinstance(token, Token) else token


def _scope_of(body: Mapping[str, Any]) -> str:
    if "project" in body:
        return "project"
    if "domain" in body:
        return "domain"
    if "system" in body:
        return "system"
    return "unscoped"


def _no_timer() -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


class TokenClient:
    """Issue, validate, check and revoke Keystone tokens, one request per call.

    :param auth_url: Keystone's auth URL ("http://host:5000/v3"); "/v3" is
        appended when missing. Nothing is discovered.
    :param fresh_connection: open a new TCP connection for every request
        (the cold path) instead of reusing a kept-alive one.
    :param pool_size: connections kept alive per host, for callers that send
        requests from several threads at once.
    :param timeout: seconds before a request gives up.

    Each method takes ``timer``, a factory of context managers (for example
    ``functools.partial(atomic.ActionTimer, scenario, "keystone.issue_token")``)
    entered around the one HTTP request and nothing else.
    """

    def __init__(
        self,
        auth_url: str,
        *,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        fresh_connection: bool = False,
        pool_size: int = 10,
        timeout: float = 60.0,
        session: Any = None,
    ) -> None:
        self.base_url = client_session.identity_v3_url(auth_url)
        self.tokens_url = self.base_url + "/auth/tokens"
        self.fresh_connection = fresh_connection
        self.timeout = timeout
        self._auth_token: Token | None = None
        self._auth_source: tuple[UserAuth, str] | None = None
        self._secrets: set[str] = set()
        self._lock = threading.Lock()
        if session is None:
            session = client_session.token_session(
                self.base_url, verify=verify, cert=cert, pool_size=pool_size
            )
        self.session = session
        self._tracer = tracing.from_environment()  # OSprofiler headers on a sample, or None

    def __repr__(self) -> str:
        return f"<TokenClient {self.base_url} fresh_connection={self.fresh_connection}>"

    # -- the four operations -------------------------------------------------

    def issue(
        self,
        auth: UserAuth,
        method: str = "password",
        scope: str = "project",
        include_catalog: bool = True,
        *,
        token: Token | str | None = None,
        timer: Callable[[], contextlib.AbstractContextManager] | None = None,
    ) -> TokenResult:
        """Issue a token (POST /v3/auth/tokens) and return it in the result.

        ``method`` is password, token (rescope ``token``) or
        application_credential; ``scope`` is project, domain, system or
        unscoped. An application credential carries its own project scope
        (Keystone refuses another), so with it ``scope`` is not sent.
        """
        value = None if token is None else _token_value(token)
        body = auth_request_body(auth, method, scope, value)["auth"]
        secrets = auth.secrets() + ([value] if value else [])
        return self.issue_with(
            body["identity"], body.get("scope"), include_catalog, secrets=secrets, timer=timer
        )

    def issue_with(
        self,
        identity: dict[str, Any],
        scope: Any = None,
        include_catalog: bool = True,
        *,
        secrets: list[str] | tuple[str, ...] = (),
        timer: Callable[[], contextlib.AbstractContextManager] | None = None,
    ) -> TokenResult:
        """Issue a token from a prepared IDENTITY and SCOPE body (None: no scope sent).

        SECRETS (passwords, passcodes, tokens in the body) are scrubbed from errors.
        """
        body: dict[str, Any] = {"identity": identity}
        if scope is not None:
            body["scope"] = scope
        params = {} if include_catalog else {"nocatalog": "1"}
        secrets = list(secrets)
        for secret in secrets:
            self._remember(secret)
        resp, elapsed = self._send("issue", "POST", {}, params, {"auth": body}, secrets, timer)
        value = resp.headers.get("X-Subject-Token")
        data = _json(resp).get("token", {})
        new = Token(value, data.get("expires_at")) if value else None
        if new is not None:
            self._remember(new.value)
        return _result("issue", resp.status_code, elapsed, data, new)

    def validate(
        self,
        token: Token | str,
        include_catalog: bool = True,
        allow_expired: bool = False,
        *,
        timer: Callable[[], contextlib.AbstractContextManager] | None = None,
    ) -> TokenResult:
        """Validate a token: GET /v3/auth/tokens with X-Subject-Token."""
        params = {}
        if not include_catalog:
            params["nocatalog"] = "1"
        if allow_expired:
            params["allow_expired"] = "1"
        resp, elapsed = self._send("validate", "GET", self._subject(token), params, None, (), timer)
        data = _json(resp).get("token", {})
        return _result("validate", resp.status_code, elapsed, data, None, token)

    def check(
        self,
        token: Token | str,
        *,
        allow_expired: bool = False,
        timer: Callable[[], contextlib.AbstractContextManager] | None = None,
    ) -> TokenResult:
        """Check a token: HEAD /v3/auth/tokens (status only, no body)."""
        params = {"allow_expired": "1"} if allow_expired else {}
        resp, elapsed = self._send("check", "HEAD", self._subject(token), params, None, (), timer)
        return _result("check", resp.status_code, elapsed, {}, None, token)

    def revoke(
        self,
        token: Token | str,
        *,
        timer: Callable[[], contextlib.AbstractContextManager] | None = None,
    ) -> TokenResult:
        """Revoke a token: DELETE /v3/auth/tokens."""
        resp, elapsed = self._send("revoke", "DELETE", self._subject(token), {}, None, (), timer)
        return _result("revoke", resp.status_code, elapsed, {}, None, token)

    def read(self, token: Token | str) -> dict[str, Any]:
        """TOKEN's own body (user, project, roles), asked with TOKEN itself: setup, never timed.

        GET /v3/auth/tokens?nocatalog=1 with TOKEN as both X-Auth-Token and
        X-Subject-Token; TokenRequestError("read", ...) when Keystone refuses.
        """
        value = _token_value(token)
        self._remember(value)
        headers = {"X-Auth-Token": value, "X-Subject-Token": value}
        resp, _ = self._send("read", "GET", headers, {"nocatalog": "1"}, None, (), None)
        return _json(resp).get("token", {})

    def create_application_credential(self, auth: UserAuth, lifetime_s: float) -> UserAuth:
        """A new application credential of AUTH's user that expires after LIFETIME_S seconds.

        Not a timed operation: the user's project token it needs and the
        POST /v3/users/{id}/application_credentials are setup.
        """
        result = self.issue(auth, "password", "project", include_catalog=False)
        assert result.token is not None and result.user_id
        expires = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + lifetime_s))
        resp = self.session.request(
            f"{self.base_url}/users/{result.user_id}/application_credentials",
            "POST",
            json={
                "application_credential": {
                    "name": "rally-keystone-bench-" + os.urandom(4).hex(),
                    "expires_at": expires,
                }
            },
            headers={"X-Auth-Token": result.token.value, "Accept": "application/json"},
            authenticated=False,
            raise_exc=False,
            log=False,
        )
        if resp.status_code != 201:
            raise TokenRequestError(
                "create application credential", resp.status_code, resp.reason or ""
            )
        body = resp.json()["application_credential"]
        self._remember(body["secret"])
        return UserAuth(
            application_credential_id=body["id"],
            application_credential_secret=body["secret"],
        )

    # -- the X-Auth-Token for validate, check and revoke ----------------------

    def authorize(
        self,
        auth: UserAuth,
        scope: str = "project",
        min_ttl: float = 300.0,
    ) -> Token:
        """Get (once, then re-use) the X-Auth-Token for validate/check/revoke.

        Call it before any timer: it issues a token only when none is held,
        when another user asks, or when less than ``min_ttl`` seconds are left.
        """
        with self._lock:
            current = self._auth_token
            source = (auth, scope)
            if current is not None and self._auth_source == source:
                left = current.seconds_left()
                if left is None or left > min_ttl:
                    return current
            result = self.issue(auth, "password", scope, include_catalog=False)
            assert result.token is not None
            self._auth_token = result.token
            self._auth_source = source
            return result.token

    def use_auth_token(self, token: Token | str) -> None:
        """Use a token obtained elsewhere as the X-Auth-Token."""
        self._auth_token = token if isinstance(token, Token) else Token(token)
        self._auth_source = None
        self._remember(self._auth_token.value)

    @property
    def auth_token(self) -> Token | None:
        return self._auth_token

    # -- one request ----------------------------------------------------------

    def _subject(self, token: Token | str) -> dict[str, str]:
        if self._auth_token is None:
            raise TokenRequestError(
                "auth", 0, "no X-Auth-Token: call authorize() before validating"
            )
        subject = _token_value(token)
        self._remember(subject)
        return {
            "X-Auth-Token": self._auth_token.value,
            "X-Subject-Token": subject,
        }

    def _remember(self, value: str) -> None:
        # Tokens and passwords this client has sent are scrubbed from its
        # error messages, whichever request Keystone echoes them in.
        # Bounded: a long run must not keep every token it ever issued.
        if len(self._secrets) > 4096:
            self._secrets.clear()
        self._secrets.add(value)

    def _send(
        self,
        operation: str,
        verb: str,
        headers: dict[str, str],
        params: dict[str, str],
        json_body: Any,
        secrets: list[str] | tuple[str, ...],
        timer: Callable[[], contextlib.AbstractContextManager] | None,
    ) -> tuple[Any, float]:
        headers = {"Accept": "application/json", **headers}
        if self._tracer is not None and timer is not None:
            # Only a timed request is evidence of an atomic action: the untimed
            # ones (a token to validate, a rescope's source token, a trust's
            # setup) go unsigned, so they neither take a sample's place nor
            # count as their workload's (doc/source/counters.rst).
            headers.update(self._tracer.headers(verb))  # signed before the timer starts
        if self.fresh_connection:
            headers["Connection"] = "close"
        kwargs: dict[str, Any] = {
            "headers": headers,
            "authenticated": False,
            "raise_exc": False,
            "redirect": False,
            "log": False,
            "connect_retries": 0,
            "timeout": self.timeout,
        }
        if params:
            kwargs["params"] = params
        if json_body is not None:
            kwargs["json"] = json_body
        from keystoneauth1 import exceptions as ks_exc

        try:
            with (timer or _no_timer)():
                start = time.perf_counter()
                try:
                    resp = self.session.request(self.tokens_url, verb, **kwargs)
                finally:
                    elapsed = time.perf_counter() - start
                if not 200 <= resp.status_code < 300:
                    raise TokenRequestError(
                        operation,
                        resp.status_code,
                        scrub(_error_message(resp), self._all_secrets(secrets, headers)),
                        elapsed,
                    )
        except ks_exc.ClientException as exc:
            # Connection refused, timeouts...: the same one error type, with
            # status 0, and keystoneauth's message scrubbed all the same.
            message = scrub(str(exc), self._all_secrets(secrets, headers))
            raise TokenRequestError(operation, 0, message) from None
        finally:
            # After the timer: a fresh-connection client never reuses one.
            if self.fresh_connection:
                self._drop_connections()
        return resp, elapsed

    def _all_secrets(self, secrets: Any, headers: Mapping[str, str]) -> list[str]:
        """What an error message about this request must not show."""
        return [
            *secrets,
            *(headers.get(h, "") for h in _SECRET_HEADERS),
            *self._secrets,
        ]

    def _drop_connections(self) -> None:
        close = getattr(self.session, "close_connections", None)
        if close is not None:  # a DirectSession
            close()
            return
        http = getattr(self.session, "session", None)
        for adapter in getattr(http, "adapters", {}).values():
            adapter.close()


_SECRET_HEADERS = ("X-Auth-Token", "X-Subject-Token")


def _json(resp: Any) -> dict:
    if not resp.content:
        return {}
    try:
        data = resp.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _error_message(resp: Any) -> str:
    data = _json(resp)
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    reason = getattr(resp, "reason", "") or ""
    return reason or "no message"


def _result(
    operation: str,
    status: int,
    elapsed: float,
    data: Mapping[str, Any],
    new_token: Token | None,
    subject: Token | str | None = None,
) -> TokenResult:
    catalog = data.get("catalog")
    token = new_token
    token_id = new_token.id if new_token else None
    if subject is not None:
        token_id = shorten(_token_value(subject))
    return TokenResult(
        operation=operation,
        status=status,
        elapsed=elapsed,
        token_id=token_id,
        expires_at=data.get("expires_at") or (new_token.expires_at if new_token else None),
        catalog_size=len(catalog) if isinstance(catalog, list) else None,
        methods=tuple(data.get("methods") or ()),
        scope=_scope_of(data) if data else None,
        user_id=(data.get("user") or {}).get("id"),
        project_id=(data.get("project") or {}).get("id"),
        token=token,
    )
