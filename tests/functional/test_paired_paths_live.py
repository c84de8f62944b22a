"""KeystoneTokens.paired's trust and password + TOTP paths on a real Keystone.

The gate's sides have only their admin: the trust path makes a trustee user
and a trust from the admin, the totp path enrols a TOTP credential for the
admin, once per process and side; after that each pair is one timed
POST /v3/auth/tokens (or GET to validate) per side, and Keystone accepts it.
"""

from __future__ import annotations

import contextlib
import time
import types
from collections import Counter
from pathlib import Path

import pytest
from test_scenarios_live import access_lines

from rally_keystone_bench.clients import credentials
from rally_keystone_bench.deploy.keystone import Deployment, LocalKeystone
from rally_keystone_bench.plugins.scenarios import paired
from rally_keystone_bench.verbs import gate

pytestmark = pytest.mark.functional


def logged(ks: LocalKeystone, window: tuple[float, float]) -> Counter:
    """The requests of WINDOW in Keystone's access log, once it has written them.

    Slack: the server writes its access log a moment after it answers; up
    to 10 s is waited for the first line, then 1 s more for any other.
    """
    deadline = time.monotonic() + 10
    while not access_lines(ks, window) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    return access_lines(ks, window)


def test_trust_and_totp_pairs_are_one_timed_request_each(tmp_path: Path) -> None:
    methods = gate.CLOUD_CONF[0].split("=", 1)[1]
    dep = Deployment(workers=1, password_hash_rounds=4, conf={"auth.methods": methods})
    with LocalKeystone(dep, tmp_path / "ks") as ks:
        openrc = tmp_path / "openrc"
        openrc.write_text(credentials.openrc_text(ks.admin_credentials))
        cred = paired.read_openrc(str(openrc))
        timed: Counter = Counter()
        scenario = types.SimpleNamespace(
            _timer=lambda name: lambda: (timed.update([name]), contextlib.nullcontext())[1]
        )
        calls = {
            "trust": lambda: paired.Paired._issue(
                scenario, "baseline", cred, "project", True, "trust"
            ),
            "totp": lambda: paired.Paired._issue(
                scenario, "baseline", cred, "project", True, "totp"
            ),
            "validate trust": lambda: paired.Paired._validate(
                scenario, "baseline", cred, "trust", "GET", False
            ),
        }
        for name, call in calls.items():
            call()  # the first call also prepares the path (trustee, trust, credential)
            timed.clear()
            began = time.time()
            call()
            ended = time.time()
            seen = logged(ks, (began, ended))
            assert sum(timed.values()) == 1, name
            assert sum(seen.values()) == 1, (name, seen)
        assert seen == {("GET", "/v3/auth/tokens?nocatalog=1"): 1} or seen == {
            ("GET", "/v3/auth/tokens?nocatalog"): 1
        }, seen
