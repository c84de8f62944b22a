"""TokenClient against a small Keystone-shaped HTTP server run by the test."""

from __future__ import annotations

import contextlib
import logging
import socket
from datetime import datetime, timezone

import pytest
from fake_keystone import EXPIRES, FakeKeystone, serving

from rally_keystone_bench.clients import session as client_session
from rally_keystone_bench.clients.auth import UserAuth
from rally_keystone_bench.clients.session import identity_v3_url
from rally_keystone_bench.clients.tokens import (
    Token,
    TokenClient,
    TokenRequestError,
    TokenResult,
    scrub,
)

PASSWORD = "pw-Secret-4711"
ISSUED = "gAAAAABissued" + "x" * 120
ADMIN = "gAAAAABadmin0" + "y" * 120
SUBJECT = "gAAAAABsubjct" + "z" * 120


@pytest.fixture
def keystone():
    # every token the same (ISSUED), and every token valid: these tests are about the client
    with serving(FakeKeystone(fixed_token=ISSUED, track_tokens=False)) as server:
        yield server


@pytest.fixture
def client(keystone):
    return TokenClient(f"http://127.0.0.1:{keystone.server_address[1]}/v3")


AUTH = UserAuth(username="alice", password=PASSWORD, project_name="demo")


def test_issue_sends_one_password_request_and_returns_what_a_benchmark_needs(keystone, client):
    result = client.issue(AUTH)

    assert len(keystone.requests) == 1
    req = keystone.requests[0]
    assert (req["method"], req["path"]) == ("POST", "/v3/auth/tokens")
    assert "X-Auth-Token" not in req["headers"]
    identity = req["body"]["auth"]["identity"]
    assert identity["methods"] == ["password"]
    assert identity["password"]["user"] == {
        "name": "alice",
        "domain": {"name": "Default"},
        "password": PASSWORD,
    }
    assert req["body"]["auth"]["scope"] == {
        "project": {"name": "demo", "domain": {"name": "Default"}}
    }
    assert result.status == 201
    assert result.token_id == ISSUED[:8] and len(result.token_id) == 8
    assert result.expires_at == EXPIRES
    assert result.catalog_size == 2
    assert result.method == "password"
    assert result.scope == "project"
    assert result.user_id == "u1"
    assert result.elapsed > 0
    assert result.token.value == ISSUED


@pytest.mark.parametrize(
    "scope, expected",
    [
        ("domain", {"domain": {"name": "Default"}}),
        ("system", {"system": {"all": True}}),
        ("unscoped", "unscoped"),
    ],
)
def test_issue_scopes(keystone, client, scope, expected):
    client.issue(AUTH, scope=scope)
    assert keystone.requests[0]["body"]["auth"]["scope"] == expected


def test_issue_without_catalog_asks_for_nocatalog(keystone, client):
    result = client.issue(AUTH, include_catalog=False)
    assert keystone.requests[0]["path"] == "/v3/auth/tokens?nocatalog=1"
    assert result.catalog_size is None


def test_rescope_sends_the_token_method(keystone, client):
    result = client.issue(AUTH, method="token", token=Token(SUBJECT))
    identity = keystone.requests[0]["body"]["auth"]["identity"]
    assert identity == {"methods": ["token"], "token": {"id": SUBJECT}}
    assert result.method == "token"


def test_application_credential_sends_no_scope(keystone, client):
    auth = UserAuth(application_credential_id="ac1", application_credential_secret="s3")
    client.issue(auth, method="application_credential", scope="project")
    sent = keystone.requests[0]["body"]["auth"]
    assert sent["identity"]["application_credential"] == {"id": "ac1", "secret": "s3"}
    assert "scope" not in sent


def test_validate_check_revoke_send_one_request_each_with_both_tokens(keystone, client):
    client.use_auth_token(ADMIN)
    validated = client.validate(SUBJECT, include_catalog=False, allow_expired=True)
    checked = client.check(SUBJECT)
    revoked = client.revoke(Token(SUBJECT))

    sent = [(r["method"], r["path"]) for r in keystone.requests]
    assert sent[0][0] == "GET" and sent[0][1].startswith("/v3/auth/tokens?")
    assert set(sent[0][1].split("?")[1].split("&")) == {"nocatalog=1", "allow_expired=1"}
    assert sent[1:] == [("HEAD", "/v3/auth/tokens"), ("DELETE", "/v3/auth/tokens")]
    for req in keystone.requests:
        assert req["headers"]["X-Auth-Token"] == ADMIN
        assert req["headers"]["X-Subject-Token"] == SUBJECT
    assert (validated.status, checked.status, revoked.status) == (200, 200, 204)
    assert validated.token_id == SUBJECT[:8]
    assert validated.expires_at == EXPIRES and validated.method == "password"


