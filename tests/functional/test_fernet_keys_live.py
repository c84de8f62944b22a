"""Active Fernet keys on a real Keystone: --set fernet_tokens.max_active_keys=N starts
Keystone with N keys, and Keystone signs with the newest and validates with them."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet, InvalidToken

from rally_keystone_bench.clients.tokens import TokenClient, UserAuth
from rally_keystone_bench.deploy import fernet
from rally_keystone_bench.deploy.keystone import Deployment, LocalKeystone

pytestmark = pytest.mark.functional


def decrypts(key_file: Path, token: str) -> bool:
    padded = token + "=" * (-len(token) % 4)  # Keystone strips Fernet's base64 padding
    try:
        Fernet(key_file.read_bytes().strip()).decrypt(padded.encode())
    except InvalidToken:
        return False
    return True


def test_a_keystone_with_12_keys_holds_12_and_signs_with_the_newest(tmp_path: Path) -> None:
    dep = Deployment(
        workers=1, password_hash_rounds=4, conf={"fernet_tokens.max_active_keys": "12"}
    )
    with LocalKeystone(dep, tmp_path / "ks") as ks:
        keys = fernet.key_files(tmp_path / "ks" / "fernet-keys")
        # 0 is the staged key, 11 the primary: fernet_setup's two and ten rotations.
        assert [k.name for k in keys] == [str(i) for i in range(12)]
        client = TokenClient(ks.auth_url)
        auth = UserAuth.from_credential(ks.admin_credentials)
        issued = client.issue(auth, include_catalog=False)
        assert issued.status == 201 and issued.token is not None
        token = issued.token.value
        assert [k.name for k in keys if decrypts(k, token)] == ["11"]
        client.authorize(auth)
        assert client.validate(issued.token).status == 200
        assert client.check(issued.token).status == 200
        log = (tmp_path / "ks" / "keystone-manage-fernet_rotate.log").read_text()
        assert "Traceback" not in log
