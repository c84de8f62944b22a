"""Active Fernet keys: which deployments ask for a full repository, and where it lives."""

from __future__ import annotations

import pytest

from rally_keystone_bench.deploy import fernet
from rally_keystone_bench.errors import BenchError


def test_only_a_deployment_that_sets_max_active_keys_asks_for_keys():
    assert fernet.wanted({}) is None
    assert fernet.wanted({"token.provider": "fernet"}) is None
    assert fernet.wanted({"fernet_tokens.max_active_keys": "100"}) == 100
    with pytest.raises(BenchError, match="max_active_keys=many: must be an integer"):
        fernet.wanted({"fernet_tokens.max_active_keys": "many"})


def test_the_repository_is_the_run_directorys_unless_conf_moves_it(tmp_path):
    assert fernet.repository({}, tmp_path) == tmp_path / "fernet-keys"
    moved = {"fernet_tokens.key_repository": "/srv/keys"}
    assert str(fernet.repository(moved, tmp_path)) == "/srv/keys"


def test_key_files_are_the_numbered_files_only(tmp_path):
    for name in ("0", "1", "12", ".tmp", "README"):
        (tmp_path / name).write_text("k")
    assert [p.name for p in fernet.key_files(tmp_path)] == ["0", "1", "12"]


def test_a_repository_at_or_below_setups_two_keys_is_not_rotated(tmp_path):
    """fill() never starts Keystone's Python for a size fernet_setup already gives."""
    keys = tmp_path / "fernet-keys"
    keys.mkdir()
    for name in ("0", "1"):
        (keys / name).write_text("k")
    conf = {"fernet_tokens.max_active_keys": "2"}
    assert fernet.fill("/nonexistent/python", tmp_path / "k.conf", conf, tmp_path, {}) == 2
    assert fernet.fill("/nonexistent/python", tmp_path / "k.conf", {}, tmp_path, {}) is None
