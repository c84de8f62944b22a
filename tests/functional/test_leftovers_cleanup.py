"""What a run cut short leaves in a cloud, and the command it prints to delete it (item 5).

A real Keystone. ``keystone-bench cleanup --workload-id ID`` deletes every kind
of resource our contexts name with a workload's prefix (and Rally's stock
users context's), and nothing else; ``run --existing-cloud`` whose Rally is
killed while its contexts set up prints that command, and the command as
printed leaves the cloud as it was.
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import shlex
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rally_keystone_bench.clients import credentials
from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.engines.locust import setup as locust_setup
from rally_keystone_bench.plugins.contexts import leftovers

pytestmark = pytest.mark.functional

BENCH = [sys.executable, "-m", "rally_keystone_bench.cli"]
WAIT_S = 600  # a busy 2-core machine: Rally's env creation and start take minutes at worst


def cloud_environ(keystone) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update(credentials.os_variables(keystone.admin_credentials))
    return env


def remaining(admin: AdminClient, short: str) -> dict[str, list[str]]:
    """Per kind, the names (region ids) still carrying SHORT's prefixes; empty kinds left out."""
    found = leftovers.find(admin, short)
    return {k: sorted(r.get("name") or r["id"] for r in v) for k, v in found.items() if v}


def make_everything(admin: AdminClient, prefix: str, domain: str) -> None:
    """One of each kind our contexts create, named as they name them."""

    def post(kind: str, body: dict) -> dict:
        single = kind[:-1]
        _, got = admin.request("POST", f"/{kind}", f"create {single}", json={single: body})
        return got[single]

    root = post("projects", {"name": f"{prefix}tree01", "domain_id": domain})
    leaf = post("projects", {"name": f"{prefix}p00", "domain_id": domain, "parent_id": root["id"]})
    user = post("users", {"name": f"{prefix}p00-u0000", "domain_id": domain, "password": "x"})
    group = post("groups", {"name": f"{prefix}group000", "domain_id": domain})
    role = post("roles", {"name": f"{prefix}role000"})
    admin.request("PUT", f"/projects/{leaf['id']}/users/{user['id']}/roles/{role['id']}", "grant")
    admin.request("PUT", f"/groups/{group['id']}/users/{user['id']}", "add to group")
    region = post("regions", {"id": f"{prefix}region00"})
    service = post("services", {"name": f"{prefix}svc000", "type": f"{prefix}svc000"})
    post(
        "endpoints",
        {
            "service_id": service["id"],
            "region_id": region["id"],
            "interface": "public",
            "url": "http://x.invalid/v1",
        },
    )


