"""--set on a real Keystone: JWS tokens issue and validate; a bad option starts nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rally_keystone_bench.clients.tokens import TokenClient, UserAuth
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone

pytestmark = pytest.mark.functional

BENCH = [sys.executable, "-m", "rally_keystone_bench.cli"]


def test_a_jws_deployment_issues_and_validates_jws_tokens(tmp_path: Path) -> None:
    dep = Deployment(
        workers=1, password_hash_rounds=4, conf={"token.provider": "jws", "token.expiration": "900"}
    )
    with LocalKeystone(dep, tmp_path / "ks") as ks:
        assert "token.provider=jws" in dep.describe()
        assert (tmp_path / "ks" / "jws-keys" / "public" / "public.pem").exists()
        client = TokenClient(ks.auth_url)
        auth = UserAuth.from_credential(ks.admin_credentials)
        issued = client.issue(auth, include_catalog=False)
        assert issued.status == 201
        assert issued.token is not None and issued.token.value.startswith("eyJ")  # a JWT
        client.authorize(auth)
        assert client.validate(issued.token).status == 200
        assert client.check(issued.token).status == 200


def test_an_unknown_option_exits_2_naming_it_before_anything_starts(tmp_path: Path) -> None:
    run_dir = tmp_path / "ks"
    proc = subprocess.run(
        [*BENCH, "keystone", "up", "--run-dir", str(run_dir), "--set", "token.provder=jws"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "keystone-bench: --set token.provder: [token] has no option 'provder' "
        "(did you mean provider?)"
    ]
    assert not (run_dir / "keystone.conf").exists()
    assert not (run_dir / "state.json").exists()
