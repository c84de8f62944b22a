"""--db-storage disk|tmpfs: refusals before anything starts, where the files go, the device."""

from __future__ import annotations

from pathlib import Path

import pytest

from rally_keystone_bench.deploy import storage
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.errors import BenchError


def test_mysql_on_tmpfs_is_refused_with_the_reason_and_a_way_out():
    with pytest.raises(BenchError, match="not supported with --db mysql.*use --db postgresql"):
        storage.check("tmpfs", "mysql", None)


def test_a_private_postgresql_cannot_also_take_a_server_url():
    with pytest.raises(BenchError, match="drop --db-url"):
        storage.check("tmpfs", "postgresql", "postgresql://postgres@127.0.0.1:5432")


def test_an_unknown_storage_is_refused_by_name():
    with pytest.raises(BenchError, match="db storage must be one of disk, tmpfs, not 'ssd'"):
        storage.check("ssd", "sqlite", None)


def test_sqlite_on_tmpfs_lives_in_its_own_dev_shm_directory(tmp_path):
    ks = LocalKeystone(Deployment(db_storage="tmpfs"), tmp_path / "a")
    other = LocalKeystone(Deployment(db_storage="tmpfs"), tmp_path / "b")
    assert ks.sqlite_path.parent.parent == Path("/dev/shm")
    assert ks.sqlite_path.parent != other.sqlite_path.parent
    assert LocalKeystone(Deployment(), tmp_path).sqlite_path == tmp_path / "keystone.db"


def test_the_description_names_the_storage_device():
    assert "db on tmpfs" in Deployment(db_storage="tmpfs").describe()
    on_disk = Deployment().storage_device()
    assert on_disk == "tmpfs" or "rotational" in on_disk or "(" in on_disk
    assert storage.device_of(Path("/dev/shm")) == "tmpfs"
