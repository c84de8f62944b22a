"""What a local Keystone needs running before it starts: its database, memcached, slapd.

The PostgreSQL/MySQL database is created once per deployment (and dropped
at its teardown); with ``--db-storage tmpfs`` PostgreSQL is a private
server of our own. Each process is recorded in ``state.json`` as it starts.
"""

from __future__ import annotations

import functools

from rally_keystone_bench.deploy import databases, memcached, process, storage
from rally_keystone_bench.deploy.keystone_state import KeystoneState


def start_backends(ks: KeystoneState) -> None:
    """Create the PostgreSQL/MySQL database (once) and start memcached."""
    dep = ks.deployment
    assert ks.venv is not None
    if dep.db == "sqlite" and dep.db_storage == "tmpfs":
        ks.sqlite_path.parent.mkdir(mode=0o700, exist_ok=True)
    db_url = dep.db_url
    if dep.db == "postgresql" and dep.db_storage == "tmpfs":
        db_url = start_private_postgres(ks)
    if dep.db != "sqlite" and ks.database is None:
        url = databases.server_url(dep.db, db_url)
        ks.database = databases.create(ks.venv, dep.db, url)
        ks.progress(f"created {dep.db} database {ks.database.name}")
        ks._write_state()
    if dep.cache == "memcached":
        if ks.memcached_port is None:
            ks.memcached_port = process.find_free_port()
        log = ks.run_dir / "memcached.log"
        ks._record("memcached", lambda: memcached.start(ks.memcached_port, log))
        ks.progress(f"memcached started on port {ks.memcached_port}")
    if dep.identity == "ldap":
        start_directory(ks)


def start_private_postgres(ks: KeystoneState) -> str:
    """PostgreSQL of our own with its data on tmpfs; its server URL."""
    if ks.private_db_port is None:
        ks.private_db_port = process.find_free_port()
    log = ks.run_dir / "postgresql.log"
    # Named to sort after every Keystone process: stop() ends it last.
    ks._record(
        "storage-postgres",
        functools.partial(storage.start_postgres, ks.run_dir, ks.private_db_port, log),
    )
    ks.progress(
        f"private PostgreSQL on port {ks.private_db_port}, data in "
        f"{storage.pg_data_dir(ks.run_dir)} (tmpfs)"
    )
    ks._write_state()
    return f"postgresql://postgres@127.0.0.1:{ks.private_db_port}"


def start_directory(ks: KeystoneState) -> None:
    """slapd on its own port, filled with the run's users before Keystone starts."""
    if ks.ldap_port is None:
        ks.ldap_port = process.find_free_port()
        while ks.ldap_port == ks.port:
            ks.ldap_port = process.find_free_port()
    found = ks.ldap_directory
    assert found is not None
    if not found.prepared:
        found.prepare()
        ks.progress(f"LDAP directory filled with {found.users} users in {found.run_dir}")
    ks._record("slapd", found.start)
    ks.progress(f"slapd started on {found.url}")
    why = found.runs_as_root_because()
    if why:
        ks.progress(f"slapd runs as root: {why}")
