"""servers, databases, memcached: command lines and configuration, no processes."""

from pathlib import Path

import pytest

from rally_keystone_bench.deploy import databases, memcached, servers
from rally_keystone_bench.deploy.keystone import Deployment, LocalKeystone
from rally_keystone_bench.errors import BenchError


@pytest.fixture()
def ks(tmp_path):
    k = LocalKeystone(Deployment(server="gunicorn", workers=3, threads=4), tmp_path)
    k.port = 18000
    k.venv = Path("/venv")
    return k


def test_gunicorn_uses_keepalive_threads_and_uwsgis_log_line(ks):
    argv = servers.gunicorn_command(ks)
    assert argv[-1] == "keystone_bench_gunicorn:application"
    conf = (ks.run_dir / "gunicorn.conf.py").read_text()
    assert "worker_class = 'gthread'" in conf
    assert "workers = 3" in conf and "threads = 4" in conf
    assert "127.0.0.1:18000" in conf
    assert "%(E)s %(m)s %(R)s %(s)s %(D)s %(P)s" in conf


def test_gunicorn_module_hides_gunicorns_argv_from_keystone(ks):
    servers.gunicorn_command(ks)
    module = (ks.run_dir / "keystone_bench_gunicorn.py").read_text()
    reset = module.index("sys.argv = sys.argv[:1]")
    assert reset < module.index("from keystone")
    compile(module, "keystone_bench_gunicorn.py", "exec")


def test_apache_command(ks, monkeypatch):
    monkeypatch.setattr(servers.os, "geteuid", lambda: 1000)
    ks.deployment.server = "apache"
    argv = servers.apache_command(ks)
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


def test_memcached_cache_section():
    text = "\n".join(memcached.cache_section(11311))
    assert "enabled = true" in text and "memcache_servers = 127.0.0.1:11311" in text


def test_db_url_without_a_server_database_is_refused():
    with pytest.raises(BenchError, match="--db-url"):
        Deployment(db_url="postgresql://postgres@127.0.0.1:5432").validate()
