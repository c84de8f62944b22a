"""Stopping a local Keystone: signal only what it started, then tear its data down.

A process is signalled only when ``state.json`` (or the object that
spawned it) has its full record and it is still that process: a pid reused
by another program is left alone. A teardown also drops its database,
removes its tmpfs data, its LDAP data and its trace store; the logs stay.
"""

from __future__ import annotations

from rally_keystone_bench.deploy import databases, process, servers, shared_view, storage, tracing
from rally_keystone_bench.deploy.keystone_state import KeystoneState


def stop(ks: KeystoneState, teardown: bool) -> None:
    """Stop every process KS started, keeping the logs; with TEARDOWN its data goes too."""
    ks._load_state()
    # What this object spawned itself and a signal kept out of state.json.
    for name, pid in ks._spawned.items():
        if ks.pids.get(name) != pid and process.is_alive(pid):
            ks.pids[name] = pid
            ks.processes[name] = process.identity(pid) or {}
    ks._spawned = {}
    for name, pid in sorted(ks.pids.items()):
        recorded = ks.processes.get(name)
        if recorded is None or recorded.get("pid") != pid or not process.is_complete(recorded):
            if process.is_alive(pid):
                ks.progress(
                    f"{name}: pid {pid} has no full record (boot id, start time, command "
                    "line), so it may not be the process this deployment started: "
                    "not signalled"
                )
            continue
        if not process.is_same_process(recorded):
            if process.is_alive(pid):
                ks.progress(
                    f"{name}: pid {pid} is no longer the process this deployment "
                    "started (another start time or command): not signalled"
                )
            continue
        process.terminate(pid)
    ks.pids = {}
    ks.processes = {}
    if ks.deployment.server == "apache":
        for run_dir in [ks.run_dir, *(ks.run_dir / name for name, _ in ks.nodes())]:
            servers.remove_wsgi_socket_dir(run_dir)
            shared_view.remove(run_dir)
    if teardown:
        tear_down(ks)
    if ks.state_path.exists():
        ks._write_state()


def tear_down(ks: KeystoneState) -> None:
    """Remove what KS kept between starts: trace store, LDAP data, tmpfs data, its database."""
    tracing.remove(ks.run_dir, ks.config_path)
    found = ks.ldap_directory
    if found is not None:
        found.remove_data()
        ks.initialised_path.unlink(missing_ok=True)
    if ks.deployment.db_storage == "tmpfs":
        # A private server's data, or the SQLite file: all of it goes.
        storage.remove(ks.run_dir)
        ks.progress(f"removed {storage.tmpfs_dir(ks.run_dir)}")
        ks.database = None
        ks.initialised_path.unlink(missing_ok=True)
    if ks.database is not None and ks.venv is not None:
        databases.drop(ks.venv, ks.database)
        ks.progress(f"dropped database {ks.database.name}")
        ks.database = None
        ks.initialised_path.unlink(missing_ok=True)
