"""--nodes N --balancer haproxy: bad input, HAProxy's configuration, requests per node."""

from __future__ import annotations

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.deploy import balancer, nginx
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.report import records


@pytest.fixture(autouse=True)
def no_database_server(monkeypatch):
    # PostgreSQL's reachability is not what these tests are about.
    from rally_keystone_bench.deploy import databases

    monkeypatch.setattr(databases, "check_reachable", lambda db, url: None)


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        (["--nodes", "0", "--db", "postgresql"], "nodes must be at least 1, not 0\n"),
        (["--nodes", "2"], "2 nodes cannot share a SQLite file"),
        (["--balancer", "haproxy", "--db", "mysql"], "--balancer haproxy needs --nodes N"),
    ],
    ids=["nodes-0", "nodes-2-sqlite", "balancer-without-nodes"],
)
def test_bad_input_is_one_line_exit_2_and_nothing_started(tmp_path, capsys, options, reason):
    run_dir = tmp_path / "ks"
    rc = cli.main(["keystone", "up", "--run-dir", str(run_dir), *options])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("keystone-bench: ") and reason in err
    assert err.count("\n") == 1
    assert not run_dir.exists()


@pytest.mark.parametrize(
    ("options", "package"),
    [
        (["--nodes", "2", "--db", "postgresql"], "haproxy"),
        (["--server", "nginx"], "nginx"),
    ],
)
def test_a_missing_package_is_named_with_its_install_command(
    tmp_path, capsys, monkeypatch, options, package
):
    for module in (balancer, nginx):
        monkeypatch.setattr(module.shutil, "which", lambda name: None)
        monkeypatch.setattr(module.os, "access", lambda path, mode: False)
    run_dir = tmp_path / "ks"
    rc = cli.main(["keystone", "up", "--run-dir", str(run_dir), *options])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert f"{package}, which is not installed (apt-get install {package})" in err
    assert not run_dir.exists()


def test_a_deployment_file_sets_nodes_and_balancer():
    dep = Deployment.from_mapping({"db": "mysql", "nodes": "3", "balancer": "haproxy"}, "f")
    assert (dep.nodes, dep.balancer) == (3, "haproxy")
    assert "3 nodes behind haproxy" in dep.describe()
    assert Deployment().nodes is None


def test_haproxy_balances_round_robin_with_keep_alive_and_checks_v3():
    conf = balancer.config(5000, [("node1", 5001), ("node2", 5002)])
    lines = [ln.strip() for ln in conf.splitlines()]
    assert "bind 127.0.0.1:5000" in lines
    assert "balance roundrobin" in lines and "option http-keep-alive" in lines
    assert "option httpchk GET /v3" in lines
    assert "server node1 127.0.0.1:5001 check inter 1s fall 2 rise 1" in lines
    assert "server node2 127.0.0.1:5002 check inter 1s fall 2 rise 1" in lines


def test_requests_per_node_count_token_requests_not_health_checks(tmp_path):
    for name, lines in {
        "node1": [
            "1 POST /v3/auth/tokens 201 10 1",
            "2 GET /v3 200 1 1",
            "3 GET /v3/auth/tokens 200 5 1",
        ],
        "node2": ["1 HEAD /v3/auth/tokens 200 10 2", "2 GET /v3 200 1 2"],
        "node10": [],
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "access.log").write_text("".join(f"{ln}\n" for ln in lines))
    counts = balancer.requests_per_node(tmp_path)
    assert counts == {"node1": 2, "node2": 1, "node10": 0}
    assert records.format_counts(counts) == "node1 2 (67%), node2 1 (33%), node10 0 (0%)"


def test_node_states_is_haproxys_own_view_up_only_once_a_node_answers(tmp_path):
    """A node that answers /v3 turns UP; one that never answers stays DOWN.

    Slack: 15 s for HAProxy's view, whose checks every 1 s change a state after one
    (up) or two (down) of them (haproxy.cfg.j2); how long that takes was never timed."""
    import http.server
    import threading
    import time

    from _packages import require_package

    from rally_keystone_bench.deploy import process

    require_package("haproxy", "haproxy")

    class V3(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    answering = http.server.ThreadingHTTPServer(("127.0.0.1", 0), V3)
    threading.Thread(target=answering.serve_forever, daemon=True).start()
    front, silent = process.find_free_port(), process.find_free_port()
    nodes = [("node1", answering.server_address[1]), ("node2", silent)]
    pid = process.spawn(balancer.command(tmp_path, front, nodes), tmp_path / "haproxy.log")
    try:
        deadline = time.monotonic() + 15
        states = {}
        while time.monotonic() < deadline:
            states = balancer.node_states(front)
            if states.get("node1") == "UP" and states.get("node2", "").startswith("DOWN"):
                break
            time.sleep(0.2)
        assert states.get("node1") == "UP", states
        assert states.get("node2", "").startswith("DOWN"), states
    finally:
        process.terminate(pid)
        answering.shutdown()
    assert balancer.node_states(front, timeout=0.5) == {}
