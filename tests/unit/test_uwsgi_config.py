"""uWSGI in front of Keystone: every request gets an answer with a size.

An exception escaping Keystone's WSGI stack used to reach uWSGI, which closes
the worker connection without a response; the HTTP router in keep-alive mode
then left the client waiting 60 s (http-timeout) before "Remote end closed
connection without response". The generated hook module turns it into a 500.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
import types

import pytest

from rally_keystone_bench.deploy import bootstrap, servers
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone


def _load_hook(tmp_path, monkeypatch, app):
    """Import the generated hook module against a fake keystone.wsgi.api serving APP."""
    api = types.ModuleType("keystone.wsgi.api")
    api.application = app
    package, wsgi = types.ModuleType("keystone"), types.ModuleType("keystone.wsgi")
    package.wsgi, wsgi.api = wsgi, api
    monkeypatch.setitem(sys.modules, "keystone", package)
    monkeypatch.setitem(sys.modules, "keystone.wsgi", wsgi)
    monkeypatch.setitem(sys.modules, "keystone.wsgi.api", api)
    # The trace store's driver needs osprofiler, which only Keystone's venv has.
    monkeypatch.setitem(sys.modules, "keystone_bench_tracing", types.ModuleType("tracing"))
    hooked = []
    monkeypatch.setattr(sys, "excepthook", lambda *exc: hooked.append(exc[0]))
    path = servers.write_hook(tmp_path)
    spec = importlib.util.spec_from_file_location(servers.HOOK_MODULE, path)
    module = importlib.util.module_from_spec(spec)
    from oslo_db.sqlalchemy import enginefacade
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    factory = enginefacade._TransactionFactory
    originals = factory._create_session, factory._create_connection
    spec.loader.exec_module(module)

    def undo() -> None:
        event.remove(Engine, "before_cursor_execute", module._begin)
        factory._create_session, factory._create_connection = originals

    return module, api, hooked, undo


@pytest.fixture
def hook(tmp_path, monkeypatch):
    apps = {}

    def keystone_app(environ, start_response):
        return apps["current"](environ, start_response)

    module, api, hooked, undo = _load_hook(tmp_path, monkeypatch, keystone_app)
    yield module, api, hooked, apps
    undo()


def _call(app):
    seen = {}

    def start_response(status, headers, exc_info=None):
        if exc_info is not None:
            # What uWSGI 2.0's start_response does with exc_info before any
            # header was sent: it restores the exception and returns.
            raise SystemError("uwsgi_spit returned a result with an exception set")
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app({"REQUEST_METHOD": "DELETE", "PATH_INFO": "/v3/users/x"}, start_response))
    return seen["status"], seen["headers"], body


def test_ini_imports_the_hook_before_serving_keystone_through_the_router(tmp_path):
    ks = LocalKeystone(Deployment(port=45679), tmp_path)
    ks.venv = tmp_path
    ini = servers.uwsgi_config(ks.site()).splitlines()
    assert "http = 127.0.0.1:45679" in ini
    assert f"pythonpath = {ks.run_dir}" in ini
    assert ini.index(f"import = {servers.HOOK_MODULE}") < ini.index(
        "module = keystone.wsgi.api:application"
    )


def test_an_escaping_exception_becomes_a_sized_500_without_its_text(hook):
    module, api, hooked, apps = hook

    def broken(environ, start_response):
        raise RuntimeError("database is locked [parameters: ('secret-ish',)]")

    apps["current"] = broken
    assert api.application is module.application
    status, headers, body = _call(api.application)
    assert status.startswith("500")
    assert headers["Content-Length"] == str(len(body))
    assert json.loads(body)["error"]["code"] == 500
    assert b"secret-ish" not in body and b"locked" not in body
    assert hooked == [RuntimeError]


def test_answers_keystone_gave_pass_through_unchanged(hook):
    module, api, hooked, apps = hook

    def fine(environ, start_response):
        start_response("204 No Content", [("Vary", "X-Auth-Token")])
        return [b""]

    apps["current"] = fine
    assert _call(api.application) == ("204 No Content", {"Vary": "X-Auth-Token"}, b"")
    assert hooked == []


def test_sqlite_transactions_take_the_write_lock_at_begin(hook, tmp_path):
    from sqlalchemy import create_engine, text

    db = tmp_path / "k.db"
    sqlite3.connect(db).close()
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")  # opens the pysqlite connection
        conn.connection.dbapi_connection.isolation_level = None  # as oslo.db does
        conn.execute(text("BEGIN"))  # oslo.db's deferred BEGIN, rewritten
        other = sqlite3.connect(db, timeout=0, isolation_level=None)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        other.close()
        conn.execute(text("ROLLBACK"))
    engine.dispose()


class _Context:
    """What Keystone passes to oslo.db's enginefacade: any object."""


@pytest.fixture
def facade(tmp_path):
    """An oslo.db enginefacade on a WAL-mode SQLite file, as Keystone's."""
    from oslo_db.sqlalchemy import enginefacade

    db = tmp_path / "k.db"
    bootstrap.sqlite_wal(db)
    facade = enginefacade.transaction_context()
    facade.configure(connection=f"sqlite:///{db}?timeout=30")
    yield facade, db
    facade.dispose_pool()


def _another_writer_can_start(db) -> bool:
    other = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


def test_oslo_db_readers_stay_deferred_and_writers_take_the_lock(hook, facade):
    # A reader must not queue behind a writer: in WAL mode it never has to.
    from sqlalchemy import text

    facade, db = facade
    with facade.reader.using(_Context()) as session:
        session.execute(text("SELECT 1"))
        assert _another_writer_can_start(db)
    with facade.writer.using(_Context()) as session:
        session.execute(text("SELECT 1"))
        assert not _another_writer_can_start(db)
    with facade.writer.connection.using(_Context()) as conn:
        conn.execute(text("SELECT 1"))
        assert not _another_writer_can_start(db)
    with facade.reader.connection.using(_Context()) as conn:
        conn.execute(text("SELECT 1"))
        assert _another_writer_can_start(db)


def test_a_writer_opened_inside_a_reader_takes_the_lock(hook, facade):
    # The reverted split looked at the outermost scope on the thread, so an
    # independent writer inside a reader kept the deferred BEGIN.
    from sqlalchemy import text

    facade, db = facade
    with facade.reader.using(_Context()) as outer:
        outer.execute(text("SELECT 1"))
        with facade.writer.independent.using(_Context()) as inner:
            inner.execute(text("SELECT 1"))
            assert not _another_writer_can_start(db)
        assert _another_writer_can_start(db)


def test_a_request_waits_for_the_lock_one_busy_timeout_in_all(hook, facade, monkeypatch):
    # Each BEGIN gets what is left of the request's budget, so a request
    # with several writer transactions does not wait a multiple of it.
    from sqlalchemy import text

    module, api, hooked, apps = hook
    facade, db = facade
    clock = {"now": 1000.0}
    monkeypatch.setattr(module.time, "monotonic", lambda: clock["now"])
    seen = []

    def keystone_app(environ, start_response):
        for now in (1000.0, 1000.0 + module.BUSY_TIMEOUT - 0.5, 1000.0 + module.BUSY_TIMEOUT + 5):
            clock["now"] = now
            with facade.writer.using(_Context()) as session:
                seen.append(session.execute(text("PRAGMA busy_timeout")).scalar())
        start_response("204 No Content", [])
        return [b""]

    apps["current"] = keystone_app
    assert _call(api.application)[0] == "204 No Content"
    assert seen == [module.BUSY_TIMEOUT * 1000, 500, 0]
