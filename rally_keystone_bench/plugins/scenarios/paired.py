"""KeystoneTokens.paired: one request to each of two Keystones per iteration.

The gate's measurement. Both deployments are up; each iteration sends the
same request to the baseline and to the candidate, in random order, each
timed as its own atomic action named after its side
(``baseline.keystone.issue_token``, ``candidate.keystone.issue_token``), so
both sides see the same machine within a second of each other. The targets
are the two deployments' ``openrc`` files (mode 0600): the task and Rally's
report name a path, never a password.

    rally task start tasks/gate.yaml \\
        --task-args '{"baseline": "A/openrc", "candidate": "B/openrc"}'
"""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path
from typing import Any

from rally.task import validation
from rally_openstack.task import scenario

from rally_keystone_bench.clients import auth_paths, credentials
from rally_keystone_bench.clients.auth import (
    SCOPES,
    UserAuth,
    identity_body,
    password_totp_identity,
    scope_body,
    trust_scope,
)
from rally_keystone_bench.clients.pool import shared_client
from rally_keystone_bench.clients.tokens import Token, TokenRequestError, TokenResult
from rally_keystone_bench.plugins.scenarios.token_paths import PATHS
from rally_keystone_bench.plugins.scenarios.tokens import (
    CHECK,
    ISSUE,
    MIN_TTL,
    VALIDATE,
    _TokenScenario,
)

SIDES = ("baseline", "candidate")
ACTIONS = {"issue": ISSUE, "validate": VALIDATE}
# A side takes every token path (token_paths.PATHS) with its openrc alone.
# trust: a trustee user and a trust from the admin, made once per process and
# side; totp: a TOTP credential enrolled for the admin (Keystone's [auth]
# methods must list totp).

_TARGETS: dict[str, dict[str, Any]] = {}
_TOKENS: dict[tuple, Token] = {}
_PATH_AUTH: dict[tuple, tuple[UserAuth, Token | None]] = {}
_PREPARED: dict[tuple, Any] = {}  # trust and totp setup, kept for the process
_LOCK = threading.RLock()  # _validate holds it while _path_auth takes it again
_ORDER = random.Random()


def side_action(side: str, action: str) -> str:
    """The atomic action name of ACTION on SIDE: ``candidate.keystone.issue_token``."""
    return f"{side}.{action}"


def read_openrc(path: str) -> dict[str, Any]:
    """The credential in an openrc file (read once per process)."""
    with _LOCK:
        found = _TARGETS.get(path)
        if found is None:
            found = _TARGETS[path] = credentials.from_openrc(Path(path))
        return found


