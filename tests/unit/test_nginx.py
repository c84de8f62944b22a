"""--server nginx: nginx's and uWSGI's configuration, and a missing nginx, without processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import nginx, servers
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.errors import BenchError


@pytest.fixture()
def site(tmp_path):
    ks = LocalKeystone(Deployment(server="nginx", workers=3, threads=2), tmp_path)
    ks.port = 18001
    ks.venv = Path("/venv")
    return ks.site()


def test_uwsgi_speaks_the_uwsgi_protocol_on_a_socket_in_the_run_dir(site):
    argv = servers.command(site)
    assert argv == ["/venv/bin/uwsgi", "--ini", str(site.run_dir / "uwsgi.ini")]
    ini = (site.run_dir / "uwsgi.ini").read_text().splitlines()
    assert f"socket = {site.run_dir / 'uwsgi.sock'}" in ini
    assert not any(line.startswith(("http", "http-socket")) for line in ini)
    assert "processes = 3" in ini and "threads = 2" in ini
    assert ini.index(f"import = {servers.HOOK_MODULE}") < ini.index(
        "module = keystone.wsgi.api:application"
    )
    # The access log is nginx's; uWSGI's own goes beside it.
    assert f"req-logger = file:{site.run_dir / 'uwsgi-access.log'}" in ini


def test_nginx_serves_the_port_keeps_alive_and_writes_only_under_the_run_dir(site, monkeypatch):
    monkeypatch.setattr(nginx, "executable", lambda: "/usr/sbin/nginx")
    argv = nginx.command(site)
    conf_path = site.run_dir / "nginx" / "nginx.conf"
    assert argv[:3] == ["/usr/sbin/nginx", "-p", f"{site.run_dir / 'nginx'}/"]
    assert argv[argv.index("-c") + 1] == str(conf_path)
    conf = conf_path.read_text()
    assert "listen 127.0.0.1:18001" in conf
    assert f"server unix:{site.run_dir / 'uwsgi.sock'};" in conf
    assert "uwsgi_pass keystone;" in conf
    assert "daemon off;" in conf and "keepalive_timeout 75s;" in conf
    assert f"access_log {site.access_log_path} bench;" in conf
    assert "'$bench_epoch_ms $request_method $request_uri $status $bench_micros $pid'" in conf
    paths = [
        ln.split()[1].rstrip(";") for ln in conf.splitlines() if "_path " in ln or "pid " in ln
    ]
    assert paths and all(p.startswith(str(site.run_dir)) for p in paths)


def test_a_missing_nginx_is_one_line_naming_the_package(monkeypatch):
    monkeypatch.setattr(nginx.shutil, "which", lambda name: None)
    monkeypatch.setattr(nginx.os, "access", lambda path, mode: False)
    with pytest.raises(BenchError, match=r"not installed \(apt-get install nginx\)"):
        Deployment(server="nginx").validate()


def test_the_cli_offers_nginx():
    args = cli.build_parser().parse_args(["keystone", "up", "--server", "nginx"])
    assert args.server == "nginx"


def test_a_run_dir_too_deep_for_a_socket_path_gives_it_relative(tmp_path, monkeypatch):
    # A unix socket path holds 107 bytes; both processes start in the run dir.
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    ks = LocalKeystone(Deployment(server="nginx"), deep)
    ks.port, ks.venv = 18002, Path("/venv")
    site = ks.site()
    monkeypatch.setattr(nginx, "executable", lambda: "/usr/sbin/nginx")
    servers.command(site)
    nginx.command(site)
    assert "socket = uwsgi.sock" in (deep / "uwsgi.ini").read_text().splitlines()
    assert "server unix:uwsgi.sock;" in (deep / "nginx" / "nginx.conf").read_text()
