"""Whether a started Keystone serves: /v3 answers, the admin gets a token, each node is UP."""

from __future__ import annotations

import urllib.error
import urllib.request

from rally_keystone_bench.clients import check
from rally_keystone_bench.clients.auth import UserAuth
from rally_keystone_bench.deploy import balancer as balancing
from rally_keystone_bench.deploy.bootstrap import ADMIN_PROJECT, ADMIN_USER


def answers(url: str) -> bool:
    """True when GET URL answers 200 within 5 s."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def admin_token_status(auth_url: str, password: str) -> int | None:
    """The status of the admin's token request (201 when Keystone is ready); None: no answer."""
    auth = UserAuth(username=ADMIN_USER, password=password, project_name=ADMIN_PROJECT)
    try:
        return check.token_status(auth_url, auth, include_catalog=False)
    except (OSError, ValueError):
        return None


def nodes_up(balancer_port: int | None, nodes: list[tuple[str, int]]) -> bool:
    """Each of NODES (name, port) answers /v3 and HAProxy counts it UP (True without nodes).

    HAProxy marks a node DOWN while it loads, and UP only at its next check
    after it answers: a run started before that check would send every
    request to the nodes that came up first.
    """
    if not nodes:
        return True
    if not all(answers(f"http://127.0.0.1:{p}/v3") for _, p in nodes):
        return False
    assert balancer_port is not None
    states = balancing.node_states(balancer_port)
    return all(states.get(name) == "UP" for name, _ in nodes)
