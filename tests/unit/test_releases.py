"""Older Keystone releases: the date that limits their dependencies, and where pip looks."""

from __future__ import annotations

from rally_keystone_bench.deploy import releases, venv


def test_a_pinned_older_release_is_limited_to_its_day():
    assert releases.cutoff("keystone==24.0.0") == "2023-10-04T11:12:02Z"
    assert releases.cutoff(" keystone == 28.0.0 ") == "2025-10-01T10:52:11Z"


def test_the_newest_a_range_and_a_checkout_are_not_limited():
    assert releases.cutoff("keystone==30.0.0") is None
    assert releases.cutoff("keystone>=28") is None
    assert releases.cutoff("keystone") is None
    assert releases.cutoff("/src/keystone") is None


def test_pip_reads_pypi_alone_and_keeps_the_ca_bundle():
    args = releases.pypi_only({"PIP_CERT": "/etc/ssl/ca.crt"})
    assert args == ["--isolated", "--index-url", releases.PYPI, "--cert", "/etc/ssl/ca.crt"]
    assert "--cert" not in releases.pypi_only({})


def test_a_dated_build_never_reuses_an_environment_built_without_the_date():
    slug = venv.env_slug("keystone==28.0.0")
    assert "uploaded-prior-to" in slug
    assert "uploaded-prior-to" not in venv.env_slug("keystone==30.0.0")


def test_uv_is_given_the_ca_bundle_pip_was_given(monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.setenv("PIP_CERT", "/etc/ssl/ca.crt")
    assert venv._uv_env()["SSL_CERT_FILE"] == "/etc/ssl/ca.crt"
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ssl/mine.crt")  # uv's own setting wins
    assert venv._uv_env()["SSL_CERT_FILE"] == "/etc/ssl/mine.crt"
