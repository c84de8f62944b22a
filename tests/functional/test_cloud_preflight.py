"""A wrong password or a web page at the auth URL: the real reason, one line, exit 2.

Issue 27, items 3 and 9: ``run --existing-cloud`` printed only Rally's "env
check failed ... :-(", and ``load --target cloud`` a TypeError.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rally_keystone_bench.deploy.mock import MockKeystone
from rally_keystone_bench.deploy.process import find_free_port

pytestmark = pytest.mark.functional

# A task that needs no argument: since the door checks a task's arguments first,
# tasks/gate.yaml (the gate's sides) would be refused before the cloud is asked.
RUN = ["run", "--existing-cloud", "tasks/token-suite.yaml"]
LOAD = ["load", "--target", "cloud", "--scenario", "authenticate", "--duration", "2"]


def cli(tmp_path, argv, auth_url, password):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update(
        HOME=str(tmp_path),
        OS_AUTH_URL=auth_url,
        OS_USERNAME="admin",
        OS_PASSWORD=password,
        OS_PROJECT_NAME="admin",
    )
    repo = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    argv = [*argv, "--reports-dir", str(tmp_path / "reports")]
    return subprocess.run(
        [sys.executable, "-m", "rally_keystone_bench.cli", *argv],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def mock(tmp_path_factory):
    with MockKeystone(run_dir=tmp_path_factory.mktemp("mock")) as ks:
        yield ks


@pytest.fixture(scope="module")
def web_page(tmp_path_factory):
    """A plain web server: text/html at every path."""
    port = find_free_port()
    root = tmp_path_factory.mktemp("www")
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import socket
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v3"
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("argv", [RUN, LOAD], ids=["run", "load"])
def test_wrong_password_says_http_401(tmp_path, mock, argv):
    proc = cli(tmp_path, argv, mock.auth_url, "not-the-password")
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "admin authentication: HTTP 401" in last
    assert "TypeError" not in proc.stderr and "not-the-password" not in proc.stderr


@pytest.mark.parametrize("argv", [RUN, LOAD], ids=["run", "load"])
def test_a_web_page_is_not_a_keystone(tmp_path, web_page, argv):
    proc = cli(tmp_path, argv, web_page, "x")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"keystone-bench: auth URL {web_page} is not a Keystone: got text/html, not JSON"
    ]
    assert not list((tmp_path / "reports").glob("*/load.json"))
