"""The foundation, end to end: a real Keystone, the real rally CLI, the real verbs."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ENV, run_task

from rally_keystone_bench.deploy import process

pytestmark = pytest.mark.functional

BENCH = [sys.executable, "-m", "rally_keystone_bench.cli"]
ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 600):
    return subprocess.run(
        [*BENCH, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout
    )


def test_rally_finds_our_plugins_through_the_entry_point(rally_home):
    out = rally_home.rally("plugin", "list", "--platform", "openstack").stdout
    for name in ("KeystoneTokens.authenticate", "keystone_users", "token_pool"):
        assert name in out
    assert "latency_slope" in rally_home.rally("plugin", "list").stdout


def test_rally_env_check_passes_and_rally_keeps_its_state_in_our_home(rally_home):
    proc = rally_home.rally("env", "check", "--env", ENV, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (rally_home.path / "rally.sqlite").exists()
    spec = json.loads(rally_home.rally("env", "show", "--env", ENV, "--only-spec").stdout)
    assert spec["existing@openstack"]["api_info"]["keystone"]["version"] == 3


def test_a_tiny_task_runs_through_rally_task_start(rally_home, tmp_path):
    task = {
        "version": 2,
        "title": "tiny",
        "subtasks": [
            {
                "title": "issue tokens",
                "scenario": {"KeystoneTokens.authenticate": {}},
                "runner": {"constant": {"times": 4, "concurrency": 2}},
                "contexts": {"users": {"tenants": 1, "users_per_tenant": 2}},
                "sla": {"failure_rate": {"max": 0}},
            }
        ],
    }
    rc, report = run_task(rally_home, task, tmp_path)
    assert rc == 0
    workload = report["tasks"][0]["subtasks"][0]["workloads"][0]
    assert workload["pass_sla"] is True
    assert len(workload["data"]) == 4
    assert all(not it["error"] for it in workload["data"])


def test_keystone_up_status_down_leaves_nothing_running(tmp_path):
    run_dir = tmp_path / "ks"
    up = bench("keystone", "up", "--run-dir", str(run_dir))
    assert up.returncode == 0, up.stderr
    state = json.loads((run_dir / "state.json").read_text())
    pids = process.group_members(state["pids"]["server"])
    try:
        assert len(pids) >= 3  # master, 2 workers, the HTTP router
        assert "Keystone is up: http://127.0.0.1:" in up.stdout
        openrc = run_dir / "openrc"
        assert f"source {openrc.resolve()}" in up.stdout
        assert stat.S_IMODE(os.stat(openrc).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(run_dir / "admin-password").st_mode) == 0o600
        assert bench("keystone", "status", "--run-dir", str(run_dir)).returncode == 0

        # `source RUN_DIR/openrc` works with `rally env create --from-sysenv`.
        home = tmp_path / "rally"
        home.mkdir()
        script = (
            f"source {openrc} && rally --config-file {home}/rally.conf db ensure >/dev/null"
            f" && rally --config-file {home}/rally.conf env create --name sysenv"
            " --from-sysenv --no-use >/dev/null"
            f" && rally --config-file {home}/rally.conf env check --env sysenv"
        )
        (home / "rally.conf").write_text(f"[database]\nconnection = sqlite:///{home}/r.sqlite\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env["HOME"] = str(home)
        env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
        checked = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        down = bench("keystone", "down", "--run-dir", str(run_dir))
    assert down.returncode == 0
    assert "stopped" in down.stdout
    assert not any(process.is_alive(p) for p in pids)
    assert (run_dir / "keystone.log").exists() and (run_dir / "access.log").exists()
    assert bench("keystone", "status", "--run-dir", str(run_dir)).returncode == 2


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("keystone-bench: ")]
    assert lines, proc.stderr
    return lines[-1]


def test_run_refuses_a_missing_task_file_before_starting_anything(tmp_path):
    proc = bench("run", str(tmp_path / "missing.yaml"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "task file" in one_line_error(proc) and "does not exist" in proc.stderr
    assert not (tmp_path / ".keystone-bench").exists()


def test_run_on_an_unreachable_cloud_exits_2(tmp_path):
    port = process.find_free_port()
    env = dict(os.environ)
    env.update(
        OS_AUTH_URL=f"http://127.0.0.1:{port}/v3",
        OS_USERNAME="admin",
        OS_PASSWORD="never-printed-0451",
        OS_PROJECT_NAME="admin",
    )
    proc = bench(
        "run", str(ROOT / "tasks/token-suite.yaml"), "--existing-cloud", cwd=tmp_path, env=env
    )
    assert proc.returncode == 2
    assert "unreachable" in one_line_error(proc)
    assert "never-printed-0451" not in proc.stderr + proc.stdout


def test_keystone_up_on_a_taken_port_exits_2(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = bench("keystone", "up", "--port", str(port), "--run-dir", str(tmp_path / "ks"))
    assert proc.returncode == 2
    assert f"port {port}" in one_line_error(proc)
    assert not (tmp_path / "ks" / "state.json").exists()


def test_keystone_up_with_a_spec_pip_cannot_install_exits_2(tmp_path):
    env = dict(os.environ, KEYSTONE_BENCH_CACHE=str(tmp_path / "cache"))
    proc = bench(
        "keystone",
        "up",
        "--keystone",
        "keystone==0.0.0.dev0",
        "--run-dir",
        str(tmp_path / "ks"),
        env=env,
    )
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "could not install keystone==0.0.0.dev0" in line
    assert not (tmp_path / "ks" / "state.json").exists()


def test_run_writes_reports_and_stops_keystone(tmp_path):
    task = tmp_path / "tiny.yaml"
    task.write_text(
        "---\nversion: 2\ntitle: tiny\nsubtasks:\n"
        "  - title: issue\n"
        "    scenario: {KeystoneTokens.authenticate: {}}\n"
        "    runner: {constant: {times: 3, concurrency: 1}}\n"
        "    contexts: {users: {tenants: 1, users_per_tenant: 1}}\n"
        "    sla: {failure_rate: {max: 0}}\n"
    )
    # 4 bcrypt rounds: this test measures no password hashing.
    proc = bench(
        "run", str(task), "--password-hash-rounds", "4",
        "--reports-dir", str(tmp_path / "reports"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (stamp,) = list((tmp_path / "reports").iterdir())
    report = json.loads((stamp / "tiny.json").read_text())
    assert report["tasks"][0]["subtasks"][0]["workloads"][0]["pass_sla"] is True
    assert (stamp / "tiny.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert "keystone.issue_token" in proc.stdout and "p95 ms" in proc.stdout
    (run_dir,) = list((tmp_path / ".keystone-bench" / "runs").iterdir())
    state = json.loads((run_dir / "keystone" / "state.json").read_text())
    assert state["pids"] == {}
    assert "Keystone stopped" in proc.stderr
