"""A history store that cannot be written is said to be so, with the why (issue 45, item 8).

It was reported as "not a SQLite store (unable to open database file)".
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from rally_keystone_bench.history import store

OPEN = textwrap.dedent(
    """
    import sys
    from rally_keystone_bench.errors import BenchError
    from rally_keystone_bench.history import store
    try:
        store.Store.open(sys.argv[1]).close()
    except BenchError as exc:
        print(exc)
    """
)


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root")
def test_a_store_on_a_read_only_file_system_could_not_be_written(tmp_path):
    path = tmp_path / "h.db"
    store.Store.open(str(path)).close()  # a valid store, then the disk turns read-only
    d = str(tmp_path)
    script = f'mount --bind {d} {d} && mount -o remount,ro,bind {d} && exec "$@"'
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-c", OPEN, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.strip() == (
        f"--history {path}: could not be written: it is on a read-only file system "
        "(unable to open database file)"
    ), proc.stderr


def test_a_read_only_file_or_directory_is_named(tmp_path):
    path = tmp_path / "h.db"
    store.Store.open(str(path)).close()
    said = sqlite3.OperationalError("attempt to write a readonly database")
    path.chmod(0o444)
    assert store._unwritable(path, said) == "the file is read-only (mode 444)"
    path.chmod(0o644)
    tmp_path.chmod(0o555)
    try:
        assert store._unwritable(path, said) == (
            f"its directory {tmp_path} is read-only (SQLite writes beside the file)"
        )
    finally:
        tmp_path.chmod(0o755)
    assert store._unwritable(path, sqlite3.DatabaseError("file is not a database")) is None