def test_cleanup_workload_deletes_every_kind_our_contexts_make_and_nothing_else(
    small_keystone, tmp_path
):
    admin = AdminClient(small_keystone.admin_credentials, pool_size=2)
    domain = admin.admin_project_domain_id()
    short, other = secrets.token_hex(4), secrets.token_hex(4)
    make_everything(admin, leftovers.run_prefix(short), domain)
    stock = f"c_rally_{short}_abcdefgh"  # Rally's stock users context
    _, p = admin.request(
        "POST", "/projects", "create", json={"project": {"name": stock, "domain_id": domain}}
    )
    admin.request("POST", "/users", "create", json={"user": {"name": stock, "domain_id": domain}})
    _, kept = admin.request(
        "POST", "/projects", "create", json={"project": {"name": f"rkb-{other}-p00"}}
    )
    try:
        assert set(remaining(admin, short)) == set(leftovers.KINDS)
        proc = subprocess.run(
            [*BENCH, "cleanup", "--workload-id", f"{short}-0000-4000-8000-000000000000"],
            capture_output=True, text=True, cwd=tmp_path, env=cloud_environ(small_keystone),
            timeout=WAIT_S,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(
            f"workload {short}: deleted 2 users, 1 groups, 3 projects, 1 roles, 1 services, "
            "1 regions"
        ), proc.stdout
        assert remaining(admin, short) == {}
        assert admin.get("projects", kept["project"]["id"]) is not None  # another workload's
    finally:
        admin.delete("projects", kept["project"]["id"])
        leftovers.delete_workload(admin, short)


def long_setup_task(path: Path) -> Path:
    """Sixty projects made one at a time, then a long load: minutes before any cleanup."""
    task = {
        "version": 2,
        "title": "cut short",
        "subtasks": [
            {
                "title": "many projects",
                "scenario": {"KeystoneTokens.authenticate": {"method": "password"}},
                "runner": {"constant": {"times": 100000, "concurrency": 1}},
                "contexts": {
                    "keystone_tenants": {"tenants": 60, "resource_management_workers": 1},
                    "keystone_users": {"users_per_tenant": 1, "resource_management_workers": 1},
                },
            }
        ],
    }
    path.write_text(json.dumps(task))
    return path


def workload_of(root: Path) -> str | None:
    """The first workload uuid in the run's Rally database under ROOT, once Rally made it."""
    for db in root.glob(".keystone-bench/runs/*/rally/rally.sqlite"):
        try:
            with sqlite3.connect(db, timeout=5) as conn:
                row = conn.execute("SELECT uuid FROM workloads ORDER BY id").fetchone()
        except sqlite3.Error:
            continue
        if row:
            return row[0]
    return None


def rally_pid(task: Path) -> int | None:
    """The ``rally task start`` of TASK (its process group leader)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in cmd]
        if "start" in words and str(task) in words and any("rally" in w for w in words[:2]):
            return int(entry.name)
    return None


def test_a_run_whose_rally_is_killed_in_setup_prints_the_cleanup_that_cleans_it(
    small_keystone, tmp_path
):
    """Rally gets SIGKILL once 3 of the workload's 60 projects exist in Keystone: its
    contexts are setting up (60 creates one at a time) or the load has begun, and no
    cleanup can run either way. Slack: polled every 0.2 s; the other 57 creates take
    seconds, and the 100,000 iterations after them minutes."""
    task = long_setup_task(tmp_path / "cut-short.json")
    env = cloud_environ(small_keystone)
    admin = AdminClient(small_keystone.admin_credentials, pool_size=2)
    proc = subprocess.Popen(
        [*BENCH, "run", str(task), "--existing-cloud", "--reports-dir", "reports"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    short = None
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and proc.poll() is None:
            workload = workload_of(tmp_path)
            if workload:
                short = leftovers.short_id(workload)
                if len(admin.list_prefixed("projects", leftovers.run_prefix(short))) >= 3:
                    break
            time.sleep(0.2)
        assert proc.poll() is None and short, proc.stderr.read()[-3000:] if proc.stderr else ""
        pid = rally_pid(task)
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    try:
        assert proc.returncode == 2, err[-3000:]
        assert "Traceback" not in err
        assert remaining(admin, short), "nothing was left: the test proves nothing"
        said = [ln for ln in out.splitlines() if "keystone-bench cleanup" in ln]
        assert len(said) == 1, out
        assert said[0].startswith("rally task start exited -9 before its cleanup ended")
        assert "SLA passed" not in out and "rally task start exited -9: no SLA verdict" in out
        assert "openstack" not in said[0]
        command = re.search(r"keystone-bench cleanup .*$", said[0]).group(0)
        assert command == f"keystone-bench cleanup --workload-id {short}"
        argv = shlex.split(command)[1:]
        done = subprocess.run(
            [*BENCH, *argv], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=WAIT_S
        )
        assert done.returncode == 0, done.stderr
        assert remaining(admin, short) == {}
    finally:
        if short:
            leftovers.delete_workload(admin, short)


def test_a_second_ctrl_c_on_a_cloud_run_prints_the_cleanup_that_cleans_it(small_keystone, tmp_path):
    """SIGINT once 3 of the workload's 60 projects exist, a second SIGINT once keystone-bench
    said it is stopping the load: exit 130, "interrupted twice: cleanup cut short" and the
    command, which leaves no project or user of the workload. No luck needed: whether or
    not Rally's cleanup got anywhere before the second signal, the command must leave
    nothing (so this test does not assert that something was left). Slack: as above."""
    task = long_setup_task(tmp_path / "twice.json")
    env = cloud_environ(small_keystone)
    admin = AdminClient(small_keystone.admin_credentials, pool_size=2)
    proc = subprocess.Popen(
        [*BENCH, "run", str(task), "--existing-cloud", "--reports-dir", "reports"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # One reader per pipe: stderr line by line (the test waits on a line), stdout whole.
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
    outs: list[str] = []
    stdout_reader = threading.Thread(target=lambda: outs.append(proc.stdout.read()), daemon=True)
    stdout_reader.start()
    short, seen, out = None, [], ""
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and proc.poll() is None:
            workload = workload_of(tmp_path)
            if workload:
                short = leftovers.short_id(workload)
                if len(admin.list_prefixed("projects", leftovers.run_prefix(short))) >= 3:
                    break
            time.sleep(0.2)
        assert proc.poll() is None and short
        proc.send_signal(signal.SIGINT)
        while not any("SIGINT: stopping the load" in x for x in seen):
            seen.append(lines.get(timeout=WAIT_S))
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=WAIT_S)
        stdout_reader.join(timeout=60)
        out = "".join(outs)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        assert proc.returncode == 130, "".join(seen)[-3000:]
        said = [ln for ln in out.splitlines() if "keystone-bench cleanup" in ln]
        assert len(said) == 1 and said[0].startswith("interrupted twice: cleanup cut short"), out
        assert "SLA passed" not in out
        command = re.search(r"keystone-bench cleanup .*$", said[0]).group(0)
        assert command == f"keystone-bench cleanup --workload-id {short}"
        done = subprocess.run(
            [*BENCH, *shlex.split(command)[1:]],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=WAIT_S,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert remaining(admin, short) == {}
    finally:
        if short:
            leftovers.delete_workload(admin, short)


def test_a_capacity_probe_cut_short_on_a_cloud_prints_the_cleanup_that_cleans_it(
    small_keystone, tmp_path
):
    """``capacity --target cloud``: SIGINT once the probe's workload has its project in
    Keystone (its contexts are setting up or the load has begun), a second SIGINT once
    keystone-bench said it is stopping the load: exit 130, "interrupted twice: cleanup
    cut short" and the command, which as printed leaves no project or user of the
    workload. Whether Rally's cleanup got anywhere before the second signal is luck, so
    the test asserts the line and the clean cloud, not that something was left. Slack:
    polled every 0.2 s; the probe's 30 s window leaves Rally running for half a minute
    after its setup, and each wait is bounded by WAIT_S."""
    env = cloud_environ(small_keystone)
    admin = AdminClient(small_keystone.admin_credentials, pool_size=2)
    argv = ["capacity", "--scenario", "authenticate", "--target", "cloud", "--low", "2"]
    argv += ["--high", "4", "--warmup", "0", "--window", "30", "--reports-dir", "reports"]
    proc = subprocess.Popen(
        [*BENCH, *argv], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
    short, seen = None, []
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and proc.poll() is None:
            workload = workload_of(tmp_path)
            if workload:
                short = leftovers.short_id(workload)
                if admin.list_prefixed("projects", leftovers.run_prefix(short)):
                    break
            time.sleep(0.2)
        assert proc.poll() is None and short
        proc.send_signal(signal.SIGINT)
        while not any("SIGINT: stopping the load" in x for x in seen):
            seen.append(lines.get(timeout=WAIT_S))
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        assert proc.returncode == 130, "".join(seen)[-3000:]
        said = [ln for ln in out.splitlines() if "keystone-bench cleanup" in ln]
        assert len(said) == 1 and said[0].startswith("interrupted twice: cleanup cut short"), out
        assert f"in the cloud at {small_keystone.auth_url}" in said[0]
        command = re.search(r"keystone-bench cleanup .*$", said[0]).group(0)
        assert command == f"keystone-bench cleanup --workload-id {short}"
        done = subprocess.run(
            [*BENCH, *shlex.split(command)[1:]],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=WAIT_S,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert remaining(admin, short) == {}
    finally:
        if short:
            leftovers.delete_workload(admin, short)


def test_cleanup_load_deletes_what_a_locust_load_made_and_nothing_else(
    small_keystone, tmp_path, monkeypatch
):
    """The users and project a Locust master makes (setup.prepare, under the run id
    keystone-bench gave it), as a killed master leaves them: ``cleanup --load ID``
    deletes them and not another load's."""
    admin = AdminClient(small_keystone.admin_credentials, pool_size=2)
    run_id, other = locust_setup.new_run_id(), locust_setup.new_run_id()
    monkeypatch.setenv(locust_setup.RUN_ID_ENV, run_id)
    made = locust_setup.prepare(admin, 2)
    _, kept = admin.request(
        "POST", "/projects", "create", json={"project": {"name": f"kbl-{other}"}}
    )
    try:
        assert made.run_id == run_id
        assert {k: len(v) for k, v in locust_setup.find_run(admin, run_id).items()} == {
            "users": 2,
            "projects": 1,
        }
        proc = subprocess.run(
            [*BENCH, "cleanup", "--load", run_id],
            capture_output=True, text=True, cwd=tmp_path, env=cloud_environ(small_keystone),
            timeout=WAIT_S,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == f"load {run_id}: deleted 2 users, 1 projects (kbl-{run_id}*)\n"
        assert locust_setup.find_run(admin, run_id) == {"users": [], "projects": []}
        assert admin.get("projects", kept["project"]["id"]) is not None  # another load's
    finally:
        admin.delete("projects", kept["project"]["id"])
        locust_setup.delete_run(admin, run_id)


def master_pid(cwd: Path) -> int | None:
    """The ``locust --master`` whose output directory is under CWD (this test's), once its
    log says it made its users."""
    for log in cwd.glob("reports/*/locust/master.log"):
        if "users made" not in log.read_text(errors="replace"):
            continue
        rel = str(log.parent.relative_to(cwd))
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                words = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if "--master" in words and any(w.endswith(rel) for w in words):
                return int(entry.name)
    return None


def test_a_killed_locust_master_on_a_cloud_prints_the_cleanup_that_cleans_it(
    small_keystone, tmp_path
):
    """``load --engine locust --target cloud``: SIGKILL to this test's Locust master once
    its log says its users are made (it cannot delete them then): exit 2, the names
    left and ``keystone-bench cleanup --load ID``, which as printed leaves none of
    them. Slack: polled every 0.2 s; the load runs 60 s after its users are made."""
    env = cloud_environ(small_keystone)
    admin = AdminClient(small_keystone.admin_credentials, pool_size=2)
    argv = ["load", "--engine", "locust", "--target", "cloud", "--scenario", "authenticate"]
    argv += ["--rate", "5", "--duration", "60", "--reports-dir", "reports"]
    proc = subprocess.Popen(
        [*BENCH, *argv], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    run_id = None
    try:
        deadline = time.monotonic() + WAIT_S
        pid = None
        while time.monotonic() < deadline and proc.poll() is None and pid is None:
            pid = master_pid(tmp_path)
            time.sleep(0.2)
        assert pid is not None, proc.stderr.read()[-3000:] if proc.poll() is not None else ""
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        assert proc.returncode == 2, err[-3000:]
        assert "the Locust master was killed (SIGKILL)" in err
        said = [ln for ln in out.splitlines() if "keystone-bench cleanup" in ln]
        assert len(said) == 1, out
        run_id = re.search(r"keystone-bench cleanup --load ([0-9a-f]{8})$", said[0]).group(1)
        assert locust_setup.find_run(admin, run_id)["users"], "nothing was left: proves nothing"
        assert f"project kbl-{run_id}." in said[0]
        done = subprocess.run(
            [*BENCH, *shlex.split(said[0].split("with: ", 1)[1])[1:]],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=WAIT_S,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert locust_setup.find_run(admin, run_id) == {"users": [], "projects": []}
    finally:
        if run_id:
            locust_setup.delete_run(admin, run_id)