def test_calls_reuse_one_kept_alive_connection(keystone, client):
    client.use_auth_token(ADMIN)
    for _ in range(3):
        client.issue(AUTH)
        client.validate(SUBJECT)
        client.check(SUBJECT)
    assert len(keystone.requests) == 9
    assert keystone.connections == 1


def test_fresh_connection_opens_one_connection_per_request(keystone):
    client = TokenClient(f"http://127.0.0.1:{keystone.server_address[1]}", fresh_connection=True)
    for _ in range(4):
        client.issue(AUTH)
    assert len(keystone.requests) == 4
    assert keystone.connections == 4


def test_timer_is_entered_once_around_the_request(keystone, client):
    events = []

    @contextlib.contextmanager
    def timer():
        events.append(("enter", len(keystone.requests)))
        yield
        events.append(("exit", len(keystone.requests)))

    client.issue(AUTH, timer=timer)
    assert events == [("enter", 0), ("exit", 1)]


def test_failed_request_marks_the_timer_failed(keystone, client):
    keystone.reply = {"status": 401, "body": {"error": {"code": 401, "message": "nope"}}}
    seen = []

    @contextlib.contextmanager
    def timer():
        try:
            yield
        except TokenRequestError as exc:
            seen.append(exc.status)
            raise

    with pytest.raises(TokenRequestError):
        client.issue(AUTH, timer=timer)
    assert seen == [401]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 500, 503])
def test_non_2xx_raises_one_error_type_with_status_and_keystones_message(keystone, client, status):
    message = f"Keystone says {status}"
    keystone.reply = {"status": status, "body": {"error": {"code": status, "message": message}}}
    with pytest.raises(TokenRequestError) as caught:
        client.issue(AUTH)
    assert caught.value.status == status
    assert caught.value.message == message
    assert f"HTTP {status}" in str(caught.value)


def test_error_without_a_json_body_still_carries_the_status(keystone, client):
    client.use_auth_token(ADMIN)
    keystone.reply = {"status": 404, "body": None}
    with pytest.raises(TokenRequestError) as caught:
        client.check(SUBJECT)
    assert caught.value.status == 404


def test_error_messages_never_show_a_password_or_a_token(keystone, client):
    client.use_auth_token(ADMIN)
    echo = f"bad {PASSWORD} for {SUBJECT} by {ADMIN} and gAAAAAB{'q' * 60}"
    keystone.reply = {"status": 401, "body": {"error": {"code": 401, "message": echo}}}
    texts = []
    for call in (lambda: client.issue(AUTH), lambda: client.validate(SUBJECT)):
        with pytest.raises(TokenRequestError) as caught:
            call()
        texts += [str(caught.value), repr(caught.value), caught.value.message]
        texts += [str(a) for a in caught.value.args]
    for text in texts:
        assert "bad <redacted> for <redacted>" in text or "bad" not in text
        for secret in (PASSWORD, SUBJECT, ADMIN, "gAAAAAB" + "q" * 60):
            assert secret not in text


def test_connection_refused_is_the_same_error_type():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = TokenClient(f"http://127.0.0.1:{port}/v3", timeout=2)
    with pytest.raises(TokenRequestError) as caught:
        client.issue(AUTH)
    assert caught.value.status == 0
    assert PASSWORD not in str(caught.value)


def test_validate_without_an_auth_token_says_so(keystone, client):
    with pytest.raises(TokenRequestError, match="authorize"):
        client.validate(SUBJECT)
    assert keystone.requests == []


def test_authorize_issues_once_then_reuses_its_token(keystone, client):
    first = client.authorize(AUTH)
    second = client.authorize(AUTH)
    assert first is second
    assert len(keystone.requests) == 1
    client.validate(SUBJECT)
    assert keystone.requests[-1]["headers"]["X-Auth-Token"] == ISSUED


def test_authorize_replaces_a_token_near_expiry(keystone, client):
    client.authorize(AUTH)
    client.authorize(AUTH, min_ttl=7200)  # one hour left is not enough
    assert len(keystone.requests) == 2


def test_reprs_and_logs_never_show_secrets(keystone, client, caplog):
    caplog.set_level(logging.DEBUG)
    result = client.issue(AUTH)
    client.use_auth_token(ADMIN)
    client.validate(SUBJECT)
    client.revoke(SUBJECT)
    shown = " ".join(
        [repr(result), str(result), repr(result.token), str(result.token), repr(AUTH), repr(client)]
    )
    shown += caplog.text
    for secret in (PASSWORD, ISSUED, ADMIN, SUBJECT):
        assert secret not in shown
    assert ISSUED[:8] in repr(result.token)