@validation.add("enum", param_name="action", values=list(ACTIONS), missed=True)
@validation.add("enum", param_name="scope", values=list(SCOPES), missed=True)
@validation.add("enum", param_name="path", values=list(PATHS), missed=True)
@validation.add("enum", param_name="method", values=["GET", "HEAD"], missed=True)
@validation.add("file_exists", param_name="baseline")
@validation.add("file_exists", param_name="candidate")
@scenario.configure(name="KeystoneTokens.paired", platform="openstack")
class Paired(_TokenScenario):
    def run(
        self,
        baseline: str,
        candidate: str,
        action: str = "issue",
        scope: str = "project",
        include_catalog: bool = True,
        path: str = "password",
        method: str = "GET",
    ) -> None:
        """The same token request to the baseline and to the candidate, in random order.

        Each side's admin (from its openrc) issues a password token, or
        validates a token issued before any timer; each request is timed
        as ``<side>.keystone.issue_token`` or ``<side>.keystone.validate_token``.
        A failed request does not stop the other side's: the iteration
        fails after both were sent.

        :param baseline: the baseline deployment's openrc file
        :param candidate: the candidate deployment's openrc file
        :param action: issue or validate
        :param scope: issue: project, domain, system or unscoped
        :param include_catalog: ask for the catalog (issue, and validate with GET)
        :param path: how the token is obtained: password, token (rescope an
            unscoped token issued before the timer), application_credential
            (created once per process, before the timer), trust (a trustee's
            password token scoped to a trust from the admin: both made once
            per process; the scope is the trust's) or totp (password and a
            TOTP passcode of a credential enrolled once per process)
        :param method: validate: GET (keystone.validate_token) or HEAD
            (keystone.check_token)
        """
        targets = {"baseline": baseline, "candidate": candidate}
        order = list(SIDES)
        _ORDER.shuffle(order)
        errors: list[TokenRequestError] = []
        for side in order:
            credential = read_openrc(targets[side])
            try:
                if action == "issue":
                    self._issue(side, credential, scope, include_catalog, path)
                else:
                    self._validate(side, credential, path, method, include_catalog)
            except TokenRequestError as exc:
                errors.append(exc)
        self._report(
            "Paired requests",
            f"{action}: first side of the pair",
            candidate_first=float(order[0] == "candidate"),
        )
        if errors:
            raise errors[0]

    def _issue(
        self, side: str, credential: dict, scope: str, include_catalog: bool, path: str = "password"
    ) -> None:
        client = shared_client(credential, purpose="paired-issue", per_thread=False)
        auth = UserAuth.from_credential(credential)
        timer = self._timer(side_action(side, ISSUE))
        _issue_by(client, auth, path, scope, include_catalog, timer)

    def _validate(
        self,
        side: str,
        credential: dict,
        path: str = "password",
        method: str = "GET",
        include_catalog: bool = False,
    ) -> None:
        client = shared_client(credential, purpose="paired-validate", per_thread=False)
        auth = UserAuth.from_credential(credential)
        client.authorize(auth, scope="project", min_ttl=MIN_TTL)
        key = (os.getpid(), credential["auth_url"], path)
        with _LOCK:
            token = _TOKENS.get(key)
            left = token.seconds_left() if token else None
            if token is None or (left is not None and left < MIN_TTL):
                found = _issue_by(client, auth, path, "project", False)
                assert found.token is not None
                token = _TOKENS[key] = found.token
        if method == "HEAD":
            client.check(token, timer=self._timer(side_action(side, CHECK)))
            return
        timer = self._timer(side_action(side, VALIDATE))
        client.validate(token, include_catalog=include_catalog, timer=timer)


def _issue_by(
    client: Any, auth: UserAuth, path: str, scope: str, include_catalog: bool, timer: Any = None
) -> TokenResult:
    """Issue a token by PATH; everything it needs is prepared before TIMER starts."""
    if path == "trust":
        trustee, trust_id = _prepared(client, auth, path)
        return client.issue_with(
            identity_body("password", trustee),
            trust_scope(trust_id),
            include_catalog,
            secrets=trustee.secrets(),
            timer=timer,
        )
    if path == "totp":
        passcode = auth_paths.totp_code(_prepared(client, auth, path))
        return client.issue_with(
            password_totp_identity(auth, passcode),
            scope_body(scope, auth),
            include_catalog,
            secrets=[*auth.secrets(), passcode],
            timer=timer,
        )
    issuer, source = _path_auth(client, auth, path)
    return client.issue(issuer, path, scope, include_catalog, token=source, timer=timer)


def _prepared(client: Any, auth: UserAuth, path: str) -> Any:
    """trust: (trustee, trust id); totp: the TOTP secret. Once per process and side."""
    key = (os.getpid(), client.base_url, path)
    with _LOCK:
        found = _PREPARED.get(key)
        if found is None:
            if path == "trust":
                trustee = auth_paths.create_trustee(client, auth)
                assert trustee.user_id is not None
                found = (trustee, auth_paths.create_trust(client, auth, trustee.user_id))
            else:
                found = auth_paths.enrol_own_totp(client, auth)
            _PREPARED[key] = found
        return found


def _path_auth(client: Any, auth: UserAuth, path: str) -> tuple[UserAuth, Token | None]:
    """What PATH authenticates with, prepared before any timer: (auth, token to rescope).

    Kept per process and per side (both sides' admins have the same names).
    """
    if path == "password":
        return auth, None
    key = (os.getpid(), client.base_url, path)
    with _LOCK:
        found = _PATH_AUTH.get(key)
        source = found[1] if found else None
        left = source.seconds_left() if source else None
        if found is None or (left is not None and left < MIN_TTL):
            if path == "token":
                unscoped = client.issue(auth, "password", "unscoped", include_catalog=False)
                found = (auth, unscoped.token)
            else:
                found = (client.create_application_credential(auth, lifetime_s=7200), None)
            _PATH_AUTH[key] = found
        return found
