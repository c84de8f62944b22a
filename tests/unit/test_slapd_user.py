"""slapd as openldap: it drops only where it can, and says why not (issue 27, item 13)."""

import os

import pytest

from rally_keystone_bench.deploy import directory

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not directory._has_user(directory.RUN_AS),
    reason="needs root and an openldap user (apt-get install slapd)",
)


def test_a_0700_run_directory_keeps_slapd_root_and_says_why(tmp_path):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    os.chmod(run, 0o700)
    d = directory.Directory(run / "ldap", 38999)
    assert d.run_as is None
    assert "-u" not in d.command()
    assert d.runs_as_root_because() == f"openldap cannot enter {run} (mode 700)"


def test_a_reachable_directory_drops_to_openldap(tmp_path):
    for p in [tmp_path, *tmp_path.parents]:
        if not p.stat().st_mode & 0o001:
            pytest.skip(f"{p} is not open to others here")
    d = directory.Directory(tmp_path / "ldap", 38999)
    assert d.run_as == "openldap"
    assert d.command()[-4:] == ["-u", "openldap", "-g", "openldap"]
    assert d.runs_as_root_because() is None
