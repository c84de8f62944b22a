"""Targets -> a ready Rally env: a local Keystone, the mock, or an existing cloud.

    with prepared_env(run_dir, deployment=Deployment()) as env:
        env.home, env.name, env.auth_url

A local Keystone or the mock is started first and stopped when the block
ends, however it ends; an existing cloud is checked for an answer first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rally_keystone_bench.deploy import conf_options, tracing, venv
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone, StartCancelled
from rally_keystone_bench.deploy.mock import MockKeystone
from rally_keystone_bench.driver import preflight
from rally_keystone_bench.driver import rally as rallyenv
from rally_keystone_bench.driver.task import ENV_NAME, progress
from rally_keystone_bench.errors import BenchError


@dataclasses.dataclass(frozen=True)
class ReadyEnv:
    """A Rally home with a checked env NAME on the target at AUTH_URL."""

    home: rallyenv.RallyHome
    name: str
    auth_url: str
    keystone_dir: Path | None = None  # a local Keystone's run directory (its trace store)


def describe(target: str, auth_url: str, mock: MockKeystone | None = None) -> str:
    """TARGET (local | mock | cloud) as progress lines and reports name it."""
    if mock is not None:
        cap = mock.capacity_rps
        return (
            f"mock at {auth_url}: {mock.workers} worker(s), "
            f"{mock.service_time_ms:g} ms service time, capacity "
            + (f"{cap:g} rps" if math.isfinite(cap) else "unbounded")
        )
    return "existing cloud" if target == "cloud" else "local Keystone"


def check_reachable(auth_url: str, timeout: float = 10.0) -> None:
    """BenchError unless AUTH_URL answers HTTP at all (any status)."""
    probe = auth_url
    parts = urllib.parse.urlsplit(auth_url)
    if parts.username is not None or parts.password is not None:  # urllib would resolve "u:p@host"
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        netloc += f":{parts.port}" if parts.port else ""
        probe = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    try:
        with urllib.request.urlopen(probe, timeout=timeout):
            return
    except urllib.error.HTTPError:
        return
    except (OSError, urllib.error.URLError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        from rally_keystone_bench.boundary import mask_urls

        raise BenchError(f"auth URL {mask_urls(auth_url)} is unreachable: {reason}") from None


def build_envs(deps: Mapping[str, Deployment], say: Callable[[str], None] = progress) -> None:
    """Build (or find cached) each deployment's Keystone environment before any load.

    gate and matrix call it first, so a SPEC pip cannot install exits 2
    before a deployment has started.
    """
    for dep in deps.values():  # every side's SPEC, before either is built
        venv.check_spec(dep.keystone)
    for name, dep in deps.items():
        say(f"{name}: Keystone environment for {dep.keystone}")
        check_deployment(dep, say)


def check_deployment(dep: Deployment, say: Callable[[str], None] = progress) -> None:
    """DEP's Keystone environment built (or found cached), and its --set checked against it.

    Every verb that starts a local Keystone calls it at its door, before it
    makes a file: a SPEC that does not install, or a --set this Keystone
    does not accept, is then one line and exit 2.
    """
    env = venv.ensure_keystone_env(dep.keystone, extras=dep.extra_packages(), progress=say)
    if dep.conf:  # a bad --set on one side stops all before any starts
        fresh = venv.is_local_checkout(dep.keystone)
        conf_options.check(dep.conf, conf_options.registry_of(env, fresh=fresh))


def identity_task_args(deployment: Deployment | None, task_args: dict[str, Any]) -> dict[str, Any]:
    """TASK_ARGS plus ``ldap_domain`` for an LDAP deployment, unless given.

    Our task files take their users from that domain when it is set.
    """
    from rally_keystone_bench.deploy import directory

    if deployment is None or deployment.identity != "ldap" or "ldap_domain" in task_args:
        return task_args
    return {**task_args, "ldap_domain": directory.DOMAIN}


def start_explained(ks: LocalKeystone) -> None:
    """Start KS; when it fails to start, print the tail of its logs before the error."""
    try:
        ks.start()
    except StartCancelled:
        raise  # stopped on purpose (a signal): its log says nothing of interest
    except BenchError:
        tail = ks.log_tail()
        if tail:
            print(tail, file=sys.stderr)
        raise


@contextlib.contextmanager
def prepared_env(
    run_dir: Path,
    *,
    cloud: Mapping[str, Any] | None = None,
    mock: MockKeystone | None = None,
    deployment: Deployment | None = None,
    say: Callable[[str], None] = progress,
    trace_rate: float | None = None,
    admin_user: bool = False,
) -> Iterator[ReadyEnv]:
    """A RallyHome in RUN_DIR with a checked env named ENV_NAME.

    ADMIN_USER: a local Keystone's or the mock's admin is the env's user too
    (rallyenv.admin_user_spec: no project and user made by Rally's task
    validation for every ``rally task start``), for tasks whose every workload
    names keystone_users (capacity's probes); a cloud's spec stays as given.

    CLOUD: the Rally env spec of an existing cloud; MOCK: a mock token
    service, started here; else a local Keystone of DEPLOYMENT (default
    settings without one), started here.
    """
    server: LocalKeystone | MockKeystone | None = None
    if cloud is not None:
        spec = dict(cloud)
        check_reachable(rallyenv.auth_url_of(spec))
        preflight.check_keystone(spec["openstack"])  # Rally's env check says only ":-("
    elif mock is not None:
        server = mock
    else:
        deployment = deployment or Deployment()
        deployment.validate()
        server = LocalKeystone(deployment, run_dir / "keystone", progress=say)
    started = False  # "Keystone stopped" only for one that started
    try:
        if isinstance(server, LocalKeystone):
            start_explained(server)
            started = True
            say(f"Keystone is up at {server.auth_url} (logs in {server.run_dir})")
        elif server is not None:
            server.start()
        if server is not None:
            admin = server.admin_credentials
            spec = rallyenv.admin_user_spec(admin) if admin_user else rallyenv.keystone_spec(admin)
        if isinstance(server, LocalKeystone) and server.directory_users_path is not None:
            # keystone_users {existing: true, domain: ...} finds the
            # directory's users (a 0600 file) through the env's extras.
            users_file = str(server.directory_users_path)
            spec["!extras"] = {"keystone_bench": {"directory_users": users_file}}
        say(f"Rally: database, env {ENV_NAME}, its check (rally db ensure, env create, env check)")
        home = rallyenv.RallyHome(run_dir / "rally")
        home.create_env(ENV_NAME, spec)
        home.check_env(ENV_NAME)
        local = server.run_dir if isinstance(server, LocalKeystone) else None
        with tracing.client_environment(local, trace_rate):
            yield ReadyEnv(home, ENV_NAME, rallyenv.auth_url_of(spec), local)
    finally:
        if server is not None:
            server.stop()
            if isinstance(server, LocalKeystone) and started:
                say("Keystone stopped")


@contextlib.contextmanager
def started_target(
    run_dir: Path,
    *,
    cloud: Mapping[str, Any] | None = None,
    mock: Any = None,
    deployment: Any = None,
    say: Callable[[str], None] = lambda _m: None,
) -> Iterator[tuple[dict[str, Any], str]]:
    """The admin credential of a target, for an engine that needs no Rally env (Locust).

    CLOUD: a Rally env spec; MOCK: a MockKeystone, started here; else a local
    Keystone of DEPLOYMENT, started here. Whatever is started is stopped.
    """
    if cloud is not None:
        platform = cloud["openstack"]
        check_reachable(platform["auth_url"])
        credential = {"auth_url": platform["auth_url"], **platform.get("admin", {})}
        credential["https_insecure"] = platform.get("https_insecure", False)
        credential["https_cacert"] = platform.get("https_cacert", "")
        yield credential, platform["auth_url"]
        return
    if mock is not None:
        with mock:
            yield mock.admin_credentials, mock.auth_url
        return
    keystone = LocalKeystone(deployment, run_dir / "keystone", progress=say)
    try:
        start_explained(keystone)
        say(f"Keystone is up at {keystone.auth_url} (logs in {keystone.run_dir})")
        yield keystone.admin_credentials, keystone.auth_url
    finally:
        keystone.stop()
