"""Trust and password + TOTP token paths: the TOTP code and the request bodies."""

from __future__ import annotations

import base64

import pytest
from fake_keystone import FakeKeystone, serving

from rally_keystone_bench.clients import auth_paths
from rally_keystone_bench.clients.auth import identity_body, password_totp_identity, trust_scope
from rally_keystone_bench.clients.tokens import TokenClient, TokenRequestError, UserAuth
from rally_keystone_bench.plugins.contexts.token_paths import trust_pairs

# RFC 6238, appendix B: the SHA-1 seed "12345678901234567890", 8 digits.
RFC_SECRET = base64.b32encode(b"12345678901234567890").decode()
RFC_VECTORS = [
    (59, "94287082"),
    (1111111109, "07081804"),
    (1111111111, "14050471"),
    (1234567890, "89005924"),
    (2000000000, "69279037"),
    (20000000000, "65353130"),
]
PASSWORD = "pw-Secret-4711"
AUTH = UserAuth(username="alice", password=PASSWORD, project_name="demo")


@pytest.mark.parametrize(("at", "code"), RFC_VECTORS)
def test_totp_codes_match_rfc_6238(at: int, code: str) -> None:
    assert auth_paths.totp_code(RFC_SECRET, at, digits=8) == code


def test_a_totp_code_is_six_digits_for_keystone_and_changes_every_30_seconds() -> None:
    secret = auth_paths.totp_secret()
    assert len(base64.b32decode(secret)) == 20
    assert auth_paths.totp_code(RFC_SECRET, 59) == "287082"  # the last 6 of 94287082
    assert auth_paths.totp_code(secret, 60) == auth_paths.totp_code(secret, 89)


def test_password_and_totp_go_in_one_request() -> None:
    identity = password_totp_identity(AUTH, "123456")
    assert identity["methods"] == ["password", "totp"]
    user = {"name": "alice", "domain": {"name": "Default"}}
    assert identity["password"]["user"] == {**user, "password": PASSWORD}
    assert identity["totp"]["user"] == {**user, "passcode": "123456"}


def test_a_trust_token_is_the_trustees_password_scoped_to_the_trust() -> None:
    with serving(FakeKeystone(track_tokens=False)) as keystone:
        client = TokenClient(f"http://127.0.0.1:{keystone.server_address[1]}/v3")
        client.issue_with(identity_body("password", AUTH), trust_scope("t1"))
        assert len(keystone.requests) == 1
        body = keystone.requests[0]["body"]["auth"]
    assert body["scope"] == {"OS-TRUST:trust": {"id": "t1"}}
    assert body["identity"]["methods"] == ["password"]


def test_a_passcode_given_as_a_secret_never_reaches_an_error() -> None:
    fake = FakeKeystone(track_tokens=False)
    # Keystone's answer echoes what it was sent
    fake.reply = {"status": 401, "body": {"error": {"message": f"bad {PASSWORD} 654321"}}}
    with serving(fake) as keystone:
        client = TokenClient(f"http://127.0.0.1:{keystone.server_address[1]}/v3")
        identity = password_totp_identity(AUTH, "654321")
        with pytest.raises(TokenRequestError) as raised:
            client.issue_with(identity, None, secrets=[PASSWORD, "654321"])
    assert raised.value.status == 401
    assert "654321" not in str(raised.value) and PASSWORD not in str(raised.value)


def test_each_user_is_trusted_by_the_next_user_of_its_project() -> None:
    users = [{"id": f"u{i}", "tenant_id": f"p{i // 2}"} for i in range(4)]
    pairs = [(a["id"], b["id"]) for a, b in trust_pairs(users)]
    assert pairs == [("u1", "u0"), ("u0", "u1"), ("u3", "u2"), ("u2", "u3")]
