"""nginx in front of uWSGI: the "uwsgi + nginx" front end of Bogomolov et al.

uWSGI speaks the uwsgi protocol on a unix socket in the run directory;
Debian's nginx listens on the deployment's port, keeps clients' connections
alive and passes each request to that socket. nginx runs in the foreground
(``daemon off``) in its own session, so it is stopped by pid like every other
process; its prefix, pid file, temp directories and logs are all under
``RUN_DIR/nginx`` and the run directory, so it needs neither root nor
/var/log. ``access.log`` is nginx's, in the line format of every server.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from rally_keystone_bench import writer
from rally_keystone_bench.deploy import files
from rally_keystone_bench.deploy.site import Site
from rally_keystone_bench.errors import BenchError

INSTALL = "apt-get install nginx"
SOCKET = "uwsgi.sock"


def executable() -> str:
    """nginx's path; BenchError naming the package when it is not installed."""
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )
    if found is None:
        raise BenchError(f"--server nginx needs nginx, which is not installed ({INSTALL})")
    return found


def prefix(site: Site) -> Path:
    return site.run_dir / "nginx"


def socket_path(site: Site) -> Path:
    return site.run_dir / SOCKET


def socket_address(site: Site) -> str:
    """The socket as uWSGI binds it and nginx connects to it.

    A unix socket's path holds at most 107 bytes, less than a run directory
    under pytest's or matrix's temporary trees can take. uWSGI and nginx both
    start with the run directory as working directory (and neither changes
    it), so a long path is given relative to it.
    """
    path = socket_path(site)
    return str(path) if len(str(path)) <= 100 else SOCKET


def uwsgi_config(site: Site, hook_module: str) -> str:
    """uWSGI's ini: the uwsgi protocol on the run directory's socket."""
    return files.render(
        "nginx-uwsgi.ini",
        site=site,
        socket=socket_address(site),
        hook_module=hook_module,
        uwsgi_access_log=site.run_dir / "uwsgi-access.log",
    )


def uwsgi_command(site: Site, hook_module: str) -> list[str]:
    socket_path(site).unlink(missing_ok=True)
    ini = site.run_dir / "uwsgi.ini"
    writer.write_private(ini, uwsgi_config(site, hook_module))  # its state: its owner's only
    return [site.bin("uwsgi"), "--ini", str(ini)]


def config(site: Site) -> str:
    return files.render(
        "nginx.conf",
        prefix=prefix(site),
        port=site.port,
        socket=socket_address(site),
        access_log=site.access_log_path,
        error_log=site.run_dir / "nginx-error.log",
        run_as_root=os.geteuid() == 0,
        request_timeout=site.request_timeout,
    )


def command(site: Site) -> list[str]:
    """Write nginx's configuration under RUN_DIR/nginx; return its argv (foreground)."""
    root = prefix(site)
    for sub in ("", "client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (root / sub).mkdir(mode=0o700, exist_ok=True)
    conf = root / "nginx.conf"
    writer.write_text(conf, config(site))
    # -e: the error log before the configuration is read (else /var/log/nginx).
    return [
        executable(),
        "-p",
        f"{root}/",
        "-c",
        str(conf),
        "-e",
        str(site.run_dir / "nginx-error.log"),
    ]
