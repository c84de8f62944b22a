"""The one builder of token request bodies: who authenticates, how, and for what scope.

``TokenClient.issue``, the admin client's password check, the revocation
context's rescoped token, the token paths (trust, password + TOTP) and the
checks made before Rally starts (a local Keystone's readiness, a cloud's
preflight) all send bodies built here. Nothing here speaks HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

METHODS = ("password", "token", "application_credential")
SCOPES = ("project", "domain", "system", "unscoped")


@dataclass(frozen=True)
class UserAuth:
    """Who authenticates, and where a project or domain scope points.

    Build it from a Rally credential with :meth:`from_credential`; its repr
    never shows the password or the secret.
    """

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    user_id: str | None = None
    user_domain_name: str | None = "Default"
    user_domain_id: str | None = None
    project_name: str | None = None
    project_id: str | None = None
    project_domain_name: str | None = "Default"
    project_domain_id: str | None = None
    domain_name: str | None = None
    domain_id: str | None = None
    application_credential_id: str | None = None
    application_credential_secret: str | None = field(default=None, repr=False)

    @classmethod
    def from_credential(cls, credential: Mapping[str, Any]) -> UserAuth:
        """From a Rally OpenStackCredential (or any dict of the same keys)."""
        get = credential.get
        return cls(
            username=get("username"),
            password=get("password"),
            user_id=get("user_id"),
            user_domain_name=get("user_domain_name") or "Default",
            project_name=get("project_name") or get("tenant_name"),
            project_id=get("project_id"),
            project_domain_name=get("project_domain_name") or "Default",
            domain_name=get("domain_name") or get("user_domain_name") or "Default",
        )

    def secrets(self) -> list[str]:
        """Values that must be scrubbed from anything printed."""
        return [s for s in (self.password, self.application_credential_secret) if s]

    def key(self) -> tuple:
        """Identifies the user and scope, for caching clients and tokens."""
        return (
            self.user_id or self.username,
            self.user_domain_id or self.user_domain_name,
            self.project_id or self.project_name,
            self.project_domain_id or self.project_domain_name,
            self.application_credential_id,
        )


def scope_body(scope: str, auth: UserAuth) -> Any:
    """The ``scope`` of a token request: SCOPE (project, domain, system, unscoped) of AUTH."""
    if scope == "unscoped":
        return "unscoped"
    if scope == "system":
        return {"system": {"all": True}}
    if scope == "domain":
        if auth.domain_id:
            return {"domain": {"id": auth.domain_id}}
        return {"domain": {"name": auth.domain_name or "Default"}}
    if scope == "project":
        if auth.project_id:
            return {"project": {"id": auth.project_id}}
        if not auth.project_name:
            raise ValueError("scope 'project' needs a project_name or project_id")
        domain = (
            {"id": auth.project_domain_id}
            if auth.project_domain_id
            else {"name": auth.project_domain_name or "Default"}
        )
        return {"project": {"name": auth.project_name, "domain": domain}}
    raise ValueError(f"unknown scope {scope!r}; expected one of {', '.join(SCOPES)}")


def user_body(auth: UserAuth) -> dict[str, Any]:
    """The ``user`` of a token request: AUTH's user by id, else by name in its domain."""
    if auth.user_id:
        return {"id": auth.user_id}
    domain = (
        {"id": auth.user_domain_id}
        if auth.user_domain_id
        else {"name": auth.user_domain_name or "Default"}
    )
    return {"name": auth.username, "domain": domain}


def password_user(auth: UserAuth) -> dict[str, Any]:
    """The password method's ``user``: AUTH's user and its password."""
    return {**user_body(auth), "password": auth.password}


def password_totp_identity(auth: UserAuth, passcode: str) -> dict[str, Any]:
    """Two methods in one request: the user's password and a TOTP passcode."""
    return {
        "methods": ["password", "totp"],
        "password": {"user": password_user(auth)},
        "totp": {"user": {**user_body(auth), "passcode": passcode}},
    }


def trust_scope(trust_id: str) -> dict[str, Any]:
    """The scope of a trust-scoped token (the trustee authenticates, the trust scopes)."""
    return {"OS-TRUST:trust": {"id": trust_id}}


def identity_body(method: str, auth: UserAuth, token: str | None = None) -> dict:
    """The ``identity`` of a token request: METHOD's credentials from AUTH (or TOKEN)."""
    if method == "password":
        return {"methods": ["password"], "password": {"user": password_user(auth)}}
    if method == "token":
        if token is None:
            raise ValueError("method 'token' needs an existing token to rescope")
        return {"methods": ["token"], "token": {"id": token}}
    if method == "application_credential":
        if not (auth.application_credential_id and auth.application_credential_secret):
            raise ValueError(
                "method 'application_credential' needs an application credential id and secret"
            )
        return {
            "methods": ["application_credential"],
            "application_credential": {
                "id": auth.application_credential_id,
                "secret": auth.application_credential_secret,
            },
        }
    raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")


def auth_request_body(
    auth: UserAuth,
    method: str = "password",
    scope: str | None = "project",
    token: str | None = None,
) -> dict[str, Any]:
    """The JSON body of POST /v3/auth/tokens.

    SCOPE None sends no scope (Keystone then decides: a rescoped token's
    default, a password's default project). An application credential
    carries its own project scope (Keystone refuses another), so with it
    SCOPE is not sent.
    """
    body: dict[str, Any] = {"identity": identity_body(method, auth, token)}
    if scope is not None and method != "application_credential":
        body["scope"] = scope_body(scope, auth)
    return {"auth": body}
