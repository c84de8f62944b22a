"""Local Keystone pieces that need no Keystone: config, ports, processes, inputs."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import time

import pytest

from rally_keystone_bench.deploy import process, servers, venv
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver import rally as rallyenv
from rally_keystone_bench.driver import targets, workspace
from rally_keystone_bench.errors import BenchError


def test_uwsgi_serves_through_the_http_router_with_keepalive(tmp_path):
    ks = LocalKeystone(Deployment(workers=3, threads=2, port=45678), tmp_path)
    ks.venv = tmp_path
    ini = servers.uwsgi_config(ks.site())
    assert "http = 127.0.0.1:45678" in ini
    assert "http-keepalive" in ini
    assert "http-socket" not in ini and "http11-socket" not in ini
    assert "processes = 3" in ini and "threads = 2" in ini
    assert "keystone.wsgi.api:application" in ini
    assert f"req-logger = file:{ks.access_log_path}" in ini
    assert "%(micros)" in ini


def test_keystone_conf_uses_fernet_sqlite_with_busy_timeout_and_rounds(tmp_path):
    ks = LocalKeystone(Deployment(password_hash_rounds=4), tmp_path)
    conf = ks._render_config()
    assert "provider = fernet" in conf
    assert f"sqlite:///{tmp_path.resolve() / 'keystone.db'}?timeout=" in conf
    assert "password_hash_rounds = 4" in conf
    assert "password_hash_rounds" not in LocalKeystone(Deployment(), tmp_path)._render_config()


def test_openrc_is_private_and_says_identity_v3(tmp_path):
    ks = LocalKeystone(Deployment(port=5001), tmp_path)
    ks.password_path.write_text("not-a-real-secret\n")
    ks._write_openrc()
    mode = stat.S_IMODE(os.stat(ks.openrc_path).st_mode)
    assert mode == 0o600
    text = ks.openrc_path.read_text()
    for var in (
        "OS_AUTH_URL=http://127.0.0.1:5001/v3",
        "OS_USERNAME=admin",
        "OS_PASSWORD=not-a-real-secret",
        "OS_PROJECT_NAME=admin",
        "OS_USER_DOMAIN_NAME=Default",
        "OS_PROJECT_DOMAIN_NAME=Default",
        "OS_IDENTITY_API_VERSION=3",
    ):
        assert f"export {var}\n" in text


@pytest.mark.parametrize(
    "field,value,words",
    [
        ("workers", 0, "workers"),
        ("threads", 0, "threads"),
        ("server", "lighttpd", "server"),
        ("db", "oracle", "db"),
        ("cache", "redis", "cache"),
        ("password_hash_rounds", 3, "rounds"),
    ],
)
def test_bad_deployment_settings_are_refused_by_name(field, value, words):
    with pytest.raises(BenchError, match=words):
        Deployment(**{field: value}).validate()


def test_free_port_is_bindable_and_a_taken_port_is_refused():
    port = process.find_free_port()
    process.ensure_port_free(port)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        with pytest.raises(BenchError, match=f"port {port} .* already in use"):
            process.ensure_port_free(port)
        with pytest.raises(BenchError, match="already in use"):
            Deployment(port=port).validate()


def test_terminate_stops_the_whole_process_group(tmp_path):
    # A shell with a background child: both must be gone, no orphan left.
    pid = process.spawn(["sh", "-c", "sleep 300 & sleep 300"], tmp_path / "log")
    deadline = time.monotonic() + 5
    while len(process.group_members(pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    members = process.group_members(pid)
    assert len(members) >= 2
    process.terminate(pid, timeout=5)
    assert process.group_members(pid) == []
    assert not any(process.is_alive(m) for m in members)


def test_stop_without_a_start_is_harmless(tmp_path):
    LocalKeystone(Deployment(), tmp_path).stop()
    assert not LocalKeystone(Deployment(), tmp_path).is_running()


def test_each_spec_gets_its_own_cached_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KEYSTONE_BENCH_CACHE", str(tmp_path))
    a = venv.env_path("keystone==29.0.0")
    b = venv.env_path("keystone==30.0.0")
    assert a != b and a.parent == b.parent == tmp_path / "venvs"
    checkout = tmp_path / "keystone-src"
    checkout.mkdir()
    assert venv.is_local_checkout(str(checkout))
    assert venv.env_path(str(checkout)) not in (a, b)


def test_a_directory_that_is_not_a_checkout_is_refused(tmp_path):
    with pytest.raises(BenchError, match="not a Keystone checkout"):
        venv.ensure_keystone_env(str(tmp_path))


def test_task_inputs_are_checked(tmp_path):
    with pytest.raises(BenchError, match="does not exist"):
        workspace.task_file(str(tmp_path / "nope.yaml"))
    with pytest.raises(BenchError, match="not valid JSON"):
        workspace.parse_task_args("{times: 3}")
    with pytest.raises(BenchError, match="JSON object"):
        workspace.parse_task_args("[1, 2]")
    assert workspace.parse_task_args('{"times": 3}') == {"times": 3}


def test_unreachable_auth_url_is_reported():
    port = process.find_free_port()
    with pytest.raises(BenchError, match="unreachable"):
        targets.check_reachable(f"http://127.0.0.1:{port}/v3", timeout=2)


def test_spec_from_environ_sets_identity_v3_and_names_missing_variables():
    with pytest.raises(BenchError, match="OS_PASSWORD"):
        rallyenv.spec_from_environ({"OS_AUTH_URL": "http://x/v3", "OS_USERNAME": "u"})
    spec = rallyenv.spec_from_environ(
        {
            "OS_AUTH_URL": "http://x/v3",
            "OS_USERNAME": "u",
            "OS_PASSWORD": "p",
            "OS_PROJECT_NAME": "demo",
        }
    )
    assert spec["openstack"]["api_info"]["keystone"]["version"] == 3
    assert spec["openstack"]["admin"]["user_domain_name"] == "Default"


def test_spec_file_is_forced_to_identity_v3(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(
        "openstack:\n  auth_url: http://x/v3\n  admin: {username: a, password: b,"
        " project_name: c}\n  api_info: {keystone: {version: 2}}\n"
    )
    assert rallyenv.load_spec_file(path)["openstack"]["api_info"]["keystone"]["version"] == 3
    (tmp_path / "bad.yaml").write_text("just: text\n")
    with pytest.raises(BenchError, match="no openstack platform"):
        rallyenv.load_spec_file(tmp_path / "bad.yaml")


def test_no_module_does_work_at_import_time():
    # Rally imports every module under plugins/; importing them all must be quick
    # and must not pull numpy or jinja2 in.
    code = (
        "import importlib, pkgutil, sys, time\n"
        "import rally_keystone_bench.plugins as p\n"
        "t = time.monotonic()\n"
        "for m in pkgutil.walk_packages(p.__path__, p.__name__ + '.'):\n"
        "    importlib.import_module(m.name)\n"
        "heavy = [m for m in ('numpy', 'jinja2') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [os.sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
