"""OSprofiler's signed trace headers, built without osprofiler; the run's trace key."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import stat

from rally_keystone_bench.clients import tracing
from rally_keystone_bench.deploy import tracing as deploy_tracing


def unpack(info: str, signature: str, key: str) -> dict | None:
    """osprofiler._utils.signed_unpack, as Keystone's middleware checks a request."""
    expected = hmac.new(key.encode(), info.encode(), hashlib.sha1).hexdigest()
    if not hmac.compare_digest(signature, expected):
        return None
    return json.loads(base64.urlsafe_b64decode(info))


def test_headers_verify_under_the_key_only():
    headers = tracing.signed_headers("k3y", base_id="b-1")
    info, signature = headers["X-Trace-Info"], headers["X-Trace-HMAC"]
    assert unpack(info, signature, "k3y") == {"base_id": "b-1", "parent_id": "b-1"}
    assert unpack(info, signature, "other") is None


def test_sampler_spreads_the_rate_evenly():
    every = tracing.Sampler("k", 1.0)
    assert all(every.headers() for _ in range(10))
    quarter = tracing.Sampler("k", 0.25)
    picked = [bool(quarter.headers()) for _ in range(12)]
    assert picked == [False, False, False, True] * 3
    none = tracing.Sampler("k", 0.0)
    assert not any(none.headers() for _ in range(10))
    assert "k" not in repr(quarter).replace("Sampler", "")


def test_from_environment(tmp_path):
    assert tracing.from_environment({}) is None
    key = tmp_path / "key"
    key.write_text("secret\n")
    sampler = tracing.from_environment({tracing.KEY_FILE_ENV: str(key), tracing.RATE_ENV: "0.5"})
    assert sampler is not None and sampler.rate == 0.5
    assert tracing.from_environment({tracing.KEY_FILE_ENV: str(tmp_path / "gone")}) is None


def test_run_key_is_private_and_removed(tmp_path):
    deploy_tracing.prepare(tmp_path)
    key = deploy_tracing.key_path(tmp_path)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    conf = tmp_path / "keystone.conf"
    secret = deploy_tracing.config(tmp_path)["hmac_key"]
    conf.write_text(f"[profiler]\nhmac_keys = {secret}\n")
    with deploy_tracing.client_environment(tmp_path, rate=0.5):
        assert os.environ[tracing.KEY_FILE_ENV] == str(key)
    assert tracing.KEY_FILE_ENV not in os.environ
    assert deploy_tracing.remove(tmp_path, conf)
    assert not key.exists() and not deploy_tracing.store_path(tmp_path).exists()
    assert secret not in conf.read_text()


def test_the_sample_is_spread_per_request_kind():
    """A client alternating issue and validate: every fourth of each, not every second issue."""
    quarter = tracing.Sampler("k", 0.25)
    picked = [(verb, bool(quarter.headers(verb))) for _ in range(8) for verb in ("POST", "GET")]
    assert sum(p for v, p in picked if v == "POST") == 2
    assert sum(p for v, p in picked if v == "GET") == 2


def test_only_timed_requests_are_signed(monkeypatch):
    """A request no timer measures (a token to validate, a rescope's source token) is
    not evidence of an atomic action: unsigned, it is neither traced nor counted as
    its workload's, and takes no place in the sample."""
    from fake_keystone import FakeKeystone, serving

    from rally_keystone_bench.clients.auth import UserAuth
    from rally_keystone_bench.clients.tokens import TokenClient

    auth = UserAuth(username="alice", password="pw-Secret-4711", project_name="demo")
    with serving(FakeKeystone()) as server:
        client = TokenClient(f"http://127.0.0.1:{server.server_address[1]}/v3")
        client._tracer = tracing.Sampler("k3y", 0.5)
        client.authorize(auth)  # untimed
        source = client.issue(auth, scope="unscoped").token  # untimed
        timed = [client.issue(auth, timer=contextlib.nullcontext) for _ in range(4)]
        client.validate(timed[0].token)  # untimed
        client.validate(timed[0].token, timer=contextlib.nullcontext)
        client.validate(timed[1].token, timer=contextlib.nullcontext)
        assert source is not None
        signed = [(r["method"], tracing.X_TRACE_HMAC in r["headers"]) for r in server.requests]
    assert signed == [
        ("POST", False),
        ("POST", False),
        *[("POST", False), ("POST", True)] * 2,  # rate 0.5 over the timed issues only
        ("GET", False),
        ("GET", False),
        ("GET", True),
    ]
