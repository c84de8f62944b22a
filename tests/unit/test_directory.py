"""The LDAP directory and Keystone's LDAP settings, without starting slapd or Keystone."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import stat

import pytest
from _packages import require_package

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import directory
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.errors import BenchError


def test_slapd_config_is_mdb_with_our_suffix_and_no_root_password(tmp_path):
    d = directory.Directory(tmp_path, 38999)
    conf = d.render_config()
    assert "database mdb" in conf
    assert f'suffix "{directory.SUFFIX}"' in conf
    assert f"directory {tmp_path.resolve() / 'data'}" in conf
    assert not any(ln.startswith("rootpw") for ln in conf.splitlines())
    assert "TLSCertificateFile" not in conf
    assert d.url == "ldap://127.0.0.1:38999"


def test_tls_directory_serves_ldaps_with_the_runs_certificate(tmp_path):
    d = directory.Directory(tmp_path, 38999, tls=True)
    assert d.url == "ldaps://127.0.0.1:38999"
    assert f"TLSCertificateFile {d.cert_path}" in d.render_config()
    (tmp_path / "service-password").write_text("s3cret\n")
    conf = directory.keystone_domain_config(d, True)
    assert f"tls_cacertfile = {d.cert_path}" in conf
    assert "url = ldaps://127.0.0.1:38999" in conf


def test_ssha_is_what_slapd_verifies():
    value = directory.ssha("pw")
    raw = base64.b64decode(value[len("{SSHA}") :])
    digest, salt = raw[:20], raw[20:]
    assert value.startswith("{SSHA}") and hashlib.sha1(b"pw" + salt).digest() == digest
    assert directory.ssha("pw") != value  # salted


def test_ldif_holds_hashed_passwords_only():
    ldif = directory.render_ldif("service-pw", [("ldapuser0001", "user-pw")])
    assert "uid=ldapuser0001,ou=Users," in ldif
    assert "user-pw" not in ldif and "service-pw" not in ldif
    assert ldif.count("userPassword: {SSHA}") == 2


@pytest.mark.parametrize(
    "pool,expected",
    [(False, "false"), (True, "true")],
)
def test_pool_setting_sets_both_pools_explicitly(tmp_path, pool, expected):
    d = directory.Directory(tmp_path, 38999)
    (tmp_path / "service-password").write_text("s3cret\n")
    conf = directory.keystone_domain_config(d, pool, pool_size=3, auth_pool_size=7)
    assert f"use_pool = {expected}\n" in conf
    assert f"use_auth_pool = {expected}\n" in conf
    assert "pool_size = 3\n" in conf and "auth_pool_size = 7\n" in conf
    assert "driver = ldap" in conf


def test_default_pool_setting_leaves_keystones_defaults(tmp_path):
    d = directory.Directory(tmp_path, 38999)
    (tmp_path / "service-password").write_text("s3cret\n")
    conf = directory.keystone_domain_config(d, None)
    assert "use_pool" not in conf and "pool_size" not in conf


def test_accepts_are_counted_from_slapds_log_within_a_window(tmp_path):
    log = tmp_path / "slapd.log"
    t = 0x6B035248

    def line(sec: int, text: str) -> str:
        return f"{sec:08x}.1f3d3630 0x7f486d9fe6c0 {text}\n"

    log.write_text(
        line(t, "conn=1000 fd=11 ACCEPT from IP=127.0.0.1:45104 (IP=127.0.0.1:38911)")
        + line(t, "conn=1000 op=0 BIND dn=x method=128")
        + line(t + 10, "conn=1001 fd=12 ACCEPT from IP=127.0.0.1:45105 (IP=127.0.0.1:38911)")
        + line(t + 20, "conn=1002 fd=13 ACCEPT from IP=127.0.0.1:45106 (IP=127.0.0.1:38911)")
    )
    assert directory.count_accepts(log) == 3
    assert directory.count_accepts(log, t + 5, t + 15) == 1
    assert directory.count_accepts(log, t + 5) == 2
    assert directory.count_accepts(tmp_path / "missing.log") == 0


def test_keystone_conf_enables_domain_configs_and_env_gets_the_ldap_extra(tmp_path):
    ks = LocalKeystone(Deployment(identity="ldap"), tmp_path)
    conf = ks._render_config()
    assert "domain_specific_drivers_enabled = true" in conf
    assert f"domain_config_dir = {ks.domain_config_dir}" in conf
    assert {"python-ldap", "ldappool", "six"} <= set(ks.deployment.extra_packages())
    sql = LocalKeystone(Deployment(), tmp_path)
    assert "domain_specific" not in sql._render_config()
    assert "python-ldap" not in sql.deployment.extra_packages()


def test_domain_config_file_is_private(tmp_path):
    ks = LocalKeystone(Deployment(identity="ldap", ldap_pool=False), tmp_path)
    ks.ldap_port = 38999
    (tmp_path / "ldap").mkdir()
    (tmp_path / "ldap" / "service-password").write_text("s3cret\n")
    ks._write_domain_config()
    path = ks.domain_config_dir / "keystone.LDAP.conf"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "use_pool = false" in path.read_text()


def test_describe_records_the_pool_settings():
    dep = Deployment(identity="ldap", ldap_pool=False, ldap_tls=True, ldap_pool_size=5)
    assert "ldaps pool=off pool_size=5" in dep.describe()
    assert "ldap" not in Deployment().describe()


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--ldap-pool", "on"], "--ldap-pool needs --identity ldap"),
        (["--ldap-tls"], "--ldap-tls needs --identity ldap"),
        (["--identity", "sql", "--ldap-pool-size", "3"], "--ldap-pool-size needs --identity ldap"),
        (["--identity", "ldap", "--ldap-pool-size", "0"], "--ldap-pool-size must be at least 1"),
    ],
)
def test_ldap_options_are_refused_in_one_line_before_anything_starts(tmp_path, capsys, argv, words):
    run_dir = tmp_path / "run"
    rc = cli.main(["keystone", "up", "--run-dir", str(run_dir), *argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert words in err and len(err.strip().splitlines()) == 1
    assert not run_dir.exists()


def test_identity_ldap_without_slapd_is_refused_naming_the_package(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH where slapd is not
    run_dir = tmp_path / "run"
    rc = cli.main(["keystone", "up", "--identity", "ldap", "--run-dir", str(run_dir)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "slapd is not installed" in err and "apt-get install slapd" in err
    assert len(err.strip().splitlines()) == 1
    assert not run_dir.exists()


def test_a_taken_ldap_port_is_refused(tmp_path, capsys):
    if directory._find("slapd") is None:
        require_package("slapd", "slapd", "ldap-utils")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run_dir = tmp_path / "run"
        argv = ["keystone", "up", "--identity", "ldap", "--ldap-port", str(port)]
        rc = cli.main([*argv, "--run-dir", str(run_dir)])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"port {port} on 127.0.0.1 is already in use" in err
    assert len(err.strip().splitlines()) == 1
    assert not run_dir.exists()


def test_slapd_is_found_in_the_sbin_beside_a_bin_on_path(tmp_path, monkeypatch):
    sbin = tmp_path / "usr" / "sbin"
    sbin.mkdir(parents=True)
    fake = sbin / "slapd"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    (tmp_path / "usr" / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "usr" / "bin"))
    assert directory.executable() == str(fake)


def test_bad_identity_is_refused():
    with pytest.raises(BenchError, match="identity must be one of sql, ldap"):
        Deployment(identity="kerberos").validate()