def test_token_seconds_left():
    token = Token(ISSUED, EXPIRES)
    # EXPIRES was an hour ahead when the module was imported, which may be long ago.
    expiry = datetime.strptime(EXPIRES, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert token.seconds_left(now=expiry.timestamp() - 3600) == pytest.approx(3600)
    assert token.seconds_left(now=expiry.timestamp() + 5) == pytest.approx(-5)
    assert Token(ISSUED).seconds_left() is None


def test_user_auth_from_a_rally_credential():
    credential = {
        "auth_url": "http://k/v3",
        "username": "bob",
        "password": PASSWORD,
        "tenant_name": "proj",
        "user_domain_name": "Users",
        "project_domain_name": "Projects",
    }
    auth = UserAuth.from_credential(credential)
    assert (auth.username, auth.password, auth.project_name) == ("bob", PASSWORD, "proj")
    assert (auth.user_domain_name, auth.project_domain_name) == ("Users", "Projects")
    assert PASSWORD not in repr(auth)


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://k:5000/v3", "http://k:5000/v3"),
        ("http://k:5000/v3/", "http://k:5000/v3"),
        ("http://k:5000", "http://k:5000/v3"),
        ("http://k/identity/v2.0", "http://k/identity/v3"),
    ],
)
def test_identity_v3_url_needs_no_discovery(url, expected):
    assert identity_v3_url(url) == expected


def test_unknown_method_or_scope_is_refused_before_sending(keystone, client):
    with pytest.raises(ValueError, match="method"):
        client.issue(AUTH, method="kerberos")
    with pytest.raises(ValueError, match="scope"):
        client.issue(AUTH, scope="galaxy")
    assert keystone.requests == []


def test_scrub():
    assert scrub(f"x {PASSWORD} y", [PASSWORD]) == "x <redacted> y"
    assert scrub(f"token {SUBJECT}.") == "token <redacted>."


def test_result_is_a_small_value_object():
    result = TokenResult("check", 200, 0.01, token_id="gAAAAABx")
    assert result.method is None and result.token is None


def test_a_deep_copied_context_shares_its_pooled_tokens():
    # Rally deep-copies the context before each iteration: the pool must not
    # be copied token by token (it was most of the generator's copy time).
    import copy

    from rally_keystone_bench.plugins.contexts.token_pool import SharedTokens

    token = Token(ISSUED, EXPIRES)
    pool = SharedTokens(u1=[token, token])
    context = {"token_pool": {"tokens": pool, "min_ttl": 600.0}, "iteration": 1}
    copied = copy.deepcopy(context)
    assert copied["token_pool"]["tokens"] is pool
    assert copy.deepcopy(token) is token and copy.copy(token) is token
    copied["iteration"] = 2
    assert context["iteration"] == 1


def test_the_environment_is_read_once_not_per_request(keystone, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    client = TokenClient(f"http://127.0.0.1:{keystone.server_address[1]}/v3")
    # no proxy for Keystone: token requests go straight over urllib3
    assert isinstance(client.session, client_session.DirectSession)
    remote = TokenClient("http://keystone.example:5000/v3")
    # through a proxy: keystoneauth and requests, the environment read once
    assert remote.session.session.trust_env is False
    assert remote.session.session.proxies["http"] == "http://proxy.invalid:3128"
    # NO_PROXY is honoured: the local client still reaches Keystone directly
    monkeypatch.delenv("NO_PROXY")
    assert client.issue(AUTH).status == 201


def test_requests_say_who_sends_them(keystone, client):
    client.issue(AUTH)
    assert keystone.requests[-1]["headers"]["User-Agent"].startswith(
        "rally-keystone-bench keystoneauth1/"
    )


@pytest.fixture
def tls_keystone(tmp_path):
    """The fake Keystone over TLS, with a self-signed certificate for 127.0.0.1."""
    import ssl
    import subprocess

    from _packages import require_package

    openssl = require_package("openssl", "openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    server = FakeKeystone(fixed_token=ISSUED, track_tokens=False)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with serving(server):
        yield f"https://127.0.0.1:{server.server_address[1]}/v3", str(cert)


def test_tls_is_checked_as_requests_checks_it(tls_keystone, monkeypatch):
    url, cert = tls_keystone
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    # the server's certificate as the CA file (a cloud's https_cacert)
    assert TokenClient(url, verify=cert).issue(AUTH).status == 201
    # the default CA bundle does not know a self-signed certificate
    with pytest.raises(TokenRequestError) as caught:
        TokenClient(url, timeout=5).issue(AUTH)
    assert caught.value.status == 0 and "CERTIFICATE_VERIFY_FAILED" in caught.value.message
    # https_insecure
    assert TokenClient(url, verify=False).issue(AUTH).status == 201
