"""keystone.conf and the LDAP domain's config for one run, rendered from the deployment.

The template (``templates/keystone.conf.j2``) holds the upstream-default
settings a deployment knob changes; ``--set``/``conf:`` settings are applied
over it last (``conf_options``).
"""

from __future__ import annotations

from collections.abc import Mapping

from rally_keystone_bench.deploy import conf_options, databases, directory, files, jws, tracing
from rally_keystone_bench.deploy.run_files import RunFiles
from rally_keystone_bench.errors import BenchError


def database_url(run: RunFiles, database: databases.Database | None) -> str:
    """What keystone.conf's [database] connection says: the SQLite file, or DATABASE."""
    if run.deployment.db == "sqlite":
        # A busy timeout makes writers wait for each other instead of
        # failing at once with "database is locked".
        return f"sqlite:///{run.sqlite_path}?timeout=30"
    if database is None:
        raise BenchError(f"no {run.deployment.db} database was created")
    return database.keystone_url


def render(run: RunFiles, connection: str, memcached_port: int | None) -> str:
    """keystone.conf's text: the template for RUN's deployment, its --set settings over it."""
    dep = run.deployment
    text = files.render(
        "keystone.conf",
        log_file=run.keystone_log_path,
        connection=connection,
        run_dir=run.run_dir,
        password_hash_rounds=dep.password_hash_rounds,
        memcached_port=memcached_port,
        domain_config_dir=run.domain_config_dir if dep.identity == "ldap" else None,
        profiler=tracing.config(run.run_dir) if dep.trace else None,
    )
    return conf_options.apply(text, settings(run))


def settings(run: RunFiles) -> dict[str, str]:
    """The deployment's --set settings, plus the JWS key repositories they need."""
    conf: Mapping[str, str] = run.deployment.conf
    return {**jws.repositories(run.run_dir), **conf} if jws.wanted(conf) else dict(conf)


def write_domain_config(run: RunFiles, found: directory.Directory | None) -> None:
    """keystone.<domain>.conf (0600: it holds the directory's service password)."""
    if found is None:
        return
    dep = run.deployment
    run.domain_config_dir.mkdir(mode=0o700, exist_ok=True)
    text = directory.keystone_domain_config(
        found, dep.ldap_pool, dep.ldap_pool_size, dep.ldap_auth_pool_size
    )
    files.write_private(run.domain_config_dir / f"keystone.{directory.DOMAIN}.conf", text)
