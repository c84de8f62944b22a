"""A request whose worker died answers after request_timeout, not a server's 60-120 s."""

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import servers
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.errors import BenchError


def site(tmp_path, **kw):
    return servers.Site(
        "uwsgi", 5000, 2, 1, tmp_path, tmp_path / "k.conf", tmp_path / "s.log",
        tmp_path / "a.log", tmp_path, **kw,
    )  # fmt: skip


def test_the_router_gives_up_on_a_silent_worker(tmp_path):
    assert "http-timeout = 35" in servers.uwsgi_config(site(tmp_path))
    assert "http-timeout = 7" in servers.uwsgi_config(site(tmp_path, request_timeout=7))


def test_every_server_gives_up_after_the_same_timeout(tmp_path, monkeypatch):
    from rally_keystone_bench.deploy import nginx

    monkeypatch.setattr(servers.os, "geteuid", lambda: 1000)  # no Apache user to set up
    s = site(tmp_path, request_timeout=7)
    assert "timeout = 7\n" in servers.gunicorn_config(s)
    argv = servers.apache_command(s)
    assert argv[argv.index("--request-timeout") + 1] == "7"
    assert "uwsgi_read_timeout 7s;" in nginx.config(s)


def test_the_option_reaches_the_deployment():
    dep = Deployment.from_mapping({"request_timeout": "7"}, "test")
    assert dep.request_timeout == 7


@pytest.mark.parametrize("value", [0, 4000])
def test_out_of_range_is_refused(value):
    with pytest.raises(BenchError, match="request timeout"):
        Deployment(request_timeout=value).validate()


def test_the_command_line_refuses_zero(capsys):
    assert cli.main(["keystone", "up", "--request-timeout", "0"]) == 2
    assert "--request-timeout must be between 1 and 3600" in capsys.readouterr().err
