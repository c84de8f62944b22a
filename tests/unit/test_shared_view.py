"""Apache's user reaches what it serves without any directory's mode changing (issue 45, item 3).

Started as root, Apache's daemon processes run as another user. The tool
once added o+x to /root and ~/.cache for it; now the directories above the
run directory, Keystone's environment and its Python are opened in Apache's
own mount namespace only. Real mounts, real user: root only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rally_keystone_bench.deploy import servers, shared_view
from rally_keystone_bench.deploy.site import Site
from rally_keystone_bench.errors import BenchError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="Apache drops to another user as root")


def modes_above(*paths: Path) -> dict[Path, int]:
    return {p: p.stat().st_mode for path in paths for p in [path, *path.parents]}


def test_apache_as_root_changes_no_mode_and_its_user_reads_through_closed_dirs(tmp_path):
    closed = tmp_path / "closed"  # as /root is: others may not traverse it
    run_dir = closed / "deep" / "ks"
    run_dir.mkdir(parents=True)
    closed.chmod(0o700)
    venv = Path(sys.prefix)  # this test's environment stands in for Keystone's
    site = Site("apache", 5000, 1, 1, run_dir, run_dir / "k.conf", run_dir / "s.log",
                run_dir / "a.log", venv)  # fmt: skip
    before = modes_above(run_dir, venv, Path(os.path.realpath(venv / "bin" / "python")))
    try:
        argv = servers.apache_command(site)
        assert modes_above(*before) == before
        assert argv[0] == "unshare" and any(a.endswith("/mod_wsgi-express") for a in argv)
        user = argv[argv.index("--user") + 1]
        # The same namespace, with a reader as Apache's user instead of Apache.
        head = argv[: argv.index("keystone-bench-apache") + 1]
        stdlib = Path(os.__file__).resolve()
        for wanted in (run_dir / "keystone-api.wsgi", stdlib):
            read = subprocess.run(
                [*head, "runuser", "-u", user, "--", "head", "-c", "1", str(wanted)],
                capture_output=True,
                timeout=30,
            )
            assert read.returncode == 0, read.stderr
        outside = subprocess.run(
            ["runuser", "-u", user, "--", "head", "-c", "1", str(run_dir / "keystone-api.wsgi")],
            capture_output=True,
        )
        assert outside.returncode != 0  # closed outside the namespace, as it was
        assert modes_above(*before) == before
    finally:
        shared_view.remove(run_dir)
        closed.chmod(0o755)
    assert not shared_view.stage_dir(run_dir).exists()


def test_without_a_mount_namespace_apache_as_root_is_refused_in_one_line(tmp_path, monkeypatch):
    """A container without CAP_SYS_ADMIN: no mode is changed instead, and nothing starts."""
    closed = tmp_path / "closed"
    run_dir = closed / "ks"
    run_dir.mkdir(parents=True)
    closed.chmod(0o700)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "unshare").write_text(
        "#!/bin/sh\necho 'unshare failed: Operation not permitted' >&2\nexit 1\n"
    )
    (bin_dir / "unshare").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    site = Site("apache", 5000, 1, 1, run_dir, run_dir / "k.conf", run_dir / "s.log",
                run_dir / "a.log", Path(sys.prefix))  # fmt: skip
    try:
        with pytest.raises(BenchError, match="unshare: unshare failed: Operation not permitted"):
            shared_view.wrap(["mod_wsgi-express"], site)
        assert closed.stat().st_mode & 0o777 == 0o700
        assert not shared_view.stage_dir(run_dir).exists()
    finally:
        closed.chmod(0o755)
