"""The token paths beyond one method: trust-scoped tokens and password + TOTP.

The TOTP code (RFC 6238, computed here), and the setup calls the contexts
make through Keystone's API: enrol a TOTP credential, create and delete a
trust; and for the paired gate, whose sides have only their admin, a trustee
user and the admin's own TOTP credential. None of these is timed. Their token
request bodies come from ``clients/auth.py``, the one builder.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import struct
import time
from typing import Any

from rally_keystone_bench.clients.tokens import TokenClient, TokenRequestError, UserAuth

TOTP_STEP = 30  # seconds: Keystone's [totp] window is counted in these
TOTP_DIGITS = 6  # Keystone's default passcode length


def totp_secret() -> str:
    """A new TOTP secret: 20 random bytes, base32 (the blob Keystone stores)."""
    return base64.b32encode(os.urandom(20)).decode()


def totp_code(
    secret: str,
    at: float | None = None,
    digits: int = TOTP_DIGITS,
    step: int = TOTP_STEP,
    digest: str = "sha1",
) -> str:
    """The TOTP passcode of base32 SECRET at time AT (RFC 6238; HOTP of RFC 4226)."""
    key = base64.b32decode(secret + "=" * (-len(secret) % 8), casefold=True)
    counter = int((time.time() if at is None else at) // step)
    mac = hmac.new(key, struct.pack(">Q", counter), getattr(hashlib, digest)).digest()
    offset = mac[-1] & 0x0F
    value = struct.unpack(">I", mac[offset : offset + 4])[0] & 0x7FFFFFFF
    return str(value % 10**digits).zfill(digits)


def enrol_totp(admin: Any, user_id: str) -> tuple[str, str]:
    """Create a TOTP credential for USER_ID through the admin API: (credential id, secret)."""
    secret = totp_secret()
    body = {"credential": {"type": "totp", "user_id": user_id, "blob": secret}}
    _, created = admin.request("POST", "/credentials", "enrol a TOTP credential", json=body)
    return created["credential"]["id"], secret


def remove_totp(admin: Any, credential_id: str) -> bool:
    """Delete a TOTP credential; True when it is gone (404 counts as gone)."""
    status, _ = admin.request(
        "DELETE", f"/credentials/{credential_id}", f"delete credential {credential_id}"
    )
    return status in (204, 404)


def create_trust(client: TokenClient, trustor: UserAuth, trustee_id: str) -> str:
    """A trust from TRUSTOR to TRUSTEE_ID on the trustor's project, with the trustor's roles.

    Made with the trustor's own project token, as Keystone requires.
    """
    issued = client.issue(trustor, "password", "project", include_catalog=False)
    assert issued.token is not None
    token = client.read(issued.token)
    body = {
        "trust": {
            "trustor_user_id": issued.user_id,
            "trustee_user_id": trustee_id,
            "project_id": token["project"]["id"],
            "impersonation": False,
            "roles": [{"id": r["id"]} for r in token.get("roles", [])],
        }
    }
    resp = _request(client, "POST", "/OS-TRUST/trusts", issued.token.value, body)
    if resp.status_code != 201:
        raise TokenRequestError("create trust", resp.status_code, resp.reason or "")
    return resp.json()["trust"]["id"]


def delete_trust(client: TokenClient, trustor: UserAuth, trust_id: str) -> bool:
    """Delete TRUST_ID with the trustor's token; True when it is gone."""
    issued = client.issue(trustor, "password", "project", include_catalog=False)
    assert issued.token is not None
    resp = _request(client, "DELETE", f"/OS-TRUST/trusts/{trust_id}", issued.token.value)
    return resp.status_code in (204, 404)


def _request(client: TokenClient, method: str, path: str, token: str, body: Any = None) -> Any:
    kwargs: dict[str, Any] = {
        "headers": {"X-Auth-Token": token, "Accept": "application/json"},
        "authenticated": False,
        "raise_exc": False,
        "log": False,
    }
    if body is not None:
        kwargs["json"] = body
    return client.session.request(client.base_url + path, method, **kwargs)


def create_trustee(client: TokenClient, admin: UserAuth) -> UserAuth:
    """A new user of ADMIN's own domain, with a random password, to be trusted (setup).

    Made with ADMIN's project token; the paired gate's sides are thrown away
    after the gate, and their trustee with them.
    """
    issued = client.issue(admin, "password", "project", include_catalog=False)
    assert issued.token is not None
    domain_id = client.read(issued.token)["user"]["domain"]["id"]
    password = secrets.token_urlsafe(24)
    name = "rally-keystone-bench-trustee-" + secrets.token_hex(4)
    body = {"user": {"name": name, "password": password, "domain_id": domain_id}}
    resp = _request(client, "POST", "/users", issued.token.value, body)
    if resp.status_code != 201:
        raise TokenRequestError("create trustee", resp.status_code, resp.reason or "")
    return UserAuth(user_id=resp.json()["user"]["id"], password=password)


def enrol_own_totp(client: TokenClient, auth: UserAuth) -> str:
    """Enrol a TOTP credential for AUTH's own user, with its project token: the secret."""
    issued = client.issue(auth, "password", "project", include_catalog=False)
    assert issued.token is not None and issued.user_id
    secret = totp_secret()
    body = {"credential": {"type": "totp", "user_id": issued.user_id, "blob": secret}}
    resp = _request(client, "POST", "/credentials", issued.token.value, body)
    if resp.status_code != 201:
        raise TokenRequestError("enrol a TOTP credential", resp.status_code, resp.reason or "")
    return secret
