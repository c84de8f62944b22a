"""Command lines and configuration files of the WSGI servers Keystone runs under.

Each server writes one access-log line per request in the same format, so
the tooling that reads ``access.log`` works for all of them::

    EPOCH_MS METHOD URI STATUS MICROSECONDS PID

All three import the generated hook module (``HOOK_MODULE``)
before they look up Keystone's application: SQLite's BEGIN IMMEDIATE and a
sized 500 for exceptions that escape Keystone.

- uwsgi: the HTTP router with keep-alive.
- gunicorn: ``gthread`` workers (keep-alive) serving a small generated module
  that empties ``sys.argv`` before Keystone is imported: oslo.config would
  otherwise parse gunicorn's own options and fail.
- apache: ``mod_wsgi-express`` (PyPI ``mod_wsgi``, built against Debian's
  apache2-dev) in the foreground, daemon mode, ``--processes``/``--threads``.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import tempfile
from pathlib import Path

from rally_keystone_bench import writer
from rally_keystone_bench.deploy import files, nginx, shared_view
from rally_keystone_bench.deploy.site import Site
from rally_keystone_bench.errors import BenchError

GUNICORN_MODULE = "keystone_bench_gunicorn"
HOOK_MODULE = "keystone_bench_wsgi"  # written into the run directory by write_hook
APACHE_LOG_FORMAT = "%{msec}t %m %U%q %>s %D %P"


def write_hook(run_dir: Path) -> Path:
    """The hook module every server imports before Keystone's application."""
    files.write(run_dir / "keystone_bench_tracing.py", "keystone_bench_tracing.py")
    return files.write(run_dir / f"{HOOK_MODULE}.py", "keystone_bench_wsgi.py")


def command(site: Site) -> list[str]:
    """Write the server's configuration into the run directory; return its argv."""
    if site.server == "uwsgi":
        return uwsgi_command(site)
    if site.server == "gunicorn":
        return gunicorn_command(site)
    if site.server == "apache":
        return apache_command(site)
    if site.server == "nginx":
        # uWSGI on a unix socket; LocalKeystone starts nginx (nginx.command) beside it.
        return nginx.uwsgi_command(site, HOOK_MODULE)
    raise BenchError(f"unknown server {site.server!r}")


def uwsgi_config(site: Site) -> str:
    return files.render("uwsgi.ini", site=site, hook_module=HOOK_MODULE)


def uwsgi_command(site: Site) -> list[str]:
    ini = site.run_dir / "uwsgi.ini"
    writer.write_private(ini, uwsgi_config(site))  # its state: its owner's only
    return [site.bin("uwsgi"), "--ini", str(ini)]


def gunicorn_config(site: Site) -> str:
    return files.render("gunicorn.conf.py", site=site, gunicorn_module=GUNICORN_MODULE)


def gunicorn_command(site: Site) -> list[str]:
    module = site.run_dir / f"{GUNICORN_MODULE}.py"
    files.write(module, "keystone_bench_gunicorn.py", hook_module=HOOK_MODULE)
    conf = site.run_dir / "gunicorn.conf.py"
    writer.write_private(conf, gunicorn_config(site))
    return [site.bin("gunicorn"), "--config", str(conf), f"{GUNICORN_MODULE}:application"]


def apache_wsgi_script(site: Site) -> Path:
    """The WSGI script mod_wsgi loads: Keystone's application, empty argv."""
    return files.write(
        site.run_dir / "keystone-api.wsgi", "keystone-api.wsgi", site=site, hook_module=HOOK_MODULE
    )


# A unix socket's path holds at most 107 bytes; mod_wsgi names its daemon's
# socket PREFIX/wsgi.<pid>.u<uid>.<n>.sock (up to 35 bytes after PREFIX).
SOCKET_PATH_MAX = 107
WSGI_SOCKET_NAME_MAX = 35


def wsgi_socket_dir(run_dir: Path) -> Path:
    """Where mod_wsgi's daemon sockets go: the server root, or a short directory.

    In a deep run directory (a matrix row's, say) the socket's path would be
    too long: bind() cuts it, and Apache's workers then cannot connect
    (WSGI0117, permission denied). Such a run gets /tmp/keystone-bench-wsgi-
    <hash of the run directory>, removed by remove_wsgi_socket_dir at stop.
    """
    root = run_dir / "apache"
    if len(os.fsencode(root)) + WSGI_SOCKET_NAME_MAX <= SOCKET_PATH_MAX:
        return root
    digest = hashlib.sha256(os.fsencode(run_dir.resolve())).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"keystone-bench-wsgi-{digest}"


def remove_wsgi_socket_dir(run_dir: Path) -> None:
    """Remove the short socket directory of a deep run directory, if it has one."""
    path = wsgi_socket_dir(run_dir)
    if path != run_dir / "apache":
        shutil.rmtree(path, ignore_errors=True)


def apache_command(site: Site) -> list[str]:
    """mod_wsgi-express start-server in the foreground (it execs httpd)."""
    root = site.run_dir / "apache"
    root.mkdir(exist_ok=True)
    sockets = wsgi_socket_dir(site.run_dir)
    sockets.mkdir(mode=0o700, exist_ok=True)
    argv = [
        site.bin("mod_wsgi-express"),
        "start-server",
        str(apache_wsgi_script(site)),
        "--host", "127.0.0.1",
        "--port", str(site.port),
        "--server-root", str(root),
        "--socket-prefix", str(sockets),
        "--processes", str(site.workers),
        "--threads", str(site.threads),
        "--keep-alive-timeout", "75",
        "--request-timeout", str(site.request_timeout),
        "--queue-timeout", "120",
        "--socket-timeout", "120",
        "--log-directory", str(site.run_dir),
        "--error-log-name", "apache-error.log",
        "--access-log",
        "--access-log-name", site.access_log_path.name,
        "--access-log-format", APACHE_LOG_FORMAT,
        "--setenv", "OS_KEYSTONE_CONFIG_FILES", str(site.config_path),
    ]  # fmt: skip
    if os.geteuid() == 0:
        # Apache will not serve as root; its daemon processes run as the
        # run directory's owner instead, which must then be able to read it.
        user = apache_user()
        share_with(user, site)
        entry = pwd.getpwnam(user)
        os.chown(sockets, entry.pw_uid, entry.pw_gid)
        argv += ["--user", user, "--group", user]
        argv = shared_view.wrap(argv, site)
    return argv


def share_with(user: str, site: Site) -> None:
    """Let USER run Keystone from this run directory (config, keys, database, logs).

    The run directory, which the tool created, becomes USER's. No directory
    above it changes: shared_view.wrap opens them in Apache's namespace only.
    """
    entry = pwd.getpwnam(user)
    for root, dirs, names in os.walk(site.run_dir):
        for name in [*dirs, *names]:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    os.chown(site.run_dir, entry.pw_uid, entry.pw_gid)


def apache_user() -> str:
    """The account Apache's processes run as when we are root."""
    for name in ("www-data", "daemon", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise BenchError("no unprivileged account for Apache (www-data, daemon, nobody)")
