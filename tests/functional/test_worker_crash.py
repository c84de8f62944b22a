"""uWSGI workers killed mid-request: no request waits for uWSGI's 60 s timeout.

A Keystone (PostgreSQL) whose router gives up on a silent worker after
REQUEST_TIMEOUT s, token workloads with our contexts, and SIGKILL to the
worker processes, once while the load runs and once while keystone_users
creates its users.

Each kill lands on a request known to be in flight, by construction: a
psql session of the test locks one of Keystone's tables, Keystone's next
requests then wait for that lock inside their worker, and PostgreSQL names
them (``pg_blocking_pids``); the test kills exactly the workers that own
those database connections, then releases the lock. No sleep decides where
a kill lands (before, a kill "once 10 iterations are done" often fell
between two requests of a few milliseconds, and nothing failed).

During the load every held request fails and is counted, the durations
Rally recorded stay within the router's timeout plus how long the lock was
held plus SLACK_S, and the run ends; during setup the contexts' retries
carry the workload through and cleanup leaves no user behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rally_keystone_bench.clients.admin import AdminClient
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.deploy.keystone import LocalKeystone
from rally_keystone_bench.driver import task as rally_task
from rally_keystone_bench.driver import task_reports
from rally_keystone_bench.driver.rally import RallyHome, keystone_spec
from rally_keystone_bench.verdicts import results

# Not serial (since 2026-11-28): the bound on the durations Rally records,
# REQUEST_TIMEOUT + the lock's hold + SLACK_S (about 20 s), is far from what a
# neighbour's load adds. Looped at load average 2.9 to 16 (12 runs, then 7 at 4.3
# to 6.9, doc/source/gate-ci.rst), every run passed and the longest request took
# 5.1 to 5.8 s; the test tells that from uWSGI's 60 s. They wait on a lock more
# than they compute, so the parallel part takes them at little cost.
pytestmark = pytest.mark.functional

REQUEST_TIMEOUT = 5  # s: the router's 502 for a worker that went silent
UWSGI_DEFAULT_TIMEOUT = 60.0  # s: what a client waited without it
# Between a held request's end as the router sees it and Rally's record: the
# client's own work and a busy machine's scheduling (2 cores shared by
# several Keystones and Rallies). Generous on purpose; the test still tells
# seconds from uWSGI's minute, which it checks below.
SLACK_S = 15.0
HOLD_DEADLINE_S = 300.0  # how long to wait for held requests before giving up: a failure
PSQL = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"]


class TableLock:
    """A lock on one of Keystone's tables, held by a psql session until release()."""

    def __init__(self, database: str, table: str, mode: str) -> None:
        self.database = database
        self._watch: subprocess.Popen | None = None
        self._lock = f'LOCK TABLE "{table}" IN {mode} MODE;\nSELECT pg_backend_pid();\n'
        self._psql = subprocess.Popen(
            [*PSQL, "-d", database], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.pid = int(self._send("BEGIN;\nSAVEPOINT held;\n" + self._lock))

    def _send(self, sql: str) -> str:
        """Send SQL (ending in a SELECT) and return its answer: psql's next line."""
        assert self._psql.stdin and self._psql.stdout
        self._psql.stdin.write(sql)
        self._psql.stdin.flush()
        return self._psql.stdout.readline()

    def let_through(self) -> None:
        """Let the sessions that wait now go on, then hold the lock again.

        ROLLBACK TO SAVEPOINT releases the lock; the new LOCK queues behind
        the waiters it let go, and ahead of any session that comes later.
        """
        self._send("ROLLBACK TO SAVEPOINT held;\n" + self._lock)

    def waiting(self) -> list[tuple[int, str]]:
        """(client port, statement) of each session that waits for this lock."""
        if self._watch is None:  # a second session: a transaction sees one stats snapshot
            self._watch = subprocess.Popen(
                [*PSQL, "-F", "\t", "-d", self.database],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
        assert self._watch.stdin and self._watch.stdout
        self._watch.stdin.write(
            "SELECT client_port, regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_activity"
            f" WHERE {self.pid} = ANY(pg_blocking_pids(pid)) AND client_port IS NOT NULL;\n"
            "SELECT 'end';\n"
        )
        self._watch.stdin.flush()
        rows = []
        while (line := self._watch.stdout.readline()) != "end\n":
            if not line:
                raise RuntimeError("psql ended")
            port, query = line.rstrip("\n").split("\t", 1)
            rows.append((int(port), query))
        return rows

    def release(self) -> None:
        if self._psql.poll() is None:
            assert self._psql.stdin
            self._psql.stdin.write("ROLLBACK;\n")
            self._psql.stdin.close()
            self._psql.wait(timeout=30)
        if self._watch is not None:
            self._watch.communicate("\\q\n", timeout=30)


def workers_owning(master: int, ports: set[int]) -> set[int]:
    """Children of uWSGI's MASTER with a TCP connection from one of these local PORTS."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) in ports:
                inodes.add(f"socket:[{fields[9]}]")
    children = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True)
    owners = set()
    for pid in map(int, children.stdout.split()):
        try:
            links = {os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()}
        except OSError:
            continue
        if links & inodes:
            owners.add(pid)
    return owners


class Crash:
    """Hold TABLE, kill the workers whose requests wait for it, let go: in a thread.

    WANTED(statement) says which held requests to kill; a request held in
    any other statement is let through (lock.let_through). The kill waits
    until WANT wanted requests are held (one per worker: threads=1).
    """

    def __init__(self, ks, table: str, mode: str, wanted: Callable[[str], bool], want: int):
        self.ks, self.table, self.mode = ks, table, mode
        self.wanted, self.want = wanted, want
        self.killed: dict[int, str] = {}  # worker pid -> the statement it was held in
        self.let_through: list[str] = []  # statements held and let go on
        self.held_s = 0.0  # from the lock taken (again) to the kill
        self.error = ""
        self.done = threading.Event()
        self.stop = threading.Event()  # the task ended: stop waiting for a held request
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        if self._thread.ident is None:
            self._thread.start()

    def join(self) -> None:
        self.stop.set()
        if self._thread.ident is not None:  # started
            self.done.wait(HOLD_DEADLINE_S + 60)

    def _run(self) -> None:
        try:
            lock = TableLock(self.ks.database.name, self.table, self.mode)
            try:
                self._kill_held(lock)
            finally:
                lock.release()
        except Exception as exc:  # reported by the test, not lost in a thread
            self.error = repr(exc)
        finally:
            self.done.set()

    def _kill_held(self, lock: TableLock) -> None:
        master = self.ks.pids["server"]
        taken = started = time.monotonic()
        while time.monotonic() - started < HOLD_DEADLINE_S and not self.stop.is_set():
            waiting = dict(lock.waiting())
            others = [q for q in waiting.values() if not self.wanted(q)]
            if others:
                self.let_through.extend(q[:60] for q in others)
                lock.let_through()
                taken = time.monotonic()
                continue
            owners = workers_owning(master, set(waiting))
            if len(owners) >= self.want:
                for pid in owners:
                    os.kill(pid, signal.SIGKILL)
                self.held_s = time.monotonic() - taken
                self.killed = {pid: "; ".join(waiting.values())[:120] for pid in owners}
                return
            time.sleep(0.05)
        self.error = f"fewer than {self.want} wanted requests held; let through {self.let_through}"


@pytest.fixture(scope="module")
def keystone(tmp_path_factory):
    """One Keystone for both tests (uWSGI's master starts new workers after each kill)."""
    base = tmp_path_factory.mktemp("crash")
    dep = Deployment(db="postgresql", request_timeout=REQUEST_TIMEOUT, password_hash_rounds=4)
    with LocalKeystone(dep, base / "keystone") as ks:
        home = RallyHome(base / "rally")
        home.create_env("crash", keystone_spec(ks.admin_credentials))
        yield ks, home


def token_task(
    path: Path, times: int, concurrency: int, tenants: int, users: int, workers: int | None = None
) -> Path:
    """A token workload; WORKERS: keystone_users' resource_management_workers (its default)."""
    users_ctx: dict = {"users_per_tenant": users}
    if workers:
        users_ctx["resource_management_workers"] = workers
    subtask = {
        "title": "tokens while the workers die",
        "scenario": {"KeystoneTokens.authenticate": {"method": "password"}},
        "runner": {"constant": {"times": times, "concurrency": concurrency}},
        "contexts": {
            "keystone_tenants": {"tenants": tenants},
            "keystone_users": users_ctx,
        },
    }
    path.write_text(json.dumps({"version": 2, "title": "crash", "subtasks": [subtask]}))
    return path


def test_killed_workers_cost_seconds_not_a_minute(keystone, tmp_path):
    """Both workers killed while each holds a token request: both requests fail, fast.

    Slack: a held request ends at most REQUEST_TIMEOUT s after its worker
    died (the router's 502), and one sent after the kill waits at most that
    for a new worker; so no duration may exceed REQUEST_TIMEOUT + the time
    the lock was held + SLACK_S, a bound the test checks is below uWSGI's
    60 s, so it still tells the two apart. Nothing waits for time to pass.
    Measured over 14 looped runs (doc/source/gate-ci.rst): the lock held 0.04 to
    0.32 s, the longest request 5.1 to 5.8 s, about 14 s under the bound.
    """
    ks, home = keystone
    task = token_task(tmp_path / "crash.json", times=60, concurrency=2, tenants=1, users=2)
    # Every token request reads "user": both workers' next requests wait for the lock.
    crash = Crash(ks, "user", "ACCESS EXCLUSIVE", lambda q: q.startswith("SELECT"), want=2)

    def watch(run: rally_task.TaskRun, line: str) -> None:
        if run.counts.done >= 10:  # the load runs: setup is over
            crash.start()

    run = rally_task.start_task(home, "crash", task, {}, tmp_path / "crash.log", watch=watch)
    crash.join()
    assert not crash.error, crash.error
    assert len(crash.killed) == 2, crash.killed
    out = tmp_path / "crash-report.json"
    assert task_reports.json_report(home, run.uuid, out)
    (wl,) = results.load(out)
    assert wl.iterations == 60  # the run ended
    issue = wl.actions["keystone.issue_token"]
    assert int(issue.failed.sum()) >= 2  # each killed request is counted as failed
    assert wl.failed_iterations >= 2
    bound = REQUEST_TIMEOUT + crash.held_s + SLACK_S
    assert bound < UWSGI_DEFAULT_TIMEOUT, f"held {crash.held_s:.1f} s: cannot tell 5 s from 60"
    longest = {name: float(a.duration.max()) for name, a in wl.actions.items() if a.count}
    print(f"held {crash.held_s:.2f} s; failed {int(issue.failed.sum())}; longest {longest}")
    assert max(longest.values()) < bound, longest


SETUP_DONE = re.compile(r"keystone_users setup: (\d+) retr")


def test_context_setup_survives_killed_workers_by_its_retries(keystone, tmp_path):
    """A worker killed while it creates one of keystone_users' users: the context retries.

    A SHARE lock on local_user is held from before the task starts: reads go
    on (tokens, keystone_tenants), user creations and deletions wait. Rally's
    own users context (validation, then setup) is let through; the first
    keystone_users creation held (its INSERT names an ``rkb-`` user) has its
    worker killed there. No timing slack: the test waits for states
    (HOLD_DEADLINE_S only bounds a failure). keystone_users sends two
    creations at a time: with its default 20 on a busy machine, the requests
    the router gave up on (5 s) while the new workers loaded Keystone queued
    faster than they were served, every answer came too late, and the
    context gave up (seen once in the flake hunt).
    """
    ks, home = keystone
    # As many creations at once as Keystone has workers: after the kill, abandoned
    # requests cannot pile up in uWSGI's queue faster than two new workers serve them.
    task = token_task(
        tmp_path / "setup.json", times=6, concurrency=2, tenants=3, users=10, workers=2
    )
    admin = AdminClient(ks.admin_credentials)

    def ours(statement: str) -> bool:
        return statement.startswith("INSERT INTO local_user") and "'rkb-" in statement

    crash = Crash(ks, "local_user", "SHARE", ours, want=1)
    crash.start()
    lines: list[str] = []

    def watch(run: rally_task.TaskRun, line: str) -> None:
        lines.append(line)

    try:
        run = rally_task.start_task(home, "crash", task, {}, tmp_path / "setup.log", watch=watch)
    finally:
        crash.join()
    assert not crash.error, crash.error
    assert crash.killed, "no user creation was held"
    out = tmp_path / "setup-report.json"
    assert task_reports.json_report(home, run.uuid, out)
    (wl,) = results.load(out)
    assert wl.iterations == 6, f"its context setup failed; held {crash.held_s:.1f} s"
    retried = [int(m.group(1)) for m in map(SETUP_DONE.search, lines) if m]
    print(f"held {crash.held_s:.2f} s in setup; retries {retried}; killed {crash.killed}")
    print(f"let through: {crash.let_through}")
    assert retried and retried[0] >= 1, "".join(lines[-20:])
    assert [u["name"] for u in admin.list_prefixed("users", "rkb")] == []
    assert [p["name"] for p in admin.list_prefixed("projects", "rkb")] == []
