"""Several Keystone nodes behind Debian's HAProxy, as the Liberty vs Mitaka blog ran them.

Each node is one WSGI server (any ``--server``) on its own loopback port,
with its own directory (``RUN_DIR/node1`` ...), server log and access log.
The nodes share one ``keystone.conf``, hence one database and one Fernet and
credential key repository: a token one node issues validates on any other,
as in a cloud whose nodes share keys. HAProxy listens on the port the auth
URL names, balances round robin, keeps connections alive and checks each
node's ``/v3``; a node that stops answering leaves the rotation within
about two seconds.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from rally_keystone_bench import writer
from rally_keystone_bench.deploy import files
from rally_keystone_bench.errors import BenchError

BALANCERS = ("haproxy",)
INSTALL = "apt-get install haproxy"
# Served by HAProxy itself on the auth URL's port; no Keystone path begins so.
STATS_URI = "/haproxy-bench-stats"


def executable() -> str:
    """haproxy's path; BenchError naming the package when it is not installed."""
    found = shutil.which("haproxy") or next(
        (p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if os.access(p, os.X_OK)),
        None,
    )
    if found is None:
        raise BenchError(f"--balancer haproxy needs haproxy, which is not installed ({INSTALL})")
    return found


def check(nodes: int | None, balancer: str | None, db: str) -> None:
    """BenchError on a node count or balancer that cannot work, before anything starts."""
    if balancer is not None and balancer not in BALANCERS:
        raise BenchError(f"balancer must be one of {', '.join(BALANCERS)}, not {balancer!r}")
    if nodes is None:
        if balancer is not None:
            raise BenchError(f"--balancer {balancer} needs --nodes N: the Keystone nodes behind it")
        return
    if nodes < 1:
        raise BenchError(f"nodes must be at least 1, not {nodes}")
    if nodes > 1 and db == "sqlite":
        raise BenchError(
            f"{nodes} nodes cannot share a SQLite file (a file is one host's database; "
            "nodes share a database server): use --db postgresql or --db mysql"
        )
    executable()


def node_names(nodes: int) -> list[str]:
    return [f"node{i}" for i in range(1, nodes + 1)]


def config(port: int, nodes: Sequence[tuple[str, int]]) -> str:
    return files.render("haproxy.cfg", port=port, nodes=list(nodes), stats_uri=STATS_URI)


def command(run_dir: Path, port: int, nodes: Sequence[tuple[str, int]]) -> list[str]:
    """Write RUN_DIR/haproxy.cfg; return haproxy's argv (foreground, stopped by pid)."""
    cfg = run_dir / "haproxy.cfg"
    writer.write_text(cfg, config(port, nodes))
    return [executable(), "-f", str(cfg), "-db"]


def node_states(port: int, timeout: float = 2.0) -> dict[str, str]:
    """Each node's state as HAProxy sees it (``UP``, ``DOWN``, ``UP 1/2`` ...).

    A node that answers on its own port may still be DOWN in HAProxy's view
    until its next health check; until then HAProxy sends it nothing.
    Empty when HAProxy does not answer yet.
    """
    url = f"http://127.0.0.1:{port}{STATS_URI};csv"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            text = resp.read().decode("utf-8", "replace")
    except OSError:
        return {}
    rows = csv.DictReader(io.StringIO(text.removeprefix("# ")))
    return {
        row["svname"]: row["status"]
        for row in rows
        if row.get("pxname") == "nodes" and row.get("svname") not in ("FRONTEND", "BACKEND")
    }


def requests_per_node(run_dir: Path) -> dict[str, int]:
    """Token requests (/v3/auth/tokens) each node served, from its access log.

    HAProxy's health checks (GET /v3, every second) are not counted. Empty
    for a deployment without nodes.
    """
    counts = {}
    for log in sorted(Path(run_dir).glob("node*/access.log"), key=lambda p: int(p.parent.name[4:])):
        with open(log, errors="replace") as lines:
            counts[log.parent.name] = sum(
                1 for line in lines if " /v3/auth/tokens" in line.partition(" ")[2]
            )
    return counts
