"""servers, databases, memcached: command lines and configuration, no processes."""

import dataclasses
import runpy
import sys
import types
from pathlib import Path

import pytest

from rally_keystone_bench.deploy import databases, servers
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.errors import BenchError


@pytest.fixture()
def ks(tmp_path):
    k = LocalKeystone(Deployment(server="gunicorn", workers=3, threads=4), tmp_path)
    k.port = 18000
    k.venv = Path("/venv")
    return k


def test_gunicorn_uses_keepalive_threads_and_uwsgis_log_line(ks):
    argv = servers.gunicorn_command(ks.site())
    assert argv[-1] == "keystone_bench_gunicorn:application"
    conf = (ks.run_dir / "gunicorn.conf.py").read_text()
    assert "worker_class = 'gthread'" in conf
    assert "workers = 3" in conf and "threads = 4" in conf
    assert "127.0.0.1:18000" in conf
    assert "%(E)s %(m)s %(R)s %(s)s %(D)s %(P)s" in conf


def test_gunicorn_module_hides_gunicorns_argv_from_keystone(ks):
    servers.gunicorn_command(ks.site())
    module = (ks.run_dir / "keystone_bench_gunicorn.py").read_text()
    reset = module.index("sys.argv = sys.argv[:1]")
    assert reset < module.index("from keystone")
    compile(module, "keystone_bench_gunicorn.py", "exec")


def _fake_keystone(monkeypatch, run_dir):
    """keystone.wsgi.api as a stub, and a hook module in RUN_DIR that replaces its app."""
    api = types.ModuleType("keystone.wsgi.api")
    api.application = "keystone's own"
    package, wsgi = types.ModuleType("keystone"), types.ModuleType("keystone.wsgi")
    package.wsgi, wsgi.api = wsgi, api
    modules = {"keystone": package, "keystone.wsgi": wsgi, "keystone.wsgi.api": api}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, servers.HOOK_MODULE, raising=False)
    (run_dir / f"{servers.HOOK_MODULE}.py").write_text(
        "import keystone.wsgi.api\nkeystone.wsgi.api.application = 'hooked'\n"
    )
    monkeypatch.syspath_prepend(str(run_dir))


@pytest.mark.parametrize("server", ["gunicorn", "apache"])
def test_every_server_serves_keystone_through_the_hook(ks, monkeypatch, server):
    # The hook carries SQLite's BEGIN IMMEDIATE: without it, gunicorn answered
    # 25 % of concurrent user creations with "database is locked".
    monkeypatch.setattr(servers.os, "geteuid", lambda: 1000)
    _fake_keystone(monkeypatch, ks.run_dir)
    monkeypatch.setattr(sys, "argv", ["server", "--its-own-option"])
    if server == "gunicorn":
        glogging = types.ModuleType("gunicorn.glogging")
        glogging.Logger = object  # gunicorn lives in Keystone's environment, not here
        monkeypatch.setitem(sys.modules, "gunicorn", types.ModuleType("gunicorn"))
        monkeypatch.setitem(sys.modules, "gunicorn.glogging", glogging)
        servers.gunicorn_command(ks.site())
        path = ks.run_dir / f"{servers.GUNICORN_MODULE}.py"
        namespace = runpy.run_path(str(path))
        app = namespace["_app"]()
    else:
        ks.deployment = dataclasses.replace(ks.deployment, server="apache")
        servers.apache_command(ks.site())
        namespace = runpy.run_path(str(ks.run_dir / "keystone-api.wsgi"))
        app = namespace["application"]
    assert app == "hooked"
    assert sys.argv == ["server"]


