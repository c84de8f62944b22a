"""KeystoneTokens.issue_path and validate_path: every token path a cloud uses.

A path is how the token is obtained: ``password``, ``token`` (rescope an
unscoped token), ``application_credential``, ``trust`` (the trustee's
password, scoped to a trust the keystone_trusts context made) or ``totp``
(password and a TOTP passcode in one request; the keystone_totp context
enrolled the credential, the passcode is computed here). Everything a path
needs is prepared before the timer; each timed action is one request.
"""

from __future__ import annotations

from typing import Any

from rally.task import validation
from rally_openstack.task import scenario

from rally_keystone_bench.clients import auth_paths
from rally_keystone_bench.clients.auth import (
    SCOPES,
    identity_body,
    password_totp_identity,
    scope_body,
    trust_scope,
)
from rally_keystone_bench.clients.tokens import TokenClient, TokenResult
from rally_keystone_bench.plugins.scenarios.tokens import CHECK, ISSUE, VALIDATE, _TokenScenario

PATHS = ("password", "token", "application_credential", "trust", "totp")
# The contexts a path needs, and the scopes it can have.
NEEDS = {"trust": "keystone_trusts", "totp": "keystone_totp"}
ONLY_PROJECT = ("application_credential", "trust")  # their scope is their own


class MissingContext(Exception):
    """The path needs a context the task does not have."""


class _PathScenario(_TokenScenario):
    def _issue_path(
        self, client: TokenClient, path: str, scope: str, include_catalog: bool, timer: Any
    ) -> TokenResult:
        """Issue a token by PATH; only the POST /v3/auth/tokens is inside TIMER."""
        _, auth = self._user()
        if path in ("password", "token", "application_credential"):
            source = self._source_token(self._issuer(), auth) if path == "token" else None
            if path == "application_credential":
                auth = self._application_credential(self._issuer(), auth)
            return client.issue(auth, path, scope, include_catalog, token=source, timer=timer)
        made = self.context.get(NEEDS[path])
        user_id = self.context["user"]["id"]
        if not made or user_id not in made:
            raise MissingContext(f"path {path} needs the {NEEDS[path]} context")
        if path == "trust":
            identity = identity_body("password", auth)
            return client.issue_with(
                identity,
                trust_scope(made[user_id]),
                include_catalog,
                secrets=auth.secrets(),
                timer=timer,
            )
        passcode = auth_paths.totp_code(made[user_id]["secret"])
        identity = password_totp_identity(auth, passcode)
        secrets = [*auth.secrets(), passcode]
        return client.issue_with(
            identity, scope_body(scope, auth), include_catalog, secrets=secrets, timer=timer
        )


def _check_scope(path: str, scope: str) -> None:
    if path in ONLY_PROJECT and scope != "project":
        raise ValueError(f"path {path} carries its own project scope; scope must be project")


@validation.add("enum", param_name="path", values=list(PATHS), missed=True)
@validation.add("enum", param_name="scope", values=list(SCOPES), missed=True)
@validation.add("required_platform", platform="openstack", users=True)
@scenario.configure(name="KeystoneTokens.issue_path", platform="openstack")
class IssuePath(_PathScenario):
    def run(self, path: str = "password", scope: str = "project", include_catalog: bool = True):
        """Issue one token by PATH; time that one POST /v3/auth/tokens.

        :param path: password, token, application_credential, trust or totp
        :param scope: project, domain or system (application_credential and
            trust: project only, their own)
        :param include_catalog: ask for the service catalog in the token
        """
        _check_scope(path, scope)
        with self._leases():
            result = self._issue_path(
                self._issuer(), path, scope, include_catalog, self._timer(ISSUE)
            )
            self._report(
                "Issued tokens",
                f"path {path}, scope {scope}, catalog {include_catalog}",
                http_status=result.status,
                catalog_size=result.catalog_size or 0,
            )


@validation.add("enum", param_name="path", values=list(PATHS), missed=True)
@validation.add("enum", param_name="scope", values=list(SCOPES), missed=True)
@validation.add("enum", param_name="method", values=["GET", "HEAD"], missed=True)
@validation.add("required_platform", platform="openstack", users=True)
@scenario.configure(name="KeystoneTokens.validate_path", platform="openstack")
class ValidatePath(_PathScenario):
    def run(
        self,
        path: str = "password",
        scope: str = "project",
        method: str = "GET",
        include_catalog: bool = False,
    ):
        """Validate a token of PATH and SCOPE, issued before the timer; time the one request.

        :param path: password, token, application_credential, trust or totp
        :param scope: the token's scope: project, domain or system
        :param method: GET validates (keystone.validate_token), HEAD checks
            (keystone.check_token)
        :param include_catalog: GET: ask for the catalog in the response
        """
        _check_scope(path, scope)
        with self._leases():
            token = self._issue_path(self._issuer(), path, scope, False, None).token
            assert token is not None
            validator = self._validator()
            if method == "HEAD":
                result = validator.check(token, timer=self._timer(CHECK))
            else:
                result = validator.validate(token, include_catalog, timer=self._timer(VALIDATE))
            self._report(
                "Validated tokens",
                f"path {path}, scope {scope}, {method}, catalog {include_catalog}",
                http_status=result.status,
                catalog_size=result.catalog_size or 0,
            )
