"""A test whose Debian package is missing: skipped with the install command, failed in CI."""

import pytest
from _packages import require_package

MISSING = "keystone-bench-no-such-command"


def test_missing_package_skips_with_the_install_command(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as info:
        require_package(MISSING, "no-such-pkg", "no-such-dev")
    expected = f"{MISSING} is not installed (apt-get install no-such-pkg no-such-dev)"
    assert str(info.value.msg) == expected


def test_missing_package_fails_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as info:
        require_package(MISSING, "no-such-pkg")
    assert "apt-get install no-such-pkg" in str(info.value.msg)
    assert "bindep.txt" in str(info.value.msg)


def test_installed_command_gives_its_path(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert require_package("sh", "dash").endswith("/sh")