def test_apache_command(ks, monkeypatch):
    monkeypatch.setattr(servers.os, "geteuid", lambda: 1000)
    ks.deployment = dataclasses.replace(ks.deployment, server="apache")
    argv = servers.apache_command(ks.site())
    assert argv[1] == "start-server"
    assert argv[argv.index("--processes") + 1] == "3"
    assert argv[argv.index("--threads") + 1] == "4"
    assert argv[argv.index("--access-log-format") + 1] == "%{msec}t %m %U%q %>s %D %P"
    script = (ks.run_dir / "keystone-api.wsgi").read_text()
    assert script.index("sys.argv") < script.index("from keystone")


def test_keystone_urls_of_a_fresh_database():
    pg = databases.Database(
        "postgresql", "postgresql://postgres@127.0.0.1:5432", "keystone_bench_1"
    )
    assert pg.keystone_url == "postgresql+psycopg2://postgres@127.0.0.1:5432/keystone_bench_1"
    my = databases.Database("mysql", "mysql+pymysql://root@127.0.0.1:3306", "keystone_bench_2")
    assert my.keystone_url == "mysql+pymysql://root@127.0.0.1:3306/keystone_bench_2?charset=utf8mb4"


def test_server_url_checks():
    assert databases.server_url("mysql", None) == databases.DEFAULT_URLS["mysql"]
    with pytest.raises(BenchError, match="not a postgresql URL"):
        databases.server_url("postgresql", "mysql://root@h")
    with pytest.raises(BenchError, match="names a database"):
        databases.server_url("postgresql", "postgresql://u@h/keystone")


def test_password_never_in_the_reason():
    url = "postgresql://u:hunter2@127.0.0.1:1"
    with pytest.raises(BenchError) as err:
        databases.check_reachable("postgresql", url, timeout=1)
    assert "hunter2" not in str(err.value) and "unreachable" in str(err.value)


def test_new_names_are_fresh():
    assert databases.new_name() != databases.new_name()
    assert databases.new_name().startswith("keystone_bench_")


def test_memcached_cache_section(tmp_path):
    ks = LocalKeystone(Deployment(cache="memcached"), tmp_path)
    ks.memcached_port = 11311
    text = ks._render_config()
    assert "enabled = true" in text and "memcache_servers = 127.0.0.1:11311" in text


def test_db_url_without_a_server_database_is_refused():
    with pytest.raises(BenchError, match="--db-url"):
        Deployment(db_url="postgresql://postgres@127.0.0.1:5432").validate()


# serial: its shallow run dir must stay short enough for mod_wsgi's sockets, and
# pytest-xdist's tmp_path (.../popen-gwN/...) is 11 bytes deeper.
@pytest.mark.serial
def test_apache_daemon_sockets_move_out_of_a_run_dir_too_deep_for_them(tmp_path, monkeypatch):
    """A matrix row's run directory is deep: mod_wsgi's socket path would pass 107 bytes.

    No time bound: serial only so that tmp_path is the shallow one (see above)."""
    monkeypatch.setattr(servers.os, "geteuid", lambda: 1000)  # no Apache user to set up
    deep = tmp_path / ("d" * 60) / "matrix-20261123T012227Z" / "apache-sqlite" / "keystone"
    deep.mkdir(parents=True)
    site = servers.Site("apache", 5000, 2, 1, deep, deep / "k.conf", deep / "s.log",
                        deep / "a.log", tmp_path)  # fmt: skip
    argv = servers.apache_command(site)
    sockets = Path(argv[argv.index("--socket-prefix") + 1])
    assert sockets != deep / "apache" and sockets.is_dir()
    assert len(str(sockets / "wsgi.4194304.u65534.16.sock")) <= servers.SOCKET_PATH_MAX
    servers.remove_wsgi_socket_dir(deep)
    assert not sockets.exists()

    shallow = tmp_path / "ks"
    shallow.mkdir()
    site = servers.Site("apache", 5000, 2, 1, shallow, shallow / "k.conf", shallow / "s.log",
                        shallow / "a.log", tmp_path)  # fmt: skip
    argv = servers.apache_command(site)
    assert argv[argv.index("--socket-prefix") + 1] == str(shallow / "apache")
